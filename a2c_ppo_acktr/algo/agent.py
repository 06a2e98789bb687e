"""What the training loop asks of an algorithm: ``Agent``, which PPO, A2C / ACKTR and any new
loss implement, and what they share: the learning-rate schedule (``LinearDecay``,
``DecayingLr``) and the parameters and gradients laid out as one tensor each, with gradient-norm
clipping on them (``FlatParams``)."""
from collections.abc import Sequence
from typing import Any, Protocol

import torch
import torch.nn as nn

from a2c_ppo_acktr.algo.optim import Optimizer
from a2c_ppo_acktr.storage import RolloutStorage


class Agent(Protocol):
    """An on-policy learner of a ``Policy``.

    Per update the loop calls ``adjust_lr(env_steps)`` (the agent's own schedule, if any), then
    ``update(rollouts)`` on a storage whose returns are computed; ``stats`` then holds the extra
    columns of the progress log (e.g. PPO's ``approx_kl``). ``optimizer`` is saved in checkpoints.
    """

    stats: dict[str, float]

    @property
    def optimizer(self) -> Optimizer:
        """The optimizer (read-only here, so that an agent may hold any that fits ``Optimizer``)."""
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

    def __init__(self, optimizer: Optimizer, horizon: int) -> None:
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

    def _init_lr_decay(self, optimizer: Optimizer, horizon: int | None) -> None:
        self.lr_decay = LinearDecay(optimizer, horizon) if horizon else None

    def adjust_lr(self, env_steps: int) -> None:
        """The linear decay's step (``lr_decay_horizon``), if any."""
        if self.lr_decay is not None:
            self.lr_decay(env_steps)


# Bytes between the starts of FlatParams' segments: CPU vector loads and the allocators' own.
ALIGN = 64


class FlatParams:
    """A network's parameters laid end to end in one tensor, ``flat``, and their gradients in
    another, ``flat.grad``: zeroing or scaling every gradient is then one op, and an optimizer
    may step ``flat`` as one tensor, where one call per parameter tensor costs more than the
    arithmetic on a small network (docs/benchmarks.md, "Parameters and gradients in one tensor").

    The parameters keep their values and become views into ``flat``; their ``.grad`` become views
    into ``flat.grad`` and stay allocated (backward adds into them in place), so zero them with
    ``zero_grad`` here, not with ``set_to_none``. Build it once the network is on its device
    (``.to`` would replace the views). Steps and clipping give the same numbers bit for bit as
    on the separate tensors (tests/algo/test_agent.py).
    """

    def __init__(self, params: Sequence[nn.Parameter]) -> None:
        self.params = list(params)
        kinds = {(p.dtype, p.device) for p in self.params}
        if len(kinds) != 1:
            raise ValueError(f"FlatParams needs parameters of one dtype on one device, got {kinds}")
        if not all(p.is_contiguous() or p.is_contiguous(memory_format=torch.channels_last)
                   for p in self.params):
            raise ValueError("FlatParams needs parameters laid out densely (contiguous or "
                             "channels_last)")
        # Each parameter's segment starts ALIGN bytes apart from the last (zeros between): matrix
        # products round differently on weights that start elsewhere, so unaligned views would
        # change the weights' last bits. Each keeps its strides (a convolution's channels_last
        # too): its segment holds its elements in its own memory order, and so does its gradient's.
        sizes = [_padded(p.numel(), p.element_size()) for p in self.params]
        offsets = [0]
        for size in sizes:
            offsets.append(offsets[-1] + size)
        self.flat = nn.Parameter(self.params[0].new_zeros(offsets[-1]))
        self.grad = torch.zeros_like(self.flat)
        self.flat.grad = self.grad
        self.grads = [self.grad.as_strided(p.shape, p.stride(), offset)
                      for p, offset in zip(self.params, offsets)]
        with torch.no_grad():
            for p, grad, offset in zip(self.params, self.grads, offsets):
                data = self.flat.detach().as_strided(p.shape, p.stride(), offset)
                data.copy_(p)
                p.data = data
                p.grad = grad

    def zero_grad(self) -> None:
        """Zero every gradient (one op), re-linking any that code elsewhere set to None."""
        self.grad.zero_()
        self.flat.grad = self.grad
        for p, grad in zip(self.params, self.grads):
            if p.grad is not grad:
                p.grad = grad

    def clip_grad_norm(self, max_norm: float) -> torch.Tensor:
        """``nn.utils.clip_grad_norm_(self.params, max_norm, foreach=True)`` bit for bit (the norm
        of the per-tensor norms), without its grouping by device and dtype and a ``.to`` per norm,
        and with one scaling op; -> the total norm before clipping."""
        total = torch.linalg.vector_norm(torch.stack(torch._foreach_norm(self.grads, 2.0)), 2.0)
        self.grad.mul_(torch.clamp(max_norm / (total + 1e-6), max=1.0))
        return total


def load_optimizer_state(optimizer: Optimizer, state: dict[str, Any]) -> None:
    """``optimizer.load_state_dict(state)``; where the optimizer steps one flat tensor
    (``FlatParams.flat``) and ``state`` is that of an optimizer of the separate tensors (a
    checkpoint from before A2C stepped it flat), each state tensor's parts are laid end to end
    first, as ``flat`` lays the parameters. ``ValueError`` if they cannot be."""
    ours, theirs = optimizer.param_groups[0]["params"], state["param_groups"][0]["params"]
    if len(optimizer.param_groups) == len(state["param_groups"]) == 1 and len(ours) == 1 < len(theirs):
        parts = [state["state"][i] for i in theirs if i in state["state"]]
        if parts and len(parts) != len(theirs):
            raise ValueError(f"the optimizer state holds {len(parts)} of {len(theirs)} "
                             "parameters' entries; it cannot be laid out as one tensor")
        merged = {key: parts[0][key] if key == "step" else
                  torch.cat([_in_flat_order(part[key]) for part in parts]) for key in parts[0]
                  } if parts else {}
        sizes = {value.numel() for key, value in merged.items() if key != "step"}
        if sizes and sizes != {ours[0].numel()}:
            raise ValueError(f"the optimizer state holds {sizes.pop()} values per state tensor, "
                             f"the network {ours[0].numel()} parameters")
        state = {"state": {0: merged} if merged else {},
                 "param_groups": [{**state["param_groups"][0], "params": [0]}]}
    optimizer.load_state_dict(state)


def _padded(numel: int, element_size: int) -> int:
    """How many elements ``FlatParams`` gives a tensor of ``numel``: up to a multiple of ALIGN
    bytes."""
    per_align = max(1, ALIGN // element_size)
    return -(-numel // per_align) * per_align


def _in_flat_order(t: torch.Tensor) -> torch.Tensor:
    """A dense tensor's elements as ``FlatParams`` lays them out: in memory order (a
    channels_last convolution's too), flattened, with zeros up to its padded size."""
    dims = sorted(range(t.dim()), key=lambda d: -t.stride()[d])
    values = t.permute(dims).reshape(-1)
    return torch.cat([values, values.new_zeros(_padded(t.numel(), t.element_size()) - t.numel())])
