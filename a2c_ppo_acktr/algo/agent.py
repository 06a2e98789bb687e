"""What the training loop asks of an algorithm: ``Agent``, which PPO, A2C / ACKTR and any new
loss implement, and what they share: the learning-rate schedule (``LinearDecay``,
``DecayingLr``) and gradient-norm clipping (``clip_grad_norm``)."""
from collections.abc import Sequence
from typing import Protocol

import torch

from a2c_ppo_acktr.storage import RolloutStorage


class Agent(Protocol):
    """An on-policy learner of a ``Policy``.

    Per update the loop calls ``adjust_lr(env_steps)`` (the agent's own schedule, if any), then
    ``update(rollouts)`` on a storage whose returns are computed; ``stats`` then holds the extra
    columns of the progress log (e.g. PPO's ``approx_kl``). ``optimizer`` is saved in checkpoints.
    """

    stats: dict[str, float]

    @property
    def optimizer(self) -> torch.optim.Optimizer:
        """The optimizer (read-only here, so that an agent may hold a subclass of it)."""
        ...

    def update(self, rollouts: RolloutStorage) -> tuple[float, float, float]:
        """One update on ``rollouts``; -> value_loss, action_loss, dist_entropy."""
        ...

    def adjust_lr(self, env_steps: int) -> None:
        """Set the learning rate for the update that starts after ``env_steps`` steps."""
        ...


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


class DecayingLr:
    """The agents' ``adjust_lr``: ``LinearDecay`` of ``optimizer`` to 0 at ``lr_decay_horizon`` env
    steps, or the lr left alone without a horizon. An agent calls ``_init_lr_decay`` once its
    optimizer exists."""

    lr_decay: LinearDecay | None = None

    def _init_lr_decay(self, optimizer: torch.optim.Optimizer, horizon: int | None) -> None:
        self.lr_decay = LinearDecay(optimizer, horizon) if horizon else None

    def adjust_lr(self, env_steps: int) -> None:
        """The linear decay's step (``lr_decay_horizon``), if any."""
        if self.lr_decay is not None:
            self.lr_decay(env_steps)


def clip_grad_norm(params: Sequence[torch.Tensor], max_norm: float) -> torch.Tensor:
    """``nn.utils.clip_grad_norm_(params, max_norm, foreach=True)`` for parameters on one device
    (a ``Policy``'s): the same operations, so the same gradients bit for bit, without its
    grouping by device and dtype and a ``.to`` call per norm on every call, which on a small
    network cost as much as the clipping. -> the total norm before clipping."""
    grads = [p.grad for p in params if p.grad is not None]
    if not grads:
        return torch.tensor(0.0)
    total = torch.linalg.vector_norm(torch.stack(torch._foreach_norm(grads, 2.0)), 2.0)
    torch._foreach_mul_(grads, torch.clamp(max_norm / (total + 1e-6), max=1.0))
    return total
