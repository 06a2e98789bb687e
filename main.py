"""Train an on-policy agent: ``python main.py --algo ppo --env-name CartPole-v1 ...``.

The loop (``train``) is the algorithm box of the papers: collect ``num_steps`` transitions from
``num_processes`` envs, bootstrap from the last observation, compute returns (GAE or n-step),
update the agent, then log / save / evaluate. How the envs are stepped (in this process, in a
thread, in Ray workers, on torchrun ranks) is chosen once, in ``start``, as a ``Collector``.
"""
# ruff: noqa: E402  (signals are handled before the slow imports below)
import sys

if __name__ == "__main__":  # a signal during the imports (seconds) ends the process in one line
    import gc
    gc.disable()  # until the imports' objects are frozen, at the end of this file
    import signal  # held from here, as importing the package imports gymnasium, until handled
    signal.pthread_sigmask(signal.SIG_BLOCK, (signal.SIGINT, signal.SIGTERM, signal.SIGHUP))

    def out_of_memory_in_one_line(kind, error, tb, default=sys.excepthook):
        """A memory limit (ulimit -v) below what torch's libraries need: one line, not the
        import's traceback."""
        text = str(error)
        if isinstance(error, MemoryError) or isinstance(error, OSError | ImportError) and (
                "failed to map segment" in text or "Cannot allocate memory" in text):
            print(f"main.py: error: out of memory ({type(error).__name__}: {text or 'no memory'})"
                  "; this process may not use what it needs: raise its limit (ulimit -v)",
                  file=sys.stderr)
        else:
            default(kind, error, tb)
    sys.excepthook = out_of_memory_in_one_line
    from a2c_ppo_acktr.run.interrupt import exit_on_signals
    exit_on_signals()

import contextlib
import functools

import numpy as np
import torch

# torch.optim's optimizers import torch._dynamo when first built (~2 s, ~120k objects): imported
# here, with the others, its objects are frozen out of the collector's walks (gc.freeze below).
import torch._dynamo  # noqa: F401

from a2c_ppo_acktr.config import Config
from a2c_ppo_acktr.envs.single import check_env_id
from a2c_ppo_acktr.errors import (
    CheckpointError,
    Error,
    allocation_failure,
    failure_line,
    print_details,
    program,
)
from a2c_ppo_acktr.run.arguments import fail, get_config, warn
from a2c_ppo_acktr.run.build import (
    build_collector,
    build_evaluations,
    build_final_evaluation,
    build_run,
    run_components,
)
from a2c_ppo_acktr.run.checkpoint import checkpoint_state, load_checkpoint, run_paths
from a2c_ppo_acktr.run.config import write_config
from a2c_ppo_acktr.run.interrupt import Interrupted, StopRequest
from a2c_ppo_acktr.run.life import Run, open_logs
from a2c_ppo_acktr.run.resume import resume_exactly
from a2c_ppo_acktr.run.rundir import RunLocks, abandon, check_run, left_behind, make_run_dirs
from a2c_ppo_acktr.run.tracking import start_tracking
from a2c_ppo_acktr.sampling.ddp import DDP
from a2c_ppo_acktr.speed import keep_freed_memory


class NothingLeft(Exception):
    """--resume of a run that has trained its --num-env-steps: ``str()`` says so."""


def main(argv: list[str] | None = None) -> int:
    cfg = get_config(argv)
    keep_freed_memory()  # each update would otherwise fault its tensors' pages in afresh
    # Ctrl-C / SIGTERM / SIGHUP: finish the update, save, exit 130 / 143 / 129; the run's lock
    # (rundir.py) is held until main returns
    with StopRequest() as stop, contextlib.closing(RunLocks()):
        try:
            run = start(cfg, stop)
        except Error as e:  # bad input found while building: one line, nothing left on disk
            print_details(e)  # a failing env's own traceback, once
            fail(str(e))
        except Interrupted as e:  # a signal while building: undone, one line
            print(f"{program()}: {e}", file=sys.stderr)
            return e.exit_status
        except NothingLeft as e:  # nothing built; done as asked
            print(e, flush=True)
            return 0
        except (MemoryError, RuntimeError) as e:  # sizes in range that this machine cannot hold
            if (size := allocation_failure(e)) is None:
                raise
            fail(f"cannot allocate {size} to build the run: the network (--hidden-size) or the "
                 "rollout storage (--num-processes * --num-steps) is larger than this machine's "
                 "memory")
        except OSError as e:  # too many open files (ulimit -n), a full disk: one line
            if (what := failure_line(e)) is None:
                raise
            fail(what)
        status = None
        try:
            status = train(cfg, run)
            return status
        except (Error, OSError, MemoryError, RuntimeError) as e:  # e.g. a log that cannot be
            # written, a memory limit met by the optimizer's first state: one line
            what = failure_line(e)
            if what is None and (size := allocation_failure(e)) is not None:
                what = f"cannot allocate {size} (this machine's memory, or ulimit -v)"
            if what is None:
                raise
            print_details(e)
            if run.lead:
                print(f"{program()}: error: {what}; stopped, "
                      f"{left_behind(run.paths, run.saved_steps)}", file=sys.stderr)
            status = 1
            return status
        finally:
            run.close()
            if status != 0 and run.lead and run.paths.checkpoint and run.saved_steps is None:
                # Nothing to --resume: the run is undone, as one that failed to start, so that
                # it can start again (a run that saves no checkpoint keeps its logs).
                abandon(run.paths, run.created, resumed=False)


