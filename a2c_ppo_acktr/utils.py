"""Small helpers shared by the modules: layer init, learning-rate schedule, checkpoint files."""
import os
import tempfile

import torch
import torch.nn as nn


def init(module, gain=1.0):
    """Orthogonal weights with ``gain`` and zero biases, as the original initialises every layer."""
    nn.init.orthogonal_(module.weight, gain=gain)
    if module.bias is not None:
        nn.init.constant_(module.bias, 0)
    return module


def update_linear_schedule(optimizer, update, total_num_updates, initial_lr):
    """Decay the learning rate linearly from ``initial_lr`` at update 0 to 0 after the last one."""
    lr = initial_lr - initial_lr * (update / float(total_num_updates))
    for param_group in optimizer.param_groups:
        param_group["lr"] = lr
    return lr


def save_checkpoint(state, path):
    """Write ``state`` (tensors and plain values only) to ``path`` atomically.

    The data goes to a temporary file in the same directory which is then renamed over ``path``,
    so a crash mid-write leaves the previous checkpoint intact.
    """
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".tmp-", suffix=".pt")
    try:
        with os.fdopen(fd, "wb") as f:
            torch.save(state, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


def load_checkpoint(path, map_location="cpu"):
    """Read a checkpoint written by ``save_checkpoint``; never unpickles code."""
    return torch.load(path, map_location=map_location, weights_only=True)
