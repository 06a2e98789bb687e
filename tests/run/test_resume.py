"""Exact resume (a2c_ppo_acktr/run/resume.py): a run stopped after some updates and resumed ends
as the same run uninterrupted: weights, optimizer, normalizer and every logged episode and row.
Where the run cannot resume exactly it says so in one line and goes on."""
import csv
import glob
import os

import pytest
import torch

import main
from a2c_ppo_acktr.analysis.episodes import read_monitor_file
from a2c_ppo_acktr.envs.envpool import envpool_available
from a2c_ppo_acktr.run.checkpoint import load_checkpoint, run_paths
from a2c_ppo_acktr.settings.arguments import get_args

CARTPOLE = ["--algo", "ppo", "--env-name", "CartPole-v1", "--num-processes", "4", "--num-steps",
            "16", "--num-mini-batch", "2", "--ppo-epoch", "2", "--use-gae",
            "--use-proper-time-limits", "--log-interval", "1"]
# Episodes of 40 steps: some are cut at the stop (the TimeLimit and Monitor counters carry over).
CHEETAH = ["--algo", "ppo", "--env-name", "HalfCheetah-v5", "--num-processes", "2", "--num-steps",
           "32", "--num-mini-batch", "2", "--ppo-epoch", "2", "--use-gae",
           "--use-proper-time-limits", "--log-interval", "1", "--env-kwargs", "max_episode_steps=40"]
WALL_CLOCK = {"fps", "time"}  # progress columns that measure time, not the run


def train(tmp_path, name, argv, steps, resume=False):
    argv = argv + ["--num-env-steps", str(steps), "--log-dir", str(tmp_path / name / "logs"),
                   "--save-dir", str(tmp_path / name / "models")] + (["--resume"] if resume else [])
    assert main.main(argv) == 0
    return run_paths(get_args(argv))


def episodes(log_dir):
    """Per monitor file: its (return, length) rows (the wall-clock column left out)."""
    return [list(zip(*read_monitor_file(path)[1:3]))
            for path in sorted(glob.glob(os.path.join(log_dir, "*.monitor.csv")))]


def progress(log_dir):
    with open(os.path.join(log_dir, "progress.csv")) as f:
        return [{k: v for k, v in row.items() if k not in WALL_CLOCK} for row in csv.DictReader(f)]


def assert_same_state(a, b, where=""):
    """Two states (nested dicts and lists of tensors and plain values) equal, bit for bit."""
    if isinstance(a, dict):
        assert isinstance(b, dict) and a.keys() == b.keys(), where
        for k in a:
            assert_same_state(a[k], b[k], f"{where}/{k}")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            assert_same_state(x, y, f"{where}/{i}")
    elif torch.is_tensor(a):
        assert torch.equal(a, b), where
    else:
        assert a == b, where


def assert_same_run(straight, resumed, components=("agent",)):
    """The same weights (0.0 apart), ``components``' states, normalizer, episodes and log."""
    a, b = load_checkpoint(straight.checkpoint), load_checkpoint(resumed.checkpoint)
    assert a["env_steps"] == b["env_steps"]
    diff = max((a["actor_critic"][k] - b["actor_critic"][k]).abs().max().item()
               for k in a["actor_critic"])
    assert diff == 0.0
    for name in components:
        assert_same_state(a[name], b[name], name)
    assert_same_state(a["obs_rms"], b["obs_rms"], "obs_rms")
    ends = episodes(straight.log_dir)
    assert sum(map(len, ends)) > 0 and episodes(resumed.log_dir) == ends
    assert progress(resumed.log_dir) == progress(straight.log_dir)


@pytest.mark.parametrize("argv, half, full", [(CARTPOLE, 256, 512), (CHEETAH, 128, 256)],
                         ids=["CartPole", "HalfCheetah"])
@pytest.mark.slow
@pytest.mark.parametrize("vec_env", [pytest.param("dummy", marks=pytest.mark.research), "shmem",
                                     "threads"])
def test_stopped_and_resumed_run_is_the_uninterrupted_run(tmp_path, capsys, argv, half, full,
                                                          vec_env):
    argv = argv + ["--vec-env", vec_env]
    straight = train(tmp_path, "straight", argv, full)
    train(tmp_path, "resumed", argv, half)
    capsys.readouterr()
    resumed = train(tmp_path, "resumed", argv, full, resume=True)
    assert "approximately" not in capsys.readouterr().err
    assert_same_run(straight, resumed)


