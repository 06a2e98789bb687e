"""``ValueNorm``: the returns' running standard deviation, the unit a value head predicts in.

With it (``Policy(value_norm=True)``, ``main.py --value-norm``) the value head learns
return / std rather than the return, so the value loss keeps one scale whatever the rewards'
size, and ``Policy`` multiplies the head's output by ``scale`` wherever a value is read (acting,
bootstrapping, recomputing), so returns and advantages stay in reward units. PPO computes its
value loss in the head's units and updates the statistics with each rollout's returns after its
epochs (``PPO.update``). As DI-engine's ``value_norm``, the std alone: the target is not
centred. The statistics are buffers: checkpoints, Ray workers' weights and ``--resume`` carry them.
"""
import numpy as np
import torch
import torch.nn as nn

from a2c_ppo_acktr.envs.normalize import RunningMeanStd

EPS = 1e-8  # added to the variance before the square root, as VecNormalize's


class ValueNorm(nn.Module):
    """Running mean / variance of the returns seen (float64 buffers) and ``scale`` = sqrt(var +
    eps) (float32, a buffer too); before the first ``update`` the scale is 1."""

    mean: torch.Tensor
    var: torch.Tensor
    count: torch.Tensor
    scale: torch.Tensor

    def __init__(self) -> None:
        super().__init__()
        rms = RunningMeanStd()
        self.register_buffer("mean", torch.tensor(rms.mean))
        self.register_buffer("var", torch.tensor(rms.var))
        self.register_buffer("count", torch.tensor(rms.count, dtype=torch.float64))
        self.register_buffer("scale", torch.ones(()))

    @torch.no_grad()
    def update(self, returns: torch.Tensor) -> None:
        """Add a batch of returns (any shape) to the statistics (``RunningMeanStd``'s merge)."""
        rms = RunningMeanStd()
        rms.load_state_dict({"mean": self.mean.cpu(), "var": self.var.cpu(),
                             "count": self.count.item()})
        rms.update(returns.detach().reshape(-1).double().cpu().numpy())
        self.mean.fill_(float(rms.mean))
        self.var.fill_(float(rms.var))
        self.count.fill_(rms.count)
        self.scale.fill_(float(np.sqrt(rms.var + EPS)))
