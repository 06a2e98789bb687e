"""The seam's "layers" mechanism: a policy's modules called without ``nn.Module.__call__``'s
per-call cost, where nothing could observe the difference.

On the small MLPs of classic control and MuJoCo a module call costs more than its arithmetic
(``Module.__call__``, then ``__getattr__`` for each parameter; docs/benchmarks.md, "Measured code
choices"). ``direct_calls(policy)`` gives each of its modules a class of its own, a subclass of
its class whose ``__call__`` calls ``forward`` directly (and for ``nn.Linear``, ``nn.Tanh`` and
``nn.ReLU``, the function their ``forward`` calls): the same kernels on the same tensors. A
module a researcher adds, or a ``forward`` they change, is called as written; a module with a hook
(K-FAC's), a global hook, ``torch.jit.trace`` recording or ``module.compile()`` goes through
``Module.__call__`` as before.
"""
from collections.abc import Callable
from typing import Any

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.modules import module as _module


def observed(m: nn.Module) -> bool:
    """True if calling ``m.forward`` instead of ``m`` could be seen: hooks, tracing, compiling."""
    return bool(m._forward_hooks or m._forward_pre_hooks or m._backward_hooks
                or m._backward_pre_hooks or _module._global_forward_hooks
                or _module._global_forward_pre_hooks or _module._global_backward_hooks
                or _module._global_backward_pre_hooks or torch._C._get_tracing_state()
                or m._compiled_call_impl is not None)


def _forward(self: nn.Module, *args: Any, **kwargs: Any) -> Any:
    if observed(self):
        return nn.Module.__call__(self, *args, **kwargs)
    return self.forward(*args, **kwargs)


def _linear(self: nn.Linear, x: torch.Tensor) -> torch.Tensor:
    if observed(self):
        return nn.Module.__call__(self, x)
    p = self._parameters  # what Module.__getattr__ would look up, without its cost
    return F.linear(x, p["weight"], p["bias"])  # type: ignore[arg-type]  # weight is set


def _tanh(self: nn.Tanh, x: torch.Tensor) -> torch.Tensor:
    return nn.Module.__call__(self, x) if observed(self) else torch.tanh(x)


def _relu(self: nn.ReLU, x: torch.Tensor) -> torch.Tensor:
    if observed(self):
        return nn.Module.__call__(self, x)
    return torch.relu_(x) if self.inplace else torch.relu(x)


# Exact types only: a subclass (e.g. a parametrized Linear) may compute something else.
_FUNCTIONS: dict[type, Callable[..., Any]] = {nn.Linear: _linear, nn.Tanh: _tanh, nn.ReLU: _relu}
_DIRECT: dict[type, type] = {}  # class -> its direct-call subclass, made once


def direct_class(cls: type) -> type:
    """``cls``' subclass whose ``__call__`` calls directly (a class made once per class)."""
    if cls not in _DIRECT:
        call = _FUNCTIONS.get(cls, _forward)
        _DIRECT[cls] = type(cls.__name__, (cls,), {"__call__": call,
                                                   "__module__": cls.__module__})
    return _DIRECT[cls]


def direct_calls(module: nn.Module) -> None:
    """Give every submodule of ``module`` (not ``module`` itself: a ``Policy`` is not called)
    its direct-call class; one already given it, or whose class overrides ``__call__``, stays."""
    for m in module.modules():
        if m is module or type(m) in _DIRECT.values() or type(m).__call__ is not nn.Module.__call__:
            continue
        m.__class__ = direct_class(type(m))
