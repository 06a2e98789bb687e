"""Checkpoint files: the run's paths, atomic writes, stale temporaries, weights-only reads,
one-line errors."""
import argparse
import errno
import io
import os
import pickle
import subprocess
import sys
import warnings

import pytest
import torch

from a2c_ppo_acktr import files
from a2c_ppo_acktr.run import checkpoint

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_run_paths_layout(monkeypatch):
    monkeypatch.setenv("HOME", "/home/u")
    args = argparse.Namespace(log_dir="~/logs", save_dir="./trained_models/", algo="ppo",
                              env_name="ALE/Pong-v5", seed=3)
    assert checkpoint.run_paths(args) == (
        "/home/u/logs/ppo/ALE_Pong-v5_seed3", "/home/u/logs/ppo/ALE_Pong-v5_seed3/eval",
        "trained_models/ppo/ALE_Pong-v5_seed3.pt")
    args.save_dir = ""  # saving off
    assert checkpoint.run_paths(args).checkpoint is None


def test_save_is_atomic_when_interrupted(tmp_path, monkeypatch):
    path = str(tmp_path / "run.pt")
    checkpoint.save_checkpoint({"step": torch.tensor(1)}, path)

    def crash_midway(obj, f, *args, **kwargs):
        f.write(b"half a checkpoint")
        raise KeyboardInterrupt  # e.g. Ctrl-C during the write

    monkeypatch.setattr(torch, "save", crash_midway)
    with pytest.raises(KeyboardInterrupt):
        checkpoint.save_checkpoint({"step": torch.tensor(2)}, path)
    monkeypatch.undo()
    assert checkpoint.load_checkpoint(path)["step"].item() == 1
    assert os.listdir(tmp_path) == ["run.pt"]  # no temporary file left behind


