"""The seam's "flat" mechanism: an agent's parameters laid out in one tensor and their gradients
in another (``FlatParams``), so that zeroing every gradient is one op, and an optimizer steps
them as one tensor instead of one by one: a single-tensor ``torch.optim.RMSprop`` (``FlatRMSprop``)
and a fused ``torch.optim.Adam`` on the CPU (``FlatAdam``). The same numbers bit for bit: the
arithmetic is element-wise, and Adam's kernel computes each element as it would per tensor (see
``FlatAdam``).

The agent's code does not change: its ``optimizer.zero_grad()`` zeros the flat gradient (the
``.grad`` of each parameter stays a view into it, which backward adds into), clipping and any
optimizer see the parameters as before. The optimizer's state stays per parameter in the state
dict (views into one flat state, copied out when saved), so checkpoints are the same either way.
"""
from collections.abc import Sequence
from typing import Any

import torch
import torch.nn as nn
from torch.optim.adam import adam
from torch.optim.optimizer import _get_scalar_dtype
from torch.optim.rmsprop import rmsprop

from a2c_ppo_acktr.speed.optim import hooked, supported

# Bytes between the starts of FlatParams' segments: CPU vector loads and the allocators' own.
ALIGN = 64
# A parameter of a multiple of this many elements is all vector body in a per-tensor kernel (CPU
# vectors hold up to 16 floats, 64 bf16): FlatParams lays such "whole" parameters first, end to end.
WHOLE = 64


