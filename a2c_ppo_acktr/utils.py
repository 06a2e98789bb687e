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


class CheckpointError(Exception):
    """A checkpoint that is missing, unreadable or belongs to another env; the message is one line."""


def load_checkpoint(path, map_location="cpu"):
    """Read a checkpoint written by ``save_checkpoint``; never unpickles code."""
    if not os.path.isfile(path):
        raise CheckpointError(f"no checkpoint at {path}")
    try:
        return torch.load(path, map_location=map_location, weights_only=True)
    except Exception as e:  # torch explains in paragraphs: name the kind of failure only
        what = ("it pickles Python objects, which are never loaded" if "GLOBAL" in str(e)
                else "corrupt or not a torch file")
        raise CheckpointError(f"cannot read checkpoint {path}: {what}") from e


def check_checkpoint(ckpt, path, env_name, obs_shape, action_space):
    """Raise ``CheckpointError`` unless ``ckpt`` was saved for this env and these spaces."""
    expected = {"env_name": env_name, "obs_shape": list(obs_shape),
                "action_space": str(action_space)}
    for key, want in expected.items():
        got = ckpt.get(key, want if key == "action_space" else None)  # older files lack it
        if got != want:
            raise CheckpointError(f"checkpoint {path} is for {key} {got!r}, expected {want!r}")
