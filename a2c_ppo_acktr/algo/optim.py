"""The optimizers PPO and A2C step: torch's Adam and RMSprop update rules, called through torch's
functional API (``torch.optim.adam.adam``, ``torch.optim.rmsprop.rmsprop``: the kernels and numbers
of ``torch.optim.Adam`` and ``torch.optim.RMSprop``), with their state and state dicts in
``torch.optim``'s layout, so that checkpoints load into either.

Why not ``torch.optim.Optimizer`` itself: its constructor and every ``step`` import torch's
compiler (``torch._dynamo``, for its graph-break and disable hooks), a fixed cost at the start
of every run, one that never compiles too, and each step passes through its hooks' Python
(docs/benchmarks.md, "Measured code choices"). Any ``torch.optim`` optimizer still fits where these
are used (``Optimizer`` below): swap it in to try another rule.
"""
from collections.abc import Iterable
from typing import Any, Protocol

import torch
from torch.optim.adam import adam
from torch.optim.rmsprop import rmsprop


class Optimizer(Protocol):
    """What the agents, the lr schedules and the checkpoints use of an optimizer: ``torch.optim``'s
    interface, which ``torch.optim.Optimizer`` and the classes below have."""

    param_groups: list[dict[str, Any]]
    defaults: dict[str, Any]

    def step(self) -> Any: ...

    def zero_grad(self, set_to_none: bool = True) -> None: ...

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state_dict: dict[str, Any]) -> None: ...


