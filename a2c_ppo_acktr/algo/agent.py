"""What the training loop asks of an algorithm and of a reward model: ``Agent``, which PPO,
A2C / ACKTR and any new loss implement, ``RewardModel`` (GAIL, an intrinsic reward), and what the
agents share (``BaseAgent``: the learning-rate schedule ``LinearDecay`` and the state a checkpoint
keeps)."""
from typing import Any, Protocol, runtime_checkable

import torch
import torch.nn as nn

from a2c_ppo_acktr.storage import RolloutStorage


@runtime_checkable
class Stateful(Protocol):
    """Whatever learns or adapts during a run: the checkpoint saves its ``state_dict()`` (tensors
    and plain values) and ``--resume`` hands it back to ``load_state_dict``."""

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state_dict: dict[str, Any]) -> Any: ...


class Agent(Stateful, Protocol):
    """An on-policy learner of a ``Policy``.

    Per update the loop calls ``adjust_lr(env_steps)`` (the agent's own schedule, if any), then
    ``update(rollouts)`` on a storage whose returns are computed; every statistic it returns is a
    column of progress.csv and a TensorBoard scalar. One named ``..._loss`` that is not finite
    stops the run (``run/life.is_loss``); any other is logged as it is, NaN as NaN.
    ``optimizer``'s lr is logged too.
    """

    optimizer: torch.optim.Optimizer

    def update(self, rollouts: RolloutStorage) -> dict[str, float]:
        """One update on ``rollouts``; -> its statistics by name (value_loss, action_loss, ...)."""
        ...

    def adjust_lr(self, env_steps: int) -> None:
        """Set the learning rate for the update that starts after ``env_steps`` steps."""
        ...


class RewardModel(Stateful, Protocol):
    """A reward the run computes itself (GAIL's discriminator, an intrinsic reward): called on each
    rollout after the bootstrap and before the returns, it may rewrite or add to
    ``rollouts.rewards``; -> its statistics by name (progress.csv's columns). Its state is saved
    and restored with the run's. Each is an entry of ``run/build.py``'s ``REWARD_MODELS``, its
    flags in ``config/models.py``; an auxiliary model that learns from the rollout without
    touching the rewards is one too."""

    def __call__(self, rollouts: RolloutStorage, update: int) -> dict[str, float]: ...


class LinearDecay:
    """The original's ``--use-linear-lr-decay``: from the optimizer's initial lr at step 0 down to 0
    at ``horizon`` env steps. The horizon is fixed when the run starts, so a run extended or cut
    short follows the same schedule up to where it stops."""

    def __init__(self, optimizer: torch.optim.Optimizer, horizon: int) -> None:
        if horizon <= 0:
            raise ValueError(f"a linear decay needs a positive horizon, got {horizon}")
        self.optimizer, self.horizon = optimizer, horizon
        self.initial_lr = optimizer.defaults["lr"]

    def __call__(self, env_steps: int) -> float:
        lr = self.initial_lr * max(0.0, 1.0 - env_steps / self.horizon)
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        return lr


class BaseAgent:
    """What PPO and A2C / ACKTR share: ``adjust_lr`` (a ``LinearDecay`` of ``optimizer`` to 0 at
    ``lr_decay_horizon`` env steps, or the lr left alone) and their state, the optimizer's. An
    agent calls ``_init_lr_decay`` once its optimizer exists; a subclass with state of its own (an
    adaptive coefficient) adds it in ``state_dict`` and takes it back in ``load_state_dict``."""

    optimizer: torch.optim.Optimizer
    params: list[nn.Parameter]  # the policy's, in its order
    max_grad_norm: float | None
    lr_decay: LinearDecay | None = None

    def _init_lr_decay(self, optimizer: torch.optim.Optimizer, horizon: int | None) -> None:
        self.lr_decay = LinearDecay(optimizer, horizon) if horizon else None

    def adjust_lr(self, env_steps: int) -> None:
        """The linear decay's step (``lr_decay_horizon``), if any."""
        if self.lr_decay is not None:
            self.lr_decay(env_steps)

    def clip_grad_norm(self) -> torch.Tensor:
        """Scale the gradients of ``params`` to a total norm of at most ``max_grad_norm``; ->
        the norm before. (A method, so that the speed seam can clip a flat gradient in one op.)"""
        assert self.max_grad_norm is not None  # (None only under ACKTR, which does not clip)
        return nn.utils.clip_grad_norm_(self.params, self.max_grad_norm)

    def state_dict(self) -> dict[str, Any]:
        """What a resumed run needs of this agent: its optimizer's state (the lr among it)."""
        return {"optimizer": self.optimizer.state_dict()}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.optimizer.load_state_dict(state_dict["optimizer"])

