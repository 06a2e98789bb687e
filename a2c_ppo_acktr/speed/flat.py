"""The seam's "flat" mechanism: an agent's parameters laid end to end in one tensor and their
gradients in another (``FlatParams``), so that zeroing every gradient is one op, and a
``torch.optim.RMSprop`` steps the one flat tensor (a handful of ops per step instead of a
handful per parameter; element-wise arithmetic, so the same numbers bit for bit).

The agent's code does not change: its ``optimizer.zero_grad()`` zeros the flat gradient (the
``.grad`` of each parameter stays a view into it, which backward adds into), clipping and any
optimizer see the parameters as before. The RMSprop state stays per parameter in the state dict
(views into one flat state, copied out when saved), so checkpoints are the same either way.
"""
from collections.abc import Sequence
from typing import Any

import torch
import torch.nn as nn
from torch.optim.rmsprop import rmsprop

from a2c_ppo_acktr.speed.optim import hooked, supported

# Bytes between the starts of FlatParams' segments: CPU vector loads and the allocators' own.
ALIGN = 64


def _padded(numel: int, element_size: int) -> int:
    """How many elements ``FlatParams`` gives a tensor of ``numel``: up to a multiple of ALIGN
    bytes."""
    per_align = max(1, ALIGN // element_size)
    return -(-numel // per_align) * per_align


class FlatParams:
    """``params`` laid end to end in one tensor, ``flat``, and their gradients in another,
    ``grad``; each parameter keeps its values and strides and becomes a view into ``flat``, its
    ``.grad`` a view into ``grad``. Build it once the network is on its device (``.to`` would
    replace the views). ``ValueError`` for parameters of several dtypes or devices, or not dense.
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
        # Each segment starts ALIGN bytes apart from the last (zeros between): matrix products
        # round differently on weights that start elsewhere, so unaligned views would change the
        # weights' last bits. Each keeps its strides (a convolution's channels_last too).
        self.offsets = [0]
        for p in self.params:
            self.offsets.append(self.offsets[-1] + _padded(p.numel(), p.element_size()))
        self.flat = nn.Parameter(self.params[0].new_zeros(self.offsets[-1]))
        self.grad = torch.zeros_like(self.flat)
        self.flat.grad = self.grad
        self.grads = self.views(self.grad)
        with torch.no_grad():
            for p, data, grad in zip(self.params, self.views(self.flat.detach()), self.grads):
                data.copy_(p)
                p.data = data
                p.grad = grad

    def views(self, flat: torch.Tensor) -> list[torch.Tensor]:
        """Each parameter's segment of ``flat`` (a tensor laid out as ``self.flat``)."""
        return [flat.as_strided(p.shape, p.stride(), offset)
                for p, offset in zip(self.params, self.offsets)]

    def clip_grad_norm(self, max_norm: float) -> torch.Tensor:
        """``nn.utils.clip_grad_norm_(self.params, max_norm)`` bit for bit (the norm of the
        per-tensor norms; each gradient times the same clamped factor), with one scaling op on
        the flat gradient and without its grouping by device and dtype; -> the norm before."""
        total = torch.linalg.vector_norm(torch.stack(torch._foreach_norm(self.grads, 2.0)), 2.0)
        self.grad.mul_(torch.clamp(max_norm / (total + 1e-6), max=1.0))
        return total

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Zero every gradient (one op), re-linking any that code elsewhere set to None
        (``set_to_none`` is taken for ``Optimizer.zero_grad``'s signature: the views stay)."""
        self.grad.zero_()
        for p, grad in zip(self.params, self.grads):
            if p.grad is not grad:
                p.grad = grad


class FlatRMSprop:
    """``optimizer.step`` (a ``torch.optim.RMSprop`` of ``flat``'s parameters, one group,
    single-tensor) on ``flat.flat`` at once. Its state lives in one flat ``square_avg`` whose
    views are the parameters' ``square_avg``; a state loaded since (``load_state_dict`` replaces
    the tensors) is copied in at the next step."""

    def __init__(self, optimizer: torch.optim.Optimizer, flat: FlatParams) -> None:
        self.optimizer, self.flat = optimizer, flat
        self.square_avg = torch.zeros_like(flat.flat.detach())
        self.views = flat.views(self.square_avg)
        self.count = torch.zeros((), dtype=torch.float32)  # the steps, shared by all parameters
        optimizer.register_state_dict_post_hook(self._separate)

    def _adopt(self) -> None:
        """Make the optimizer's state of each parameter views into the flat state."""
        state = self.optimizer.state
        first = state[self.flat.params[0]]
        if first.get("square_avg") is self.views[0]:
            return
        self.count = first["step"].clone() if "step" in first else torch.zeros((), dtype=torch.float32)
        for p, view in zip(self.flat.params, self.views):
            view.copy_(state[p]["square_avg"]) if "square_avg" in state[p] else view.zero_()
            state[p] = {"step": self.count, "square_avg": view}

    def _separate(self, optimizer: Any, state_dict: dict) -> dict:
        """The state dict as RMSprop's own: a tensor of its own per entry."""
        for values in state_dict["state"].values():
            for key, value in list(values.items()):
                values[key] = value.clone()
        return state_dict

    def step(self, closure: Any = None) -> Any:
        if closure is not None or hooked(self.optimizer):
            return type(self.optimizer).step(self.optimizer, closure)
        group = self.optimizer.param_groups[0]
        with torch.no_grad():
            self._adopt()
            rmsprop([self.flat.flat], [self.flat.grad], [self.square_avg], [], [], [self.count],
                    lr=group["lr"], alpha=group["alpha"], eps=group["eps"],
                    weight_decay=group["weight_decay"], momentum=0, centered=False,
                    foreach=False, maximize=group["maximize"], differentiable=False,
                    capturable=False, has_complex=False)
        return None


def flatten(optimizer: torch.optim.Optimizer) -> FlatParams | None:
    """Lay the parameters ``optimizer`` steps out flat and zero their gradients as one from its
    ``zero_grad``; a single-group, single-tensor RMSprop then steps them as one tensor. -> the
    ``FlatParams``, or None where they cannot be (K-FAC, which reads its layers' gradients by
    hooks, and other optimizers than torch's Adam, RMSprop and SGD are left alone)."""
    if type(optimizer) not in (torch.optim.Adam, torch.optim.RMSprop, torch.optim.SGD):
        return None
    try:
        flat = FlatParams([p for group in optimizer.param_groups for p in group["params"]])
    except ValueError:
        return None
    vars(optimizer)["zero_grad"] = flat.zero_grad  # on this instance only
    if (type(optimizer) is torch.optim.RMSprop and supported(optimizer)
            and len(optimizer.param_groups) == 1 and optimizer.param_groups[0]["foreach"] is False):
        vars(optimizer)["step"] = FlatRMSprop(optimizer, flat).step
    return flat
