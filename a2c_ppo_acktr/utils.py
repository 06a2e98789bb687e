"""Small helpers shared by the modules: layer init and the learning-rate schedule."""
from typing import TypeVar

import torch
import torch.nn as nn

M = TypeVar("M", bound=nn.Module)


def init(module: M, gain: float = 1.0) -> M:
    """Orthogonal weights with ``gain`` and zero biases, as the original initialises every layer."""
    nn.init.orthogonal_(module.weight, gain=gain)
    if module.bias is not None:
        nn.init.constant_(module.bias, 0)
    return module


def update_linear_schedule(optimizer: torch.optim.Optimizer, update: int, total_num_updates: int,
                           initial_lr: float) -> float:
    """Decay the learning rate linearly from ``initial_lr`` at update 0 to 0 after the last one."""
    lr = initial_lr - initial_lr * (update / float(total_num_updates))
    for param_group in optimizer.param_groups:
        param_group["lr"] = lr
    return lr
