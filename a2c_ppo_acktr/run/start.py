"""Opening a run for ``main.py``'s loop, and what its opening and its end say: ``open_run(cfg)``
checks what is on disk, builds the run (directories, envs, policy, agent, reward models, the
collector, its logs), restored on --resume, and closes it at the end; it holds the run's lock and
the Ctrl-C / SIGTERM / SIGHUP handling meanwhile.

Its one-line errors: bad input found while building exits 2 (``errors.fail``), nothing left on
disk; a signal while building undoes what was built; a failure mid-run (a log that cannot be
written, memory running out) stops the run, keeping its last checkpoint. Each of these, and a
resumed run with nothing left to train, ends ``open_run`` with ``RunEnded`` and its exit status.
A run that ends before its first checkpoint is undone, so that it can start again.
"""
import contextlib
import functools
import os
from collections.abc import Iterator

import numpy as np
import torch

from a2c_ppo_acktr import speed
from a2c_ppo_acktr.config import Config
from a2c_ppo_acktr.errors import (
    CheckpointError,
    Error,
    allocation_failure,
    fail,
    failure_line,
    memory_limit,
    print_details,
    program,
    say,
    warn,
)
from a2c_ppo_acktr.run.build import build
from a2c_ppo_acktr.run.checkpoint import checkpoint_state, load_checkpoint, run_paths, write_config
from a2c_ppo_acktr.run.interrupt import Interrupted, StopRequest
from a2c_ppo_acktr.run.life import Run, open_logs
from a2c_ppo_acktr.run.rundir import RunLocks, abandon, check_run, left_behind, make_run_dirs
from a2c_ppo_acktr.run.tracking import start_tracking
from a2c_ppo_acktr.sampling.ddp import DDP
from a2c_ppo_acktr.speed import keep_freed_memory


class NothingLeft(Exception):
    """--resume of a run that has trained its --num-env-steps: ``str()`` says so."""


class RunEnded(Exception):
    """The run ended other than by its loop's return, said in one line: ``status`` is the exit
    status (0 nothing left to train, 1 a failure mid-run, 128 + signal while building)."""

    def __init__(self, status: int) -> None:
        super().__init__(status)
        self.status = status


@contextlib.contextmanager
def open_run(cfg: Config) -> Iterator[Run]:
    """The run of ``cfg``, built (``start``), for the loop; closed when the loop ends. Bad input:
    one line and exit 2; other endings raise ``RunEnded`` (module docstring)."""
    keep_freed_memory()  # each update would otherwise fault its tensors' pages in afresh
    # Ctrl-C / SIGTERM / SIGHUP: finish the update, save, exit 130 / 143 / 129; the run's lock
    # (rundir.py) is held until the run is closed
    with StopRequest() as stop, contextlib.closing(RunLocks()):
        try:
            run = start(cfg, stop)
        except Error as e:  # bad input found while building: one line, nothing left on disk
            print_details(e)  # a failing env's own traceback, once
            fail(str(e))
        except Interrupted as e:  # a signal while building: undone, one line
            say(f"{program()}: {e}")
            raise RunEnded(e.exit_status) from None
        except NothingLeft as e:  # nothing built; done as asked
            print(e, flush=True)
            raise RunEnded(0) from None
        except (MemoryError, RuntimeError) as e:  # sizes in range that this machine cannot hold
            if (size := allocation_failure(e)) is None:
                raise
            fail(f"cannot allocate {size} to build the run: the network (--hidden-size) or the "
                 "rollout storage (--num-processes * --num-steps) does not fit in "
                 f"{memory_limit()}")
        except OSError as e:  # too many open files (ulimit -n), a full disk: one line
            if (what := failure_line(e)) is None:
                raise
            fail(what)
        try:
            yield run
        except Exception as e:  # e.g. a log that cannot be written, a memory limit met by the
            # optimizer's first state: one line; what is not foreseen is traced back
            what = failure_line(e)
            if what is None and (size := allocation_failure(e)) is not None:
                what = f"cannot allocate {size} (this machine's memory, or ulimit -v)"
            print_details(e)  # a failing env's own traceback, once
            if run.ddp:  # under torchrun the other ranks stop too, told why (sampling/ddp.py)
                what = run.ddp.stopping(what, run.env_steps, e)
            if what is None:
                raise
            if run.lead:
                say(f"{program()}: error: {what}; stopped, "
                    f"{left_behind(run.paths, run.saved_steps)}")
            elif run.ddp and run.ddp.speaks:  # rank 0, which saves, is gone: this rank says why
                say(f"{program()}: error: {what}; stopped (the checkpoint is rank 0's last "
                    "save, if any)")
            raise RunEnded(1) from None
        finally:
            run.close()
            if (not run.finished and run.lead and run.paths.checkpoint
                    and run.saved_steps is None):
                # Nothing to --resume: the run is undone, as one that failed to start, so that
                # it can start again (a run that saves no checkpoint keeps its logs).
                abandon(run.paths, run.created, resumed=False)


