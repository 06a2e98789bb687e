"""A run's life around its updates: what ``main.train`` does after each update, as named steps
(check the losses, stop on a request, save, log, evaluate), and the line it ends with.

Every step speaks through ``say``: on the lead only (rank 0 under torchrun), the progress line
cleared first. A step that ends the run returns its exit status: 1 on a failure (non-finite
loss or gradient, a checkpoint that cannot be written), 128 + signal on a stop request.
"""
import functools
import math
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Optional, TextIO

import numpy as np

from a2c_ppo_acktr.algo import Agent
from a2c_ppo_acktr.algo.agent import RewardModel
from a2c_ppo_acktr.config import RunConfig
from a2c_ppo_acktr.errors import CheckpointError, program, say
from a2c_ppo_acktr.evaluation import Evaluations
from a2c_ppo_acktr.model import Policy
from a2c_ppo_acktr.rollout import Collector
from a2c_ppo_acktr.run.checkpoint import RunPaths, history_path, save_checkpoint
from a2c_ppo_acktr.run.interrupt import StopRequest
from a2c_ppo_acktr.run.logger import ProgressLine, ScalarLogger, format_report, progress_row
from a2c_ppo_acktr.run.rundir import left_behind
from a2c_ppo_acktr.run.tracking import Tracker
from a2c_ppo_acktr.sampling.ddp import DDP
from a2c_ppo_acktr.speed import compile_seconds


def is_loss(name: str) -> bool:
    """A statistic named ``loss`` or ``..._loss`` (value_loss, action_loss, gail_loss, a term a
    researcher adds): a non-finite one stops the run."""
    return name == "loss" or name.endswith("_loss")


# (env steps, obs_rms) -> the checkpoint's dict (checkpoint_state's, of the run's components)
StateFn = Callable[[int, Optional[dict]], dict]