def test_failed_write_is_one_line_and_keeps_the_previous_checkpoint(tmp_path, monkeypatch):
    path = str(tmp_path / "run.pt")
    checkpoint.save_checkpoint({"step": torch.tensor(1)}, path)

    def disk_full(fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", disk_full)
    with pytest.raises(checkpoint.CheckpointError, match=f"cannot write {path}: No space left"):
        checkpoint.save_checkpoint({"step": torch.tensor(2)}, path)
    monkeypatch.undo()
    assert checkpoint.load_checkpoint(path)["step"].item() == 1
    assert os.listdir(tmp_path) == ["run.pt"]
    with pytest.raises(checkpoint.CheckpointError, match="cannot write"):  # a dir that is a file
        checkpoint.save_checkpoint({}, os.path.join(path, "under_a_file.pt"))


class FillingDisk(io.FileIO):
    """A file whose disk fills at its second write: torch's writer then goes on writing, fails
    on its own state and raises a RuntimeError while handling the OSError (issue #52)."""

    def __init__(self, *args):
        super().__init__(*args)
        self.writes = 0

    def write(self, data):
        self.writes += 1
        if self.writes == 2:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return super().write(data)


def test_full_disk_under_torchs_writer_is_one_line_naming_the_path(tmp_path, monkeypatch):
    path = str(tmp_path / "run.pt")
    checkpoint.save_checkpoint({"step": torch.tensor(1)}, path)
    monkeypatch.setattr(os, "fdopen", lambda fd, mode: FillingDisk(fd, "wb"))
    with pytest.raises(checkpoint.CheckpointError) as e:
        checkpoint.save_checkpoint({"step": torch.zeros(1000)}, path)
    monkeypatch.undo()
    assert str(e.value) == f"cannot write {path}: No space left on device"
    assert checkpoint.load_checkpoint(path)["step"].item() == 1
    assert os.listdir(tmp_path) == ["run.pt"]


@pytest.mark.parametrize("umask", [0o022, 0o077, 0o002])
def test_saved_files_get_the_mode_of_the_umask(tmp_path, umask):
    """As open() creates files (issue #52: checkpoints and exports were 0600 whatever the umask)."""
    old = os.umask(umask)
    try:
        checkpoint.save_checkpoint({"step": torch.tensor(1)}, str(tmp_path / "run.pt"))
        (tmp_path / "log.txt").write_text("")
    finally:
        os.umask(old)
    assert os.stat(tmp_path / "run.pt").st_mode & 0o777 == 0o666 & ~umask
    assert os.stat(tmp_path / "run.pt").st_mode == os.stat(tmp_path / "log.txt").st_mode


@pytest.mark.slow
def test_kill_9_mid_save_leaves_a_temporary_that_start_up_removes(tmp_path):
    """SIGKILL between write and rename: the previous checkpoint stays, and the temporary is named
    after its checkpoint so that this run's start-up removes it and no other run's."""
    path = str(tmp_path / "CartPole-v1_seed1.pt")
    checkpoint.save_checkpoint({"step": torch.tensor(1)}, path)
    other = tmp_path / ".CartPole-v1_seed2.pt.tmp-x1y2"  # another run's, maybe saving right now
    other.write_bytes(b"")
    script = ("import sys, time, torch\n"
              "from a2c_ppo_acktr.run import checkpoint\n"
              "def stuck(obj, f, *a, **k):\n"
              "    f.write(b'half'); f.flush(); print('writing', flush=True); time.sleep(60)\n"
              "torch.save = stuck\n"
              "checkpoint.save_checkpoint({'step': torch.tensor(2)}, sys.argv[1])\n")
    proc = subprocess.Popen([sys.executable, "-c", script, path], cwd=ROOT, text=True,
                            stdout=subprocess.PIPE)
    assert proc.stdout.readline() == "writing\n"
    proc.kill()
    proc.wait()
    stale = [f for f in os.listdir(tmp_path) if f.startswith(".CartPole-v1_seed1.pt.tmp-")]
    assert len(stale) == 1 and checkpoint.load_checkpoint(path)["step"].item() == 1
    assert files.remove_stale_temporaries(path) == [str(tmp_path / stale[0])]
    assert sorted(os.listdir(tmp_path)) == [other.name, "CartPole-v1_seed1.pt"]


def test_checkpoints_never_unpickle_code(tmp_path):
    path = str(tmp_path / "evil.pt")
    torch.save({"obj": object()}, path)  # an arbitrary object: refused by weights_only
    with pytest.raises(checkpoint.CheckpointError, match="cannot read checkpoint"):
        checkpoint.load_checkpoint(path)


def test_a_raw_pickle_is_refused_in_one_line_without_torchs_warning(tmp_path):
    path = str(tmp_path / "raw.pt")
    with open(path, "wb") as f:
        pickle.dump({"actor_critic": {}}, f)  # protocol 4+: torch warns before it refuses
    with warnings.catch_warnings(record=True) as shown:
        warnings.simplefilter("always")
        with pytest.raises(checkpoint.CheckpointError, match="not a torch file"):
            checkpoint.load_checkpoint(path)
    assert [str(w.message) for w in shown] == []


def test_check_checkpoint_names_the_mismatch():
    ckpt = {"env_name": "CartPole-v1", "obs_shape": [4], "action_space": "Discrete(2)"}
    checkpoint.check_checkpoint(ckpt, "x.pt", "CartPole-v1", (4,), "Discrete(2)")
    with pytest.raises(checkpoint.CheckpointError, match="obs_shape"):
        checkpoint.check_checkpoint(ckpt, "x.pt", "CartPole-v1", (5,), "Discrete(2)")


def test_a_checkpoint_symlinked_to_a_non_checkpoint_names_the_link_and_its_target(tmp_path):
    """Issue #85: the line named the link only, whose file looked like a checkpoint."""
    (tmp_path / "notes.txt").write_text("not a checkpoint")
    for target, why in [(tmp_path / "notes.txt", "corrupt or not a torch file"),
                        (tmp_path, "a directory is there"), (tmp_path / "gone", "no file is there")]:
        link = tmp_path / f"link{len(why)}.pt"
        os.symlink(target, link)
        with pytest.raises(checkpoint.CheckpointError) as e:
            checkpoint.load_checkpoint(str(link))
        assert f"{link} (a symbolic link to {os.path.realpath(target)})" in str(e.value)
        assert str(e.value).endswith(why)