def _padded(numel: int, element_size: int) -> int:
    """How many elements ``FlatParams`` gives a tensor of ``numel``: up to a multiple of ALIGN
    bytes."""
    per_align = max(1, ALIGN // element_size)
    return -(-numel // per_align) * per_align


class FlatParams:
    """``params`` laid out in one tensor, ``flat``, and their gradients in another, ``grad``;
    each parameter keeps its values and strides and becomes a view into ``flat``, its ``.grad`` a
    view into ``grad``. The parameters of a multiple of ``WHOLE`` elements come first, end to end
    (``flat[:whole]``), then the others, each segment ALIGN bytes apart. Build it once the network
    is on its device (``.to`` would replace the views). ``ValueError`` for parameters of several
    dtypes or devices, or not dense.
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
        self.whole = [p.numel() % WHOLE == 0 for p in self.params]
        self.offsets = [0] * len(self.params)  # of each parameter, in ``params``' order
        end = 0
        for i in sorted(range(len(self.params)), key=lambda i: not self.whole[i]):
            self.offsets[i] = end
            end += _padded(self.params[i].numel(), self.params[i].element_size())
        self.whole_numel = sum(p.numel() for p, whole in zip(self.params, self.whole) if whole)
        self.flat = nn.Parameter(self.params[0].new_zeros(end))
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


class _FlatStep:
    """What ``FlatRMSprop`` and ``FlatAdam`` share: the optimizer's per-parameter state tensors
    ``KEYS`` are views into flat ones (``flat_state``) for the parameters in ``shared``, which
    share one "step" tensor (``count``); a state loaded since (``load_state_dict`` replaces the
    tensors) is copied in at the next step, and the state dict is saved as the optimizer's own.
    A step with a closure or hooks goes through torch's own, each parameter with its own step."""

    KEYS: tuple[str, ...] = ()

    def __init__(self, optimizer: torch.optim.Optimizer, flat: FlatParams,
                 shared: list[bool], step_dtype: torch.dtype) -> None:
        self.optimizer, self.flat, self.step_dtype = optimizer, flat, step_dtype
        self.flat_state = {key: torch.zeros_like(flat.flat.detach()) for key in self.KEYS}
        self.views = {key: flat.views(value) for key, value in self.flat_state.items()}
        self.shared = [i for i, s in enumerate(shared) if s]
        self.count = torch.zeros((), dtype=step_dtype)  # the steps of the shared parameters
        optimizer.register_state_dict_post_hook(self._separate)

    def _adopt(self) -> None:
        """Make the state of each parameter in ``shared`` views into the flat state."""
        if not self.shared:
            return
        state, params = self.optimizer.state, self.flat.params
        first = state[params[self.shared[0]]]
        if first.get(self.KEYS[0]) is self.views[self.KEYS[0]][self.shared[0]] and (
                first.get("step") is self.count):
            return
        self.count = (first["step"].clone() if "step" in first
                      else torch.zeros((), dtype=self.step_dtype))
        for i in self.shared:
            old = state[params[i]]
            new = state[params[i]] = {"step": self.count}
            for key in self.KEYS:
                view = self.views[key][i]
                view.copy_(old[key]) if key in old else view.zero_()
                new[key] = view

    def _separate(self, optimizer: Any, state_dict: dict) -> dict:
        """The state dict as the optimizer's own: a tensor of its own per entry."""
        for values in state_dict["state"].values():
            for key, value in list(values.items()):
                values[key] = value.clone()
        return state_dict

    def step(self, closure: Any = None) -> Any:
        if closure is not None or hooked(self.optimizer):
            for i in self.shared:  # torch's step counts each parameter's step tensor once
                entry = self.optimizer.state[self.flat.params[i]]
                if "step" in entry:
                    entry["step"] = entry["step"].clone()
            return type(self.optimizer).step(self.optimizer, closure)
        with torch.no_grad():
            self._adopt()
            self._step(self.optimizer.param_groups[0])
        return None

    def _step(self, group: dict) -> None:
        raise NotImplementedError


class FlatRMSprop(_FlatStep):
    """``optimizer.step`` (a ``torch.optim.RMSprop`` of ``flat``'s parameters, one group,
    single-tensor) on ``flat.flat`` at once."""

    KEYS = ("square_avg",)

    def __init__(self, optimizer: torch.optim.Optimizer, flat: FlatParams) -> None:
        super().__init__(optimizer, flat, [True] * len(flat.params), torch.float32)

    def _step(self, group: dict) -> None:
        rmsprop([self.flat.flat], [self.flat.grad], [self.flat_state["square_avg"]], [], [],
                [self.count], lr=group["lr"], alpha=group["alpha"], eps=group["eps"],
                weight_decay=group["weight_decay"], momentum=0, centered=False, foreach=False,
                maximize=group["maximize"], differentiable=False, capturable=False,
                has_complex=False)


class FlatAdam(_FlatStep):
    """``optimizer.step`` (a fused ``torch.optim.Adam`` of ``flat``'s CPU parameters, one group)
    in one kernel call on the whole parameters' segment ``flat.flat[:whole]`` and the others'
    own tensors, instead of one per parameter. The kernel runs a vector loop over a tensor, then
    a scalar loop over its last elements, and the two round differently: a parameter of a
    multiple of ``WHOLE`` elements is all vector loop either way, the others keep their own."""

    KEYS = ("exp_avg", "exp_avg_sq")

    def __init__(self, optimizer: torch.optim.Optimizer, flat: FlatParams) -> None:
        super().__init__(optimizer, flat, flat.whole, _get_scalar_dtype(is_fused=True))
        self.rest = [i for i, whole in enumerate(flat.whole) if not whole]
        n = flat.whole_numel
        self.whole = [t[:n] for t in (flat.flat.detach(), flat.grad, self.flat_state["exp_avg"],
                                      self.flat_state["exp_avg_sq"])]

    def _step(self, group: dict) -> None:
        params, grads, avgs, squares = ([t] if self.shared else [] for t in self.whole)
        steps = [self.count] if self.shared else []
        for i in self.rest:  # as Adam._init_group
            p = self.flat.params[i]
            state = self.optimizer.state[p]
            if not state:
                state["step"] = torch.zeros((), dtype=self.step_dtype)
                state["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                state["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
            params.append(p)
            grads.append(self.flat.grads[i])
            avgs.append(state["exp_avg"])
            squares.append(state["exp_avg_sq"])
            steps.append(state["step"])
        beta1, beta2 = group["betas"]
        adam(params, grads, avgs, squares, [], steps, amsgrad=False, has_complex=False,
             beta1=beta1, beta2=beta2, lr=group["lr"], weight_decay=group["weight_decay"],
             eps=group["eps"], maximize=group["maximize"], foreach=False, capturable=False,
             differentiable=False, fused=True, grad_scale=None, found_inf=None,
             decoupled_weight_decay=group["decoupled_weight_decay"])


def flatten(optimizer: torch.optim.Optimizer) -> FlatParams | None:
    """Lay the parameters ``optimizer`` steps out flat and zero their gradients as one from its
    ``zero_grad``; a single-group, single-tensor RMSprop, or a single-group fused Adam on the CPU,
    then steps them as one tensor. -> the ``FlatParams``, or None where they cannot be (K-FAC,
    which reads its layers' gradients by hooks, and other optimizers than torch's Adam, RMSprop
    and SGD are left alone)."""
    if type(optimizer) not in (torch.optim.Adam, torch.optim.RMSprop, torch.optim.SGD):
        return None
    try:
        flat = FlatParams([p for group in optimizer.param_groups for p in group["params"]])
    except ValueError:
        return None
    vars(optimizer)["zero_grad"] = flat.zero_grad  # on this instance only
    group = optimizer.param_groups[0]
    if len(optimizer.param_groups) == 1 and supported(optimizer):
        if type(optimizer) is torch.optim.RMSprop and group["foreach"] is False:
            vars(optimizer)["step"] = FlatRMSprop(optimizer, flat).step
        elif (type(optimizer) is torch.optim.Adam and group["fused"]
              and flat.flat.device.type == "cpu"):
            vars(optimizer)["step"] = FlatAdam(optimizer, flat).step
    return flat