def speed_line(applied: list[str]) -> str:
    """The run's line on the speed seam (``speed.speed_up``): what is on, and how to turn it off
    (what runs is then exactly the code a reader reads in the core)."""
    if not applied:
        return (f"speed seam: off ({speed.SWITCH}={os.environ.get(speed.SWITCH, 'all')}; the "
                "core runs as written)")
    return (f"speed seam: {', '.join(applied)} (the same numbers, faster; "
            f"{speed.SWITCH}=none turns it off, =NAME,... keeps some; docs/design.md)")


def start(cfg: Config, stop: StopRequest) -> Run:
    """Check what is on disk (``Error`` when bad, before anything is written) and read the
    checkpoint on --resume, make the run's directories, build the run (``build.build``), then
    write its config and start its tracking. A signal meanwhile (``stop``) undoes what was built
    and raises ``Interrupted``."""
    paths = run_paths(cfg.run)
    ddp = DDP.from_env(cfg.run.cuda)  # under torchrun: this process is one rank of one learner
    rank, lead = (ddp.rank, ddp.is_lead) if ddp else (0, True)

    def stop_if_asked() -> None:  # all ranks at the same points, as they stop together
        requested = ddp.any(stop.requested) if ddp else None  # any rank's request stops them all
        stop.check(requested)

    if lead:
        check_run(cfg.run, paths)
    resumed = None
    if cfg.run.resume:
        assert paths.checkpoint is not None  # rundir.check_run refuses --resume without one
        try:
            resumed = load_checkpoint(paths.checkpoint)
        except CheckpointError as e:
            raise CheckpointError(f"--resume: {e}") from None
    env_steps = resumed["env_steps"] if resumed else 0
    if resumed and env_steps >= cfg.run.whole_steps:
        raise NothingLeft(f"nothing to train: {paths.checkpoint} already holds {env_steps:,} "
                          f"steps, --num-env-steps {cfg.run.num_env_steps:,}; a larger "
                          "--num-env-steps continues the run")

    # Seeds the CUDA generators too, lazily: a CPU run never initializes CUDA.
    torch.manual_seed(cfg.run.seed + rank)  # ranks sample apart; all start from rank 0's weights
    np.random.seed(cfg.run.seed)
    if cfg.run.cuda and cfg.run.cuda_deterministic:
        torch.backends.cudnn.benchmark = False
        torch.backends.cudnn.deterministic = True
    device = ddp.device if ddp else torch.device("cuda:0" if cfg.run.cuda else "cpu")

    # Inputs are valid: from here on this run's directories exist, until it fails to start.
    stop_if_asked()
    created = make_run_dirs(cfg.run, paths, resumed) if lead else []
    if ddp:
        ddp.barrier()  # the other ranks write monitor files once rank 0 has cleaned the dir
    parts = None
    try:
        parts = build(cfg, paths, device, resumed, ddp)  # closed by itself on its own failures
        stop_if_asked()
        if lead:
            write_config(cfg.record, paths.log_dir)
        tracker = start_tracking(cfg.run, cfg.record, paths) if lead else None  # last: it cannot be undone
    except BaseException:
        if parts is not None:  # closes the envs too
            parts.collector.close()
        if lead:
            abandon(paths, created, bool(resumed))
        raise
    logs = []
    if lead:  # the run has started: what it should know, then where its files go
        for warning in cfg.warnings:
            warn(warning)
        for note in cfg.notes:  # the recipe's values, or what a resumed run changed
            print(note, flush=True)
        if parts.inexact:
            warn(f"--resume continues approximately, from new episodes: {parts.inexact}")
        print(f"run files: log directory {paths.log_dir}/, checkpoint "
              f"{paths.checkpoint or 'none (--save-dir is empty)'}", flush=True)
        updates, steps_per_update = parts.updates, parts.steps_per_update
        total = updates.stop * steps_per_update
        print(f"training {total:,} steps: {updates.stop:,} updates of {steps_per_update:,}"
              + (f" (--num-env-steps {cfg.run.num_env_steps:,} rounded down to whole updates)"
                 if total != cfg.run.num_env_steps else "")
              + (f", resumed after {env_steps:,}" if resumed else ""), flush=True)
        print(speed_line(parts.sped), flush=True)
        logs = open_logs(paths, bool(resumed), cfg.record, cfg.run.eval_interval is not None,
                         tracker)
    return Run(paths, lead, parts.collector, parts.actor_critic, parts.agent,
               list(parts.reward_models.values()), parts.updates, parts.steps_per_update,
               parts.evaluator, stop=stop, ddp=ddp,
               state=functools.partial(checkpoint_state, cfg, parts.components, parts.collector),
               settings=cfg.run, logs=logs, tracker=tracker, created=created,
               saved_steps=env_steps if resumed else None, final_eval=parts.final_eval)