def start(cfg: Config, stop: StopRequest) -> Run:
    """Check the inputs (``Error`` when bad, before anything is on disk), then build the run:
    directories, envs, policy, agent, restored on --resume, and the collector. A signal
    meanwhile (``stop``) undoes what was built and raises ``Interrupted``."""
    ddp = DDP.from_env(cfg.run.cuda)  # under torchrun: this process is one rank of one learner
    rank, lead = (ddp.rank, ddp.is_lead) if ddp else (0, True)

    def stop_if_asked() -> None:  # all ranks at the same points, as they stop together
        stop.check(ddp.any(stop.requested) if ddp else None)

    paths = run_paths(cfg.run)
    if lead:
        check_run(cfg.run, paths)
    check_env_id(cfg.env.env_name)
    try:
        resumed = load_checkpoint(paths.checkpoint) if cfg.run.resume else None
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
    envs = collector = None
    try:
        envs, actor_critic, agent, reward_models = build_run(cfg, paths, device, resumed, rank)
        components = run_components(actor_critic, agent, reward_models)  # what checkpoints keep
        stop_if_asked()
        if lead:
            write_config(cfg.record, paths.log_dir)
        if ddp:
            ddp.average_gradients(actor_critic)  # every backward ends with the ranks' mean gradient
            if resumed and rank:
                torch.manual_seed(cfg.run.seed + rank + env_steps)  # the saved RNG state is rank 0's
        steps_per_update = cfg.sampling.num_steps * envs.num_envs * (ddp.world_size if ddp else 1)
        updates = range(env_steps // steps_per_update, cfg.run.num_env_steps // steps_per_update)
        collector = build_collector(cfg, paths, envs, actor_critic, device, ddp, len(updates),
                                    agent)
        evaluator = build_evaluations(cfg, paths, collector, device)
        inexact = resume_exactly(collector, resumed) if resumed else None
        stop_if_asked()
        tracker = start_tracking(cfg.run, cfg.record, paths) if lead else None  # last: it cannot be undone
    except BaseException:
        if collector is not None:  # closes the envs too
            collector.close()
        elif envs is not None:  # build_run closes them itself on its own failures
            envs.close()
        if lead:
            abandon(paths, created, bool(resumed))
        raise
    logs = []
    if lead:  # the run has started: what it should know, then where its files go
        for warning in cfg.warnings:
            warn(warning)
        for note in cfg.notes:  # the recipe's values, or what a resumed run changed
            print(note, flush=True)
        if inexact:
            warn(f"--resume continues approximately, from new episodes: {inexact}")
        print(f"run files: log directory {paths.log_dir}/, checkpoint "
              f"{paths.checkpoint or 'none (--save-dir is empty)'}", flush=True)
        total = updates.stop * steps_per_update
        print(f"training {total:,} steps: {updates.stop:,} updates of {steps_per_update:,}"
              + (f" (--num-env-steps {cfg.run.num_env_steps:,} rounded down to whole updates)"
                 if total != cfg.run.num_env_steps else "")
              + (f", resumed after {env_steps:,}" if resumed else ""), flush=True)
        logs = open_logs(paths, bool(resumed), cfg.record, cfg.run.eval_interval is not None,
                         tracker)
    return Run(paths, lead, collector, actor_critic, agent, list(reward_models.values()), updates,
               steps_per_update, evaluator, stop=stop, ddp=ddp,
               state=functools.partial(checkpoint_state, cfg, components, collector),
               settings=cfg.run, logs=logs, tracker=tracker, created=created,
               saved_steps=env_steps if resumed else None,
               final_eval=build_final_evaluation(cfg, paths, collector, device))


def train(cfg: Config, run: Run) -> int:
    """The algorithm box; -> the exit status (0, 1 on a failure mid-run, 128 + signal)."""
    collector, actor_critic, agent = run.collector, run.actor_critic, run.agent
    for j in run.updates:
        agent.adjust_lr(j * run.steps_per_update)  # its schedule, e.g. --use-linear-lr-decay
        rollouts = collector.collect(actor_critic)  # in whichever sampling mode start chose
        # Async: the learner's current weights bootstrap, one update newer than the rollout's
        # value_preds; PPO's clipped value loss needs those old predictions anyway.
        with torch.inference_mode():
            next_value = actor_critic.get_value(
                rollouts.obs[-1], rollouts.recurrent_hidden_states[-1], rollouts.masks[-1])
        reward_stats: dict[str, float] = {}
        for reward_model in run.reward_models:  # e.g. GAIL's discriminator, trained on this
            reward_stats |= reward_model(rollouts, j)  # rollout, rewards it in place of the env
        rollouts.compute_returns(next_value, cfg.returns)
        stats = agent.update(rollouts)  # value_loss, action_loss, entropy, ...: all logged
        collector.sync(actor_critic, rollouts)  # the storage goes back, with the new weights
        status = run.after_update(j, {**stats, **reward_stats})  # check, stop?, save, log, ...
        if status is not None:
            return status
    return run.done()


if __name__ == "__main__":
    # The imports' objects (torch's, gymnasium's) live as long as the process. Out of the cyclic
    # collector's sight, no collection walks them: not while importing, not during the run, not
    # at exit (docs/benchmarks.md, "Measured code choices").
    gc.freeze()
    gc.enable()
    from a2c_ppo_acktr.run import interrupt
    interrupt.HARD_EXIT_S = 8.0  # a second Ctrl-C ends the process within 10 s, stuck envs or not
    interrupt.outlive_readers("stdout closed: the run goes on, saving as before; its reports are "
                              "in progress.csv")
    sys.exit(main())