@dataclass
class Run:
    """What ``run.start.start`` opened for the loop, and its life around the updates; ``close``
    releases it.

    ``settings``' ``log_interval`` / ``save_interval`` / ``eval_interval`` (None: never) count
    updates; its ``save_history`` (None: never) keeps a permanent copy of the checkpoint every so
    many; its ``compile``: say how long compiling took, after the first update.
    """

    paths: RunPaths
    lead: bool                  # logs, saves and evaluates (rank 0 under torchrun)
    collector: Collector
    actor_critic: Policy
    agent: Agent                # algo.PPO or algo.A2C_ACKTR: update(rollouts) -> statistics
    reward_models: list[RewardModel]  # each (rollouts, update) -> statistics: GAIL, ...
    updates: range              # the updates still to run
    steps_per_update: int       # num_steps * envs of all ranks
    evaluator: Evaluations      # --eval-interval: where evaluations run (build_evaluations)
    state: StateFn              # the checkpoint to save
    stop: StopRequest
    ddp: Optional[DDP]          # under torchrun: the ranks stop together
    settings: RunConfig         # the intervals, --save-history and --compile
    logs: list                  # [progress.csv, eval.csv or None] on the lead, else []
    tracker: Optional[Tracker] = None  # --track: the W&B run, on the lead
    # --final-eval-episodes: (policy, env steps) -> final_eval.json's dict; None: none
    final_eval: Optional[Callable[[Policy, int], dict]] = None
    created: list = field(default_factory=list)  # the directories made for it (abandon)
    saved_steps: Optional[int] = None  # the env steps of its checkpoint; None while it has none

    def __post_init__(self) -> None:
        self.progress = ProgressLine(self.updates.stop * self.steps_per_update, enabled=self.lead)
        self.env_steps = self.start_steps = self.updates.start * self.steps_per_update
        self.start_time = time.time()
        self.finished = False  # done: it trained all its updates
        self.stop.acknowledgement = "stopping after this update; again to stop now"

    def say(self, message: str, stream: Optional[TextIO] = None) -> None:
        """``message`` on the lead's ``stream`` (stderr by default)."""
        self.progress.clear()
        if self.lead:
            say(message, stream)

    def after_update(self, update: int, stats: Mapping[str, float]) -> Optional[int]:
        """The run's steps after ``update``, which gave ``stats`` (the agent's and the reward
        models' statistics); -> None to go on, or the exit status."""
        if (status := self.check_losses(update, stats)) is not None:
            return status
        if self.settings.compile and update == self.updates.start:  # both compiled by now
            self.say(f"torch.compile: {compile_seconds():.1f} s compiling the act step and the "
                     "update", sys.stdout)
        self.env_steps = (update + 1) * self.steps_per_update
        last = update == self.updates.stop - 1
        stopping = self.stop_requested()
        if (status := self.save(update, last, stopping)) is not None:
            return status
        # A stopped run's last update is logged as a finished run's is (its rows written, the
        # evaluations under way waited for): a resumed run's logs then have no gap.
        returns = list(self.collector.episode_returns)
        self.log(update, last or stopping, returns, stats)
        self.evaluate(update, last or stopping, due=len(returns) > 1)
        if stopping:
            self.say(f"interrupted at {self.env_steps:,} steps; " + (
                f"saved {self.paths.checkpoint}; --resume to continue" if self.paths.checkpoint
                else "nothing saved (--save-dir is empty)"))
            return self.stop.exit_status
        return None

    def check_losses(self, update: int, stats: Mapping[str, float]) -> Optional[int]:
        """1 (and one line) when a loss (``is_loss``) is not finite: training on would only spread
        it. Any other statistic (a diagnostic such as explained variance) is logged as it is, NaN
        as NaN."""
        if all(math.isfinite(x) for name, x in stats.items() if is_loss(name)):
            return None
        values = ", ".join(f"{name} {value}" for name, value in stats.items())
        return self.fail(f"non-finite loss at update {update} ({values})")

    def check_gradients(self) -> Optional[int]:
        """1 (and one line) when the policy's last gradients are not finite (from finite losses:
        an overflow in the backward pass), before a checkpoint would keep the weights they made.
        Checked where the run saves, not every update: non-finite weights give non-finite losses
        at the next update anyway."""
        if all(p.grad is None or bool(p.grad.isfinite().all())
               for p in self.actor_critic.parameters()):
            return None
        return self.fail(f"non-finite gradients at {self.env_steps:,} steps")

    def stop_requested(self) -> bool:
        """Ctrl-C / SIGTERM reached this process, or under torchrun any rank (all stop at the
        same update: a rank that went on alone would wait in the next collective forever)."""
        return self.ddp.any(self.stop.requested) if self.ddp else self.stop.requested

    def save(self, update: int, last: bool, stopping: bool) -> Optional[int]:
        """The checkpoint, on the lead, every ``save_interval`` updates, at the last, on a stop
        request, and the ``--save-history`` copies; -> 1 (and one line) if it cannot be
        written."""
        every, history = self.settings.save_interval, self.settings.save_history
        keep = history is not None and (update + 1) % history == 0
        if not (self.lead and self.paths.checkpoint
                and (update % every == 0 or last or stopping or keep)):
            return None
        if (status := self.check_gradients()) is not None:
            return status
        state = self.state(self.env_steps, self.collector.obs_rms)
        try:
            save_checkpoint(state, self.paths.checkpoint)
            if keep:  # a permanent copy beside the latest (tmrl's model history)
                save_checkpoint(state, history_path(self.paths.checkpoint, self.env_steps))
            self.saved_steps = self.env_steps
        except CheckpointError as e:
            # Stop rather than train on: what cannot be saved is lost however long the run goes
            # on. The atomic write kept the previous checkpoint, which --resume continues.
            return self.fail(str(e), f"stopped at {self.env_steps:,} steps")
        return None

    def fail(self, what: str, stopped: str = "stopped") -> int:
        """The run stops on a failure, ``what``: the lead says it in one line; -> 1. Under
        torchrun the other ranks stop too, told why, whichever rank it is (``DDP.stopping``)."""
        if self.ddp:
            what = self.ddp.stopping(what, self.env_steps) or what
        self.say(f"{program()}: error: {what}; {stopped}, "
                 f"{left_behind(self.paths, self.saved_steps)}")
        return 1

    def log(self, update: int, last: bool, returns: list[float],
            stats: Mapping[str, float]) -> None:
        """The progress line; every ``log_interval`` updates and at the last, a progress.csv row
        and the report on stdout (the lead's)."""
        fps = int((self.env_steps - self.start_steps) / (time.time() - self.start_time))
        self.progress.update(self.env_steps, fps, float(np.mean(returns)) if returns else float("nan"))
        if self.lead and (update % self.settings.log_interval == 0 or last):
            row = progress_row(update, self.env_steps, fps, returns, stats,
                               self.agent.optimizer.param_groups[0]["lr"],
                               time.time() - self.start_time, **self.collector.stats())
            self.logs[0].log(row, self.env_steps)
            self.say(format_report(row, len(returns)), sys.stdout)

    def evaluate(self, update: int, last: bool, due: bool) -> None:
        """Every ``eval_interval`` updates (once episodes have ended: ``due``) the lead evaluates
        the policy; each row finished by now (at the last update: all) goes to eval.csv."""
        interval = self.settings.eval_interval
        due = due and self.lead and interval is not None and update % interval == 0
        for row in self.evaluator.evaluations(self.actor_critic if due else None, update,
                                                self.env_steps, wait=last):
            self.say(f" Evaluation at update {row['update']}: mean reward "
                     f"{row['mean_return']:.5f}", sys.stdout)
            self.logs[1].log(row, row["timesteps"])

    def done(self) -> int:
        """The run trained all its updates: its final evaluation (the lead's), its last line,
        -> 0."""
        self.finished = True
        if self.lead and self.final_eval is not None:
            self.progress.clear()
            result = self.final_eval(self.actor_critic, self.env_steps)
            self.say(f" Final evaluation: mean reward {result['mean_return']:.5f} over "
                     f"{result['episodes']} episodes (deterministic, normalization frozen)",
                     sys.stdout)
        if self.paths.checkpoint and self.saved_steps is not None:  # (the lead's: it saves)
            self.say(f"done: {self.env_steps:,} steps; checkpoint {self.paths.checkpoint} "
                     f"({self.saved_steps:,} steps)", sys.stdout)
        else:
            self.progress.clear()
        return 0

    def close(self) -> None:
        self.collector.close()
        for log in self.logs:
            if log is not None:
                log.close()
        if self.tracker is not None:
            self.tracker.close()
        if self.ddp:
            self.ddp.close()


def open_logs(paths: RunPaths, resumed: bool, hparams: dict, evaluations: bool,
              tracker: Optional[Tracker]) -> list:
    """The lead's [progress.csv, eval.csv (``evaluations``) or None], appended to on resume;
    their rows also go to the W&B run (``tracker``)."""
    return [ScalarLogger(paths.log_dir, append=resumed, hparams=hparams,
                         also=tracker.log if tracker else None),
            ScalarLogger(paths.eval_dir, "eval.csv", tensorboard=False, append=resumed,
                         also=functools.partial(tracker.log, prefix="eval/") if tracker else None)
            if evaluations else None]