class _Functional:
    """One parameter group, its per-parameter ``state`` created at a parameter's first step (with
    a gradient) and the state dict of ``torch.optim.Optimizer``. Subclasses name their state
    (``_init_state``) and call torch's functional step (``_step``, on the parameters that have a
    gradient and those gradients)."""

    def __init__(self, params: Iterable[torch.Tensor], defaults: dict[str, Any]) -> None:
        params = list(params)
        if not params:
            raise ValueError("optimizer got an empty parameter list")
        self.defaults = defaults
        self.param_groups = [{"params": params, **defaults}]
        self.state: dict[torch.Tensor, dict[str, torch.Tensor]] = {}

    def _init_state(self, p: torch.Tensor, group: dict[str, Any]) -> dict[str, torch.Tensor]:
        raise NotImplementedError

    def _step(self, params: list[torch.Tensor], grads: list[torch.Tensor],
              group: dict[str, Any]) -> None:
        raise NotImplementedError

    @torch.no_grad()
    def step(self) -> None:
        """One step of every parameter that has a gradient."""
        for group in self.param_groups:
            params, grads = [], []
            for p in group["params"]:
                if p.grad is not None:
                    params.append(p)
                    grads.append(p.grad)
                    if p not in self.state:
                        self.state[p] = self._init_state(p, group)
            if params:
                self._step(params, grads, group)

    def zero_grad(self, set_to_none: bool = True) -> None:
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                if set_to_none:
                    p.grad = None
                else:
                    p.grad.detach_().zero_()

    def state_dict(self) -> dict[str, Any]:
        """``torch.optim.Optimizer.state_dict``'s layout: parameters by their index."""
        index: dict[torch.Tensor, int] = {}
        groups = []
        for group in self.param_groups:
            ids = []
            for p in group["params"]:
                ids.append(index.setdefault(p, len(index)))
            groups.append({**{k: v for k, v in group.items() if k != "params"}, "params": ids})
        state = {index[p]: dict(s) for p, s in self.state.items()}
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Load a state dict of this class or of its ``torch.optim`` counterpart, as torch does:
        the saved hyper-parameters (a decayed lr among them) replace the current ones; state
        tensors move to their parameter's device and floating dtype (``step`` stays a float32
        count, on the parameter's device where the step is fused). ``ValueError`` if the groups'
        sizes differ."""
        saved = state_dict["param_groups"]
        if len(saved) != len(self.param_groups):
            raise ValueError("loaded state dict has a different number of parameter groups")
        if any(len(g["params"]) != len(s["params"]) for g, s in zip(self.param_groups, saved)):
            raise ValueError("loaded state dict contains a parameter group that doesn't match "
                             "the size of optimizer's group")
        # Keys a group saved by an older torch lacks take this optimizer's defaults.
        groups = [{**self.defaults, **s, "params": g["params"]}
                  for g, s in zip(self.param_groups, saved)]
        by_id = {i: (p, g) for g, s in zip(groups, saved) for i, p in zip(s["params"], g["params"])}
        state = {}
        for i, values in state_dict["state"].items():
            p, group = by_id[int(i)]
            state[p] = {key: _placed(value, p, key, bool(group.get("fused")))
                        for key, value in values.items()}
        self.param_groups, self.state = groups, state


def _placed(value: torch.Tensor, p: torch.Tensor, key: str, fused: bool) -> torch.Tensor:
    """A loaded state tensor where ``torch.optim`` puts it (``_process_value_according_to_param_policy``)."""
    if key == "step":
        return value.to(dtype=torch.float32, device=p.device) if fused else value
    if value.is_floating_point():
        return value.to(dtype=p.dtype, device=p.device)
    return value.to(device=p.device)


class Adam(_Functional):
    """``torch.optim.Adam(params, lr, betas, eps, fused=..., foreach=...)`` without weight decay
    or AMSGrad: the same steps bit for bit, and the same state dict."""

    def __init__(self, params: Iterable[torch.Tensor], lr: float = 1e-3,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 foreach: bool | None = None, fused: bool | None = None) -> None:
        super().__init__(params, {"lr": lr, "betas": betas, "eps": eps, "weight_decay": 0,
                                  "amsgrad": False, "maximize": False, "foreach": foreach,
                                  "capturable": False, "differentiable": False, "fused": fused,
                                  "decoupled_weight_decay": False})

    def _init_state(self, p: torch.Tensor, group: dict[str, Any]) -> dict[str, torch.Tensor]:
        # The fused kernel reads the step count where the parameter is; the others, on the CPU.
        step = (torch.zeros((), dtype=torch.float32, device=p.device) if group["fused"]
                else torch.tensor(0.0, dtype=torch.float32))
        return {"step": step,
                "exp_avg": torch.zeros_like(p, memory_format=torch.preserve_format),
                "exp_avg_sq": torch.zeros_like(p, memory_format=torch.preserve_format)}

    def _step(self, params: list[torch.Tensor], grads: list[torch.Tensor],
              group: dict[str, Any]) -> None:
        states = [self.state[p] for p in params]
        beta1, beta2 = group["betas"]
        adam(params, grads, [s["exp_avg"] for s in states],
             [s["exp_avg_sq"] for s in states], [], [s["step"] for s in states],
             foreach=group["foreach"], fused=group["fused"], amsgrad=False, beta1=beta1,
             beta2=beta2, lr=group["lr"], weight_decay=0.0, eps=group["eps"], maximize=False)


class RMSprop(_Functional):
    """``torch.optim.RMSprop(params, lr, alpha, eps, foreach=...)`` without momentum, centering or
    weight decay: the same steps bit for bit, and the same state dict."""

    def __init__(self, params: Iterable[torch.Tensor], lr: float = 1e-2, alpha: float = 0.99,
                 eps: float = 1e-8, foreach: bool | None = None) -> None:
        super().__init__(params, {"lr": lr, "momentum": 0, "alpha": alpha, "eps": eps,
                                  "centered": False, "weight_decay": 0, "capturable": False,
                                  "foreach": foreach, "maximize": False, "differentiable": False})

    def _init_state(self, p: torch.Tensor, group: dict[str, Any]) -> dict[str, torch.Tensor]:
        return {"step": torch.tensor(0.0, dtype=torch.float32),
                "square_avg": torch.zeros_like(p, memory_format=torch.preserve_format)}

    def _step(self, params: list[torch.Tensor], grads: list[torch.Tensor],
              group: dict[str, Any]) -> None:
        states = [self.state[p] for p in params]
        rmsprop(params, grads, [s["square_avg"] for s in states], [], [],
                [s["step"] for s in states], foreach=group["foreach"], lr=group["lr"],
                alpha=group["alpha"], eps=group["eps"], weight_decay=0.0, momentum=0.0,
                centered=False)