@pytest.mark.slow
def test_native_cartpole_resumes_exactly(tmp_path):
    argv = CARTPOLE + ["--vec-env", "native"]
    straight = train(tmp_path, "straight", argv, 256)
    train(tmp_path, "resumed", argv, 128)
    assert_same_run(straight, train(tmp_path, "resumed", argv, 256, resume=True))


@pytest.mark.parametrize("extra, reason", [
    (["--env-name", "PongNoFrameskip-v4", "--vec-env", "ale"],
     "--vec-env ale: ale-py's AtariVectorEnv cannot save or restore its games"),
    (["--env-name", "CartPole-v1", "--vec-env", "dummy", "--async-rollouts"],
     "--async-rollouts: the sampler thread's envs are a rollout ahead of the saved weights"),
    pytest.param(["--env-name", "Hopper-v5", "--vec-env", "envpool"],
                 "--vec-env envpool: EnvPool cannot save or restore its envs",
                 marks=pytest.mark.skipif(not envpool_available(), reason="no envpool")),
], ids=["ale", "async", "envpool"])
@pytest.mark.slow
def test_a_run_that_cannot_resume_exactly_says_so_in_one_line(tmp_path, capsys, extra, reason):
    argv = ["--algo", "a2c", "--num-processes", "2", "--num-steps", "8"] + extra
    train(tmp_path, "run", argv, 32)
    capsys.readouterr()
    paths = train(tmp_path, "run", argv, 64, resume=True)
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1
    assert err.endswith(f": warning: --resume continues approximately, from new episodes: {reason}\n")
    assert load_checkpoint(paths.checkpoint)["env_steps"] == 64


@pytest.mark.slow
def test_an_approximate_resume_keeps_the_recent_returns(tmp_path, capsys):
    """New episodes, but the log's mean of the last 10 goes on over the saved ones' returns
    rather than starting again from the first episode to end."""
    cartpole = ["--algo", "a2c", "--num-processes", "2", "--num-steps", "8", "--log-interval", "1",
                "--env-name", "CartPole-v1", "--vec-env", "dummy", "--async-rollouts"]
    paths = train(tmp_path, "cartpole", cartpole, 256)
    saved = load_checkpoint(paths.checkpoint)["exact"]
    assert "inexact" in saved and len(saved["episode_returns"]) == 10
    assert float(progress(paths.log_dir)[-1]["mean_return"]) == pytest.approx(
        sum(saved["episode_returns"]) / 10, abs=0.05)

    pong = ["--algo", "a2c", "--num-processes", "2", "--num-steps", "8", "--log-interval", "1",
            "--env-name", "PongNoFrameskip-v4", "--vec-env", "ale"]
    paths = train(tmp_path, "pong", pong, 32)
    ckpt = load_checkpoint(paths.checkpoint)
    ckpt["exact"]["episode_returns"] = [-21.0, -20.0]  # as if two games had ended
    torch.save(ckpt, paths.checkpoint)
    train(tmp_path, "pong", pong, 64, resume=True)
    assert "approximately" in capsys.readouterr().err
    resumed = [row for row in progress(paths.log_dir) if int(row["timesteps"]) > 32]
    assert resumed and all(row["mean_return"] == "-20.5" for row in resumed)  # no game ends in 32


def test_checkpoint_without_env_state_resumes_approximately(tmp_path, capsys):
    """A checkpoint saved before exact resume existed (no ``exact`` entry) still resumes."""
    argv = CARTPOLE + ["--vec-env", "dummy"]
    paths = train(tmp_path, "run", argv, 64)
    ckpt = load_checkpoint(paths.checkpoint)
    del ckpt["exact"]
    torch.save(ckpt, paths.checkpoint)
    capsys.readouterr()
    train(tmp_path, "run", argv, 128, resume=True)
    assert "approximately, from new episodes: the checkpoint holds no env state" in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.research
def test_value_norm_and_recomputed_advantages_resume_exactly(tmp_path):
    """The returns' statistics are buffers of the policy: saved, restored, the same run."""
    argv = CARTPOLE + ["--vec-env", "native", "--value-norm", "--recompute-advantages"]
    straight = train(tmp_path, "straight", argv, 256)
    train(tmp_path, "resumed", argv, 128)
    resumed = train(tmp_path, "resumed", argv, 256, resume=True)
    assert_same_run(straight, resumed)
    weights = load_checkpoint(resumed.checkpoint)["actor_critic"]
    assert weights["value_norm.count"].item() > 256 and weights["value_norm.scale"].item() != 1.0
