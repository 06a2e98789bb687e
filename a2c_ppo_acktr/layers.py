"""Calling a policy's small layers without ``nn.Module``'s per-call cost: ``call`` and ``run``.

On the small MLPs of classic control and MuJoCo a module call costs more than its arithmetic
(``Module.__call__``, then ``__getattr__`` for each parameter; docs/benchmarks.md, "Measured code
choices"). ``call(m, x)`` computes
exactly ``m(x)``, the same kernels on the same tensors, but calls the function directly when
nothing could observe the difference: no hook on the module nor a global one (K-FAC's hooks on
``Linear`` layers keep the module calls) and no ``torch.jit.trace`` recording.
"""
from collections.abc import Callable
from typing import Any

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.modules import module as _module


def _linear(m: nn.Module, x: torch.Tensor) -> torch.Tensor:
    p = m._parameters  # what Module.__getattr__ would look up, without its cost
    return F.linear(x, p["weight"], p["bias"])  # type: ignore[arg-type]  # weight is set


def _relu(m: nn.Module, x: torch.Tensor) -> torch.Tensor:
    return torch.relu_(x) if m.inplace else torch.relu(x)


# Exact types only: a subclass (e.g. a parametrized Linear) may compute something else.
_DIRECT: dict[type, Callable[[nn.Module, torch.Tensor], torch.Tensor]] = {
    nn.Linear: _linear,
    nn.Tanh: lambda m, x: torch.tanh(x),
    nn.ReLU: _relu,
}


def _observed(m: nn.Module) -> bool:
    """True if calling ``m.forward`` instead of ``m`` could be seen: hooks, or jit tracing."""
    return bool(m._forward_hooks or m._forward_pre_hooks or m._backward_hooks
                or m._backward_pre_hooks or _module._global_forward_hooks
                or _module._global_forward_pre_hooks or _module._global_backward_hooks
                or _module._global_backward_pre_hooks or torch._C._get_tracing_state())


def call(m: nn.Module, *args: torch.Tensor) -> Any:
    """``m(*args)``, through ``m.forward`` (or, for ``Linear``, ``Tanh`` and ``ReLU``, the
    function it calls) when nothing observes the module call."""
    if _observed(m):
        return m(*args)
    direct = _DIRECT.get(type(m))
    return direct(m, *args) if direct is not None else m.forward(*args)


def run(layers: nn.Sequential, x: torch.Tensor) -> torch.Tensor:
    """``layers(x)``, each layer through ``call``."""
    if _observed(layers):
        return layers(x)
    for m in layers:
        x = call(m, x)
    return x
