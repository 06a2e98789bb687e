"""K-FAC (Kronecker-factored approximate curvature) for ACKTR, on any model of Linear/Conv2d layers.

Each ``nn.Linear`` / ``nn.Conv2d`` layer's Fisher block is ``A ⊗ G``: ``A`` the second moment of
its inputs (the bias one more input, or with ``split_bias`` a block of its own), ``G`` that of its
output gradients, recorded by hooks while ``optimizer.acc_stats`` is True. The step is

    v   = Q_G [(Q_G^T grad Q_A) / (d_G d_A^T + damping)] Q_A^T   (= (A ⊗ G + damping I)^-1 grad)
    nu  = min(1, sqrt(kl_clip / sum(v * grad * lr^2)))               (trust region on the KL)
    SGD with momentum on nu * v, with the step size lr * (1 - momentum)

Other parameters (``logstd``, GRU weights) step along their plain gradient. All state is standard
``Optimizer`` state (``weights_only``-loadable); ``param_groups[0]["lr"]`` is the K-FAC lr. The
bias conventions and the rest: docs/details.md, "ACKTR".
"""
import math
from collections.abc import Callable
from typing import overload

import torch
import torch.nn as nn
import torch.nn.functional as F

# Patch elements per chunk of the conv factor (~8 MB of fp32): a batch's patches are built and
# multiplied a cache-sized chunk at a time, not all at once (docs/benchmarks.md, "Measured code
# choices").
PATCH_CHUNK = 1 << 21


def _out_size(size: int, kernel: int, stride: int, padding: int, dilation: int) -> int:
    return (size + 2 * padding - dilation * (kernel - 1) - 1) // stride + 1


