"""Checkpoint files: atomic writes, weights-only reads, one-line errors."""
import os

import pytest
import torch

from a2c_ppo_acktr import utils


def test_save_is_atomic_when_interrupted(tmp_path, monkeypatch):
    path = str(tmp_path / "run.pt")
    utils.save_checkpoint({"step": torch.tensor(1)}, path)

    def crash_midway(obj, f, *args, **kwargs):
        f.write(b"half a checkpoint")
        raise KeyboardInterrupt  # e.g. Ctrl-C during the write

    monkeypatch.setattr(torch, "save", crash_midway)
    with pytest.raises(KeyboardInterrupt):
        utils.save_checkpoint({"step": torch.tensor(2)}, path)
    monkeypatch.undo()
    assert utils.load_checkpoint(path)["step"].item() == 1
    assert os.listdir(tmp_path) == ["run.pt"]  # no temporary file left behind


def test_checkpoints_never_unpickle_code(tmp_path):
    path = str(tmp_path / "evil.pt")
    torch.save({"obj": object()}, path)  # an arbitrary object: refused by weights_only
    with pytest.raises(utils.CheckpointError, match="cannot read checkpoint"):
        utils.load_checkpoint(path)


def test_check_checkpoint_names_the_mismatch():
    ckpt = {"env_name": "CartPole-v1", "obs_shape": [4], "action_space": "Discrete(2)"}
    utils.check_checkpoint(ckpt, "x.pt", "CartPole-v1", (4,), "Discrete(2)")
    with pytest.raises(utils.CheckpointError, match="obs_shape"):
        utils.check_checkpoint(ckpt, "x.pt", "CartPole-v1", (5,), "Discrete(2)")


def test_linear_schedule():
    opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    assert utils.update_linear_schedule(opt, 0, 4, 1.0) == 1.0
    assert utils.update_linear_schedule(opt, 3, 4, 1.0) == 0.25
    assert opt.param_groups[0]["lr"] == 0.25
