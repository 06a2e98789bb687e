"""End to end: main.py trains, is deterministic on CPU, saves loadable checkpoints, and learns."""
import csv
import glob
import os

import numpy as np
import pytest
import torch

import main
from a2c_ppo_acktr.envs import make_vec_envs
from a2c_ppo_acktr.model import Policy
from a2c_ppo_acktr.utils import load_checkpoint

# The README's CartPole command (the learning test uses it as written there).
CARTPOLE_PPO = ["--algo", "ppo", "--env-name", "CartPole-v1", "--num-processes", "8",
                "--num-steps", "32", "--num-mini-batch", "1", "--ppo-epoch", "20", "--use-gae",
                "--gae-lambda", "0.8", "--entropy-coef", "0", "--lr", "1e-3",
                "--use-linear-lr-decay", "--use-proper-time-limits", "--num-env-steps", "100000"]


def run(tmp_path, extra, name="run"):
    log_dir, save_dir = str(tmp_path / name / "logs"), str(tmp_path / name / "models")
    assert main.main(extra + ["--log-dir", log_dir, "--save-dir", save_dir]) == 0
    return log_dir, save_dir


def monitor_returns(log_dir):
    """Episode returns of all monitor files, in order of finishing time."""
    rows = []
    for path in glob.glob(os.path.join(log_dir, "*.monitor.csv")):
        with open(path) as f:
            f.readline()
            rows += [(float(r["t"]), float(r["r"])) for r in csv.DictReader(f)]
    return [r for _, r in sorted(rows)]


SHORT = ["--env-name", "CartPole-v1", "--num-processes", "2", "--num-steps", "8",
         "--num-env-steps", "160", "--log-interval", "5", "--vec-env", "dummy"]


@pytest.mark.parametrize("algo", ["a2c", "ppo"])
def test_same_seed_same_run(tmp_path, algo):
    extra = SHORT + ["--algo", algo, "--num-mini-batch", "2", "--use-gae", "--use-proper-time-limits"]
    _, save_a = run(tmp_path, extra, "a")
    _, save_b = run(tmp_path, extra, "b")
    a = load_checkpoint(os.path.join(save_a, algo, "CartPole-v1.pt"))
    b = load_checkpoint(os.path.join(save_b, algo, "CartPole-v1.pt"))
    for key in a["actor_critic"]:
        assert torch.equal(a["actor_critic"][key], b["actor_critic"][key]), key


def test_scalar_log_and_checkpoint_contents(tmp_path):
    log_dir, save_dir = run(tmp_path, SHORT + ["--algo", "ppo", "--num-mini-batch", "2"])
    with open(os.path.join(log_dir, "progress.csv")) as f:
        rows = list(csv.DictReader(f))
    assert rows and {"timesteps", "fps", "mean_return", "value_loss", "approx_kl",
                     "clip_fraction", "entropy"} <= set(rows[0])
    assert int(rows[-1]["timesteps"]) == 160
    ckpt = load_checkpoint(os.path.join(save_dir, "ppo", "CartPole-v1.pt"))
    assert ckpt["env_steps"] == 160 and ckpt["obs_rms"] is not None


def test_saved_policy_acts_identically_after_load(tmp_path):
    _, save_dir = run(tmp_path, SHORT + ["--algo", "a2c", "--recurrent-policy"])
    ckpt = load_checkpoint(os.path.join(save_dir, "a2c", "CartPole-v1.pt"))
    envs = make_vec_envs("CartPole-v1", 0, 1, None, None, "cpu", True, vec_env="dummy")
    original = Policy(envs.observation_space.shape, envs.action_space, base_kwargs={"recurrent": True})
    original.load_state_dict(ckpt["actor_critic"])
    path = str(tmp_path / "copy.pt")
    torch.save(original.state_dict(), path)
    copy = Policy(envs.observation_space.shape, envs.action_space, base_kwargs={"recurrent": True})
    copy.load_state_dict(torch.load(path, weights_only=True))
    obs = torch.randn(5, *envs.observation_space.shape)
    hxs = torch.randn(5, original.recurrent_hidden_state_size)
    masks = torch.ones(5, 1)
    for deterministic in (True, False):
        torch.manual_seed(3)
        out_a = original.act(obs, hxs, masks, deterministic)
        torch.manual_seed(3)
        out_b = copy.act(obs, hxs, masks, deterministic)
        for x, y in zip(out_a, out_b):
            assert torch.equal(x, y)
    envs.close()


def test_bad_arguments_exit_with_one_line(tmp_path, capsys):
    for bad, needle in [(["--algo", "dqn"], "--algo 'dqn'"),
                        (["--num-processes", "0"], "--num-processes"),
                        (["--algo", "ppo", "--num-processes", "3", "--num-steps", "5",
                          "--num-mini-batch", "4"], "multiple of --num-mini-batch"),
                        (["--vec-env", "threads"], "--vec-env 'threads'")]:
        with pytest.raises(SystemExit) as exc:
            main.main(bad + ["--log-dir", str(tmp_path / "l"), "--save-dir", str(tmp_path / "s")])
        assert exc.value.code == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and needle in err, err


@pytest.mark.slow
def test_ppo_solves_cartpole(tmp_path):
    """The README's command: mean of the last 20 episodes >= 475 within 100k env steps."""
    log_dir, _ = run(tmp_path, CARTPOLE_PPO + ["--seed", "1", "--log-interval", "50"])
    returns = monitor_returns(log_dir)
    assert np.mean(returns[-20:]) >= 475, returns[-20:]
