"""Verified files (issue #72 item 5): a damaged checkpoint is called damaged before anything
trains; damaged log files at --resume are one line; a monitor file always has its header;
--config reads only regular files of reasonable size, and no key twice."""
import os
import struct
import zipfile

import pytest
import torch

import main
from a2c_ppo_acktr.errors import CheckpointError, ConfigError
from a2c_ppo_acktr.run.checkpoint import load_checkpoint
from a2c_ppo_acktr.settings.config_file import read_flags

TINY = ["--algo", "a2c", "--env-name", "CartPole-v1", "--num-processes", "2", "--num-steps", "8",
        "--vec-env", "dummy"]


@pytest.fixture
def trained(tmp_path):
    """A finished run of 32 steps -> (argv, its checkpoint, its log dir)."""
    argv = TINY + ["--log-dir", str(tmp_path / "logs"), "--save-dir", str(tmp_path / "models")]
    assert main.main(argv + ["--num-env-steps", "32"]) == 0
    return (argv, str(tmp_path / "models" / "a2c" / "CartPole-v1_seed1.pt"),
            tmp_path / "logs" / "a2c" / "CartPole-v1_seed1")


def refused(capsys, argv, needle):
    with pytest.raises(SystemExit) as exc:
        main.main(argv)
    err = capsys.readouterr().err
    assert exc.value.code == 2 and len(err.splitlines()) == 1 and needle in err, err
    return err


def snapshot(root):
    return {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}


def flip_byte_in_tensor_data(path):
    with zipfile.ZipFile(path) as z:
        info = next(i for i in z.infolist() if "/data/" in i.filename and i.file_size > 64)
    with open(path, "r+b") as f:  # past the entry's local header: inside a tensor's bytes
        f.seek(info.header_offset + 26)
        name_length, extra_length = struct.unpack("<HH", f.read(4))
        f.seek(info.header_offset + 30 + name_length + extra_length + 40)
        byte = f.read(1)
        f.seek(-1, os.SEEK_CUR)
        f.write(bytes([byte[0] ^ 0x01]))


@pytest.mark.parametrize("damage", ["flipped byte", "random bytes"])
def test_a_damaged_checkpoint_is_called_damaged_before_anything_trains(trained, capsys, damage):
    argv, path, log_dir = trained
    if damage == "flipped byte":  # torch.load itself reads this one without a word
        flip_byte_in_tensor_data(path)
        assert torch.load(path, weights_only=True)["env_steps"] == 32
    else:
        with open(path, "r+b") as f:
            f.seek(os.path.getsize(path) // 2)
            f.write(os.urandom(256))
    before = snapshot(log_dir)
    refused(capsys, argv + ["--resume", "--num-env-steps", "64"],
            f"--resume: checkpoint {path} is damaged: its part ")
    assert snapshot(log_dir) == before


def test_an_exported_policy_is_no_checkpoint(tmp_path):
    class Double(torch.nn.Module):
        def forward(self, x):
            return 2 * x
    path = str(tmp_path / "policy.pt2")
    torch.export.save(torch.export.export(Double(), (torch.zeros(2),)), path)
    with pytest.raises(CheckpointError, match=r"policy.pt2 is an exported policy \(torch.export.load "
                                              r"reads it\), not a checkpoint of main.py"):
        load_checkpoint(path)


@pytest.mark.parametrize("name", ["progress.csv", "0.monitor.csv"])
@pytest.mark.parametrize("damage", [b"\xff\xfe\x00garbage\x81", b"r,l,t\n1.0,2,3.0\n"])
def test_damaged_logs_at_resume_are_one_line_and_left_as_they_are(trained, capsys, name, damage):
    argv, _, log_dir = trained
    if name == "progress.csv" and not damage.startswith(b"\xff"):
        damage = b"no,header,here\n1,2,3\n"
    (log_dir / name).write_bytes(damage)
    before = snapshot(log_dir)
    refused(capsys, argv + ["--resume", "--num-env-steps", "64"],
            f"--resume: {log_dir / name} is damaged: ")
    assert snapshot(log_dir) == before


@pytest.mark.parametrize("name", ["progress.csv", "0.monitor.csv"])
def test_a_text_row_at_resume_is_refused_in_one_line_and_kept(trained, capsys, name):
    """Issue #85 item 4: --resume dropped a row of text from a log file; it is the user's."""
    argv, _, log_dir = trained
    with open(log_dir / name, "a") as f:
        f.write("my note: lr was wrong here\n")
    lines = (log_dir / name).read_text().count("\n")
    before = snapshot(log_dir)
    refused(capsys, argv + ["--resume", "--num-env-steps", "64"],
            f"--resume: {log_dir / name} is damaged: its line {lines} ('my note: lr was wrong "
            "here') is not a row of numbers (remove it); move it away")
    assert snapshot(log_dir) == before


def test_a_monitor_file_gone_at_resume_comes_back_with_its_header(trained, capsys):
    argv, _, log_dir = trained
    os.remove(log_dir / "0.monitor.csv")
    assert main.main(argv + ["--resume", "--num-env-steps", "400"]) == 0
    lines = (log_dir / "0.monitor.csv").read_text().splitlines()
    assert lines[0].startswith('#{"t_start": ') and lines[1] == "r,l,t" and len(lines) > 2


def test_config_refuses_keys_given_twice_devices_and_huge_files(tmp_path):
    twice = tmp_path / "twice.json"
    twice.write_text('{"flags": {"lr": 0.1, "env_name": "CartPole-v1", "lr": 0.2}}')
    with pytest.raises(ConfigError, match=r"twice.json gives 'lr' twice; JSON keeps only the last"):
        read_flags(str(twice), "--config")
    with pytest.raises(ConfigError, match="^--config: /dev/zero is not a regular file$"):
        read_flags("/dev/zero", "--config")
    huge = tmp_path / "huge.json"
    with open(huge, "wb") as f:
        f.truncate(5 << 20)
    with pytest.raises(ConfigError, match=r"huge.json holds 5,242,880 bytes; a file of flags holds "
                                          r"at most 1,048,576"):
        read_flags(str(huge), "--config")