def compute_cov_a(a: torch.Tensor, module: nn.Linear | nn.Conv2d,
                  bias_column: bool = True) -> torch.Tensor:
    """Running-factor estimate of A for one batch of inputs ``a`` of ``module``.

    Linear: rows ``[a, 1]``, ``A = a^T a / N``. Conv2d: one row ``[patch, 1] / spatial`` per output
    position, ``A = a^T a / N`` (the original's ``compute_cov_a`` convention, N = batch size).
    Computed as ``[[X^T X, X^T 1], [1^T X, rows]] / (spatial^2 N)`` for the rows ``X`` without the
    ones column, so no scaled or widened copy of the rows is made. Without ``bias_column`` (or a
    bias) ``A = X^T X / (spatial^2 N)``.
    """
    batch_size = a.size(0)
    if isinstance(module, nn.Conv2d):
        assert isinstance(module.padding, tuple), "K-FAC's patches need numeric padding, not 'same'"
        k, s, p, d = module.kernel_size, module.stride, module.padding, module.dilation
        spatial = (_out_size(a.size(2), k[0], s[0], p[0], d[0])
                   * _out_size(a.size(3), k[1], s[1], p[1], d[1]))
        width = a.size(1) * k[0] * k[1]
        per_chunk = max(1, PATCH_CHUNK // (spatial * width))
        xtx, sums, count = a.new_zeros(width, width), a.new_zeros(width), batch_size * spatial
        for part in a.split(per_chunk):
            # (n, C*kh*kw, out_h*out_w) -> one row per output position, in the weight's order
            rows = F.unfold(part, k, dilation=d, padding=p, stride=s).transpose(1, 2).reshape(-1, width)
            xtx.addmm_(rows.t(), rows)
            sums += rows.sum(0)
    else:
        spatial = 1
        rows = a.reshape(-1, a.size(-1))
        xtx, sums, count = rows.t() @ rows, rows.sum(0), rows.size(0)
    if module.bias is not None and bias_column:
        n = xtx.size(0)
        cov = xtx.new_empty(n + 1, n + 1)
        cov[:n, :n], cov[:n, n], cov[n, :n] = xtx, sums, sums
        cov[n, n] = count
    else:
        cov = xtx
    return cov.div_(spatial * spatial * batch_size)


def compute_cov_g(g: torch.Tensor, module: nn.Linear | nn.Conv2d) -> torch.Tensor:
    """Running-factor estimate of G for the gradients ``g`` w.r.t. the outputs of ``module``.

    The loss is a batch mean, so each per-sample gradient is scaled back up by the batch size N.
    Linear: ``G = (N g)^T (N g) / N``. Conv2d: one row ``g * spatial`` per output position,
    ``G = (N g)^T (N g) / (N * spatial)`` (the original's ``compute_cov_g`` convention).
    """
    batch_size = g.size(0)
    if isinstance(module, nn.Conv2d):
        spatial = g.size(2) * g.size(3)
        rows = g.permute(0, 2, 3, 1).reshape(-1, g.size(1))
    else:
        spatial = 1
        rows = g.reshape(-1, g.size(-1))
    # (N spatial g)^T (N spatial g) / rows, scaled after the product rather than the rows before
    return (rows.t() @ rows).mul_((batch_size * spatial) ** 2 / rows.size(0))


def compute_cov_g_bias(g: torch.Tensor, module: nn.Linear | nn.Conv2d) -> torch.Tensor:
    """The bias's own G (the original's ``AddBias`` block, whose A is 1): the bias gradient of a
    sample is its output gradient summed over a conv's positions, ``G = (N b)^T (N b) / N``."""
    rows = g.sum((2, 3)) if isinstance(module, nn.Conv2d) else g.reshape(-1, g.size(-1))
    return (rows.t() @ rows).mul_(g.size(0) ** 2 / rows.size(0))


def _update_running_stat(new: torch.Tensor, running: torch.Tensor, decay: float) -> None:
    running.mul_(decay).add_(new, alpha=1 - decay)


class KFACOptimizer(torch.optim.Optimizer):
    """ACKTR's K-FAC optimizer for ``model`` (see the module docstring).

    ``Ts``: the Fisher statistics are accumulated every ``Ts`` steps (the caller checks
    ``steps % Ts == 0`` before setting ``acc_stats``); ``Tf``: the factors are re-decomposed every
    ``Tf`` steps. The first accumulation initialises the running factors to the batch estimate.
    """

    def __init__(self, model: nn.Module, lr: float = 0.25, momentum: float = 0.9,
                 stat_decay: float = 0.99, kl_clip: float = 0.001, damping: float = 1e-2,
                 weight_decay: float = 0, Ts: int = 1, Tf: int = 10,
                 split_bias: bool = False) -> None:
        defaults = dict(lr=lr, momentum=momentum, stat_decay=stat_decay, kl_clip=kl_clip,
                        damping=damping, weight_decay=weight_decay, Ts=Ts, Tf=Tf, steps=0)
        super().__init__(model.parameters(), defaults)
        self.model = model
        self.split_bias = split_bias  # the bias in a block of its own (the module docstring)
        self.acc_stats = False
        self.nu = 1.0  # the last step's KL-clip factor: < 1 where the trust region bound it
        self.modules = [m for m in model.modules() if isinstance(m, (nn.Linear, nn.Conv2d))]
        for m in self.modules:
            m.register_forward_hook(self._forward_hook)

    # The hyper-parameters as attributes, like the original (group 0 holds them).
    @property
    def steps(self) -> int:
        return self.param_groups[0]["steps"]

    @property
    def lr(self) -> float:
        return self.param_groups[0]["lr"]

    @property
    def Ts(self) -> int:
        return self.param_groups[0]["Ts"]

    @property
    def Tf(self) -> int:
        return self.param_groups[0]["Tf"]

    def _forward_hook(self, module: nn.Module, inputs: tuple[torch.Tensor, ...],
                      output: torch.Tensor) -> None:
        """While ``acc_stats``: keep this call's input and hook the gradient of its output."""
        if not (self.acc_stats and torch.is_grad_enabled() and output.requires_grad):
            return
        a = inputs[0].detach()
        assert isinstance(module, (nn.Linear, nn.Conv2d))  # the hooks are on self.modules only

        def record(grad_output: torch.Tensor) -> None:
            if self.acc_stats:  # the Fisher backward, not the loss backward that follows
                self._accumulate(module, a, grad_output.detach())

        output.register_hook(record)

    @torch.no_grad()
    def _accumulate(self, module: nn.Linear | nn.Conv2d, a: torch.Tensor, g: torch.Tensor) -> None:
        decay = self.param_groups[0]["stat_decay"]
        state = self.state[module.weight]
        # In fp32 whatever the forward ran in: under bf16 autocast (Policy(precision="bf16")) a
        # layer's inputs and output gradients are bf16, its statistics and their eigenbases not.
        dtype = module.weight.dtype
        a, g = a.to(dtype), g.to(dtype)
        stats = [(state, "m_aa", compute_cov_a(a, module, not self.split_bias)),
                 (state, "m_gg", compute_cov_g(g, module))]
        if self.split_bias and module.bias is not None:
            stats.append((self.state[module.bias], "m_gg", compute_cov_g_bias(g, module)))
        for st, key, new in stats:
            if key not in st:
                st[key] = new.clone()
            else:
                _update_running_stat(new, st[key], decay)

    @torch.no_grad()
    def precondition(self, module: nn.Linear | nn.Conv2d,
                     damping: float) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The natural gradient of ``module``'s weight (and bias) from the current eigenbasis."""
        state = self.state[module.weight]
        assert module.weight.grad is not None, "step() preconditions the layers with gradients"
        grad = module.weight.grad.reshape(module.weight.size(0), -1)
        bias, bias_grad = module.bias, None
        if bias is not None:
            bias_grad = bias.grad if bias.grad is not None else torch.zeros_like(bias)
            if not self.split_bias:  # one more input: a column of the layer's gradient
                grad = torch.cat([grad, bias_grad.unsqueeze(1)], dim=1)
        v = state["Q_g"].t() @ grad @ state["Q_a"]
        v = v / (state["d_g"].unsqueeze(1) * state["d_a"].unsqueeze(0) + damping)
        v = state["Q_g"] @ v @ state["Q_a"].t()
        if bias is None or bias_grad is None:
            return v.reshape(module.weight.shape), None
        if not self.split_bias:
            return v[:, :-1].reshape(module.weight.shape), v[:, -1].reshape(bias.shape)
        b = self.state[bias]  # its own block, A = 1
        v_b = b["Q_g"] @ ((b["Q_g"].t() @ bias_grad) / (b["d_g"] + damping))
        return v.reshape(module.weight.shape), v_b

    @torch.no_grad()
    def natural_gradient(self) -> dict[torch.Tensor, torch.Tensor]:
        """{parameter: its preconditioned gradient} for the parameters with a ``.grad``: the
        K-FAC'd layers' ``(A ⊗ G + damping I)^-1 grad``, any other parameter's plain gradient.
        Re-decomposes the factors where due (every ``Tf`` steps, or never done yet)."""
        group = self.param_groups[0]
        params = [p for g in self.param_groups for p in g["params"] if p.grad is not None]
        updates = {p: p.grad for p in params}  # identity preconditioner unless K-FAC'd below
        for m in self.modules:
            state = self.state[m.weight]
            if m.weight.grad is None or "m_aa" not in state:
                continue
            if group["steps"] % group["Tf"] == 0 or "Q_a" not in state:
                factors = [(state, "a"), (state, "g")]
                if self.split_bias and m.bias is not None:
                    factors.append((self.state[m.bias], "g"))
                for st, k in factors:
                    d, q = torch.linalg.eigh(st[f"m_{k}{k}"])
                    # The factors are PSD; clamp round-off negatives so d_g d_a^T + damping > 0.
                    st[f"d_{k}"], st[f"Q_{k}"] = d.clamp_(min=0), q
            v_w, v_b = self.precondition(m, group["damping"] + group["weight_decay"])
            updates[m.weight] = v_w
            if v_b is not None and m.bias is not None and m.bias.grad is not None:
                updates[m.bias] = v_b
        return updates

    def predicted_kl(self, updates: dict[torch.Tensor, torch.Tensor]) -> float:
        """``lr^2 sum(v * grad)``: the KL a step of ``lr`` along the natural gradient ``v``
        (``natural_gradient()``) would change the model's distribution by, as the KL clip
        reckons it (the original's convention, without the 1/2 of the quadratic form)."""
        lr = self.param_groups[0]["lr"]
        return float(sum(((v * p.grad).sum() for p, v in updates.items()
                         if p.grad is not None), torch.tensor(0.0))
                     * lr * lr)

    # torch.optim.Optimizer's signatures (a closure's loss is typed float there).
    @overload
    def step(self, closure: None = None) -> None: ...

    @overload
    def step(self, closure: Callable[[], float]) -> float: ...

    @torch.no_grad()
    def step(self, closure: Callable[[], float] | None = None) -> float | None:
        """One K-FAC step on the gradients of the parameters; returns ``closure()`` if given."""
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        group = self.param_groups[0]
        lr, momentum, wd = group["lr"], group["momentum"], group["weight_decay"]
        params = [p for g in self.param_groups for p in g["params"] if p.grad is not None]
        if wd > 0:
            for p in params:
                p.grad.add_(p, alpha=wd)
        updates = self.natural_gradient()
        vg_sum = self.predicted_kl(updates)
        nu = min(1.0, math.sqrt(group["kl_clip"] / vg_sum)) if vg_sum > 0 else 1.0
        self.nu = nu

        step_size = lr * (1 - momentum)  # the original's optim.SGD(lr * (1 - momentum), momentum)
        for p in params:
            d_p = updates[p].mul(nu)
            state = self.state[p]
            if momentum != 0:
                buf = state.get("momentum_buffer")
                if buf is None:
                    buf = state["momentum_buffer"] = d_p.clone()
                else:
                    buf.mul_(momentum).add_(d_p)
                d_p = buf
            p.add_(d_p, alpha=-step_size)
        for g in self.param_groups:
            g["steps"] += 1
        return loss
