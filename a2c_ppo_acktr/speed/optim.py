"""The seam's "optim" mechanism: a ``torch.optim.Adam`` or ``RMSprop`` steps through torch's
functional API (``torch.optim.adam.adam``, ``torch.optim.rmsprop.rmsprop``), the kernels and
numbers of its own ``step``, without the wrapper around ``Optimizer.step`` (profiler record,
hook dispatch, grad-mode switch); ``zero_grad`` without its profiler record.

Applied on the instance (``step`` and ``zero_grad`` shadowed), so the optimizer keeps its
``state``, ``param_groups`` and state dict: checkpoints, lr schedules and anything holding it
see one object. Only where nothing would differ: exactly ``torch.optim.Adam`` / ``RMSprop``
(a subclass or any other optimizer is left alone), without AMSGrad, momentum, centering,
capturable or differentiable steps; a step with a closure or with hooks registered goes
through torch's own ``step``.
"""
from collections.abc import Callable
from typing import Any

import torch
from torch.optim.adam import adam
from torch.optim.optimizer import (
    _get_scalar_dtype,
    _global_optimizer_post_hooks,
    _global_optimizer_pre_hooks,
)
from torch.optim.rmsprop import rmsprop


def hooked(optimizer: torch.optim.Optimizer) -> bool:
    """True if a step hook (the optimizer's or a global one) would see the step."""
    return bool(optimizer._optimizer_step_pre_hooks or optimizer._optimizer_step_post_hooks
                or _global_optimizer_pre_hooks or _global_optimizer_post_hooks)


def supported(optimizer: torch.optim.Optimizer) -> bool:
    """Whether ``functional_step`` steps ``optimizer`` as its own ``step`` would."""
    groups = optimizer.param_groups
    if type(optimizer) is torch.optim.Adam:
        ok = all(not g["amsgrad"] for g in groups)
    elif type(optimizer) is torch.optim.RMSprop:
        ok = all(g["momentum"] == 0 and not g["centered"] for g in groups)
    else:
        return False
    return ok and all(not g["capturable"] and not g["differentiable"]
                      and not torch.is_tensor(g["lr"])
                      and not any(torch.is_complex(p) for p in g["params"]) for g in groups)


def _adam(optimizer: torch.optim.Optimizer, group: dict[str, Any]) -> None:
    params, grads, avgs, squares, steps = [], [], [], [], []
    for p in group["params"]:
        if p.grad is None:
            continue
        state = optimizer.state[p]
        if not state:  # as Adam._init_group: the fused kernel reads the step where p is
            state["step"] = (torch.zeros((), dtype=_get_scalar_dtype(is_fused=True),
                                         device=p.device) if group["fused"]
                             else torch.tensor(0.0, dtype=_get_scalar_dtype()))
            state["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
            state["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
        params.append(p)
        grads.append(p.grad)
        avgs.append(state["exp_avg"])
        squares.append(state["exp_avg_sq"])
        steps.append(state["step"])
    beta1, beta2 = group["betas"]
    adam(params, grads, avgs, squares, [], steps, amsgrad=False, has_complex=False, beta1=beta1,
         beta2=beta2, lr=group["lr"], weight_decay=group["weight_decay"], eps=group["eps"],
         maximize=group["maximize"], foreach=group["foreach"], capturable=False,
         differentiable=False, fused=group["fused"], grad_scale=None, found_inf=None,
         decoupled_weight_decay=group["decoupled_weight_decay"])


def _rmsprop(optimizer: torch.optim.Optimizer, group: dict[str, Any]) -> None:
    params, grads, squares, steps = [], [], [], []
    for p in group["params"]:
        if p.grad is None:
            continue
        state = optimizer.state[p]
        if not state:  # as RMSprop._init_group
            state["step"] = torch.zeros((), dtype=_get_scalar_dtype())
            state["square_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
        params.append(p)
        grads.append(p.grad)
        squares.append(state["square_avg"])
        steps.append(state["step"])
    rmsprop(params, grads, squares, [], [], steps, lr=group["lr"], alpha=group["alpha"],
            eps=group["eps"], weight_decay=group["weight_decay"], momentum=0, centered=False,
            foreach=group["foreach"], maximize=group["maximize"], differentiable=False,
            capturable=False, has_complex=False)


def functional_step(optimizer: torch.optim.Optimizer) -> bool:
    """Shadow ``optimizer.step`` and ``zero_grad`` as the module docstring says; -> whether it
    did (False: ``optimizer`` is not one it steps alike)."""
    if not supported(optimizer):
        return False
    rule = _adam if type(optimizer) is torch.optim.Adam else _rmsprop
    own_step = type(optimizer).step

    def step(closure: Callable[[], float] | None = None) -> float | None:
        if closure is not None or hooked(optimizer):
            return own_step(optimizer, closure)
        with torch.no_grad():
            for group in optimizer.param_groups:
                rule(optimizer, group)
        return None

    def zero_grad(set_to_none: bool = True) -> None:
        for group in optimizer.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                if set_to_none:
                    p.grad = None
                else:
                    p.grad.detach_()
                    p.grad.zero_()

    vars(optimizer)["step"] = step  # on this instance; its class keeps torch's
    vars(optimizer)["zero_grad"] = zero_grad
    return True
