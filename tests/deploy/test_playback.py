"""deploy/playback.py: the checkpoint that enjoy.py's / generate.py's flags designate, and its env
rebuilt as the run built it."""
import argparse
import os

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium import spaces

from a2c_ppo_acktr.config import PolicyConfig
from a2c_ppo_acktr.deploy.playback import add_checkpoint_args, load, play_envs
from a2c_ppo_acktr.errors import CheckpointError, ConfigError
from a2c_ppo_acktr.model import Policy, policy_kwargs
from a2c_ppo_acktr.run.checkpoint import save_checkpoint

ENV = "CartPole-v1"


def checkpoint(path, seed, env_kwargs=None, env_steps=1234):
    """A checkpoint in main.py's format (an untrained policy) at ``path``."""
    policy = Policy((4,), spaces.Discrete(2))
    path.parent.mkdir(parents=True, exist_ok=True)
    save_checkpoint({"actor_critic": policy.state_dict(), "optimizer": {}, "obs_rms": None,
                     "env_steps": env_steps, "env_name": ENV, "env_kwargs": env_kwargs,
                     "algo": path.parent.name, "seed": seed, "obs_shape": [4],
                     "action_space": str(spaces.Discrete(2)), "recurrent_policy": False,
                     "policy_kwargs": policy_kwargs(PolicyConfig(False, None, None))}, str(path))
    return str(path)


def parse(*argv):
    p = argparse.ArgumentParser()
    add_checkpoint_args(p)
    p.add_argument("--seed", type=int, default=1)
    return p.parse_args(list(argv))


def test_a_file_gives_its_env_and_a_directory_is_narrowed_by_the_flags(tmp_path, capsys):
    first = checkpoint(tmp_path / "ppo" / f"{ENV}_seed1.pt", 1)
    checkpoint(tmp_path / "ppo" / f"{ENV}_seed2.pt", 2)
    args = parse("--load-dir", first)
    path, ckpt = load(args)
    assert path == first and ckpt["seed"] == 1 and args.env_name == ENV  # from the checkpoint
    assert capsys.readouterr().out == f"loaded {first} (ppo, 1,234 steps)\n"

    path, ckpt = load(parse("--load-dir", str(tmp_path), "--env-name", ENV, "--train-seed", "2"))
    assert path.endswith(f"{ENV}_seed2.pt") and ckpt["seed"] == 2
    capsys.readouterr()
    os.utime(first, (2e9, 2e9))  # seed 1's the newest: of several seeds, it is the one played
    path, _ = load(parse("--load-dir", str(tmp_path), "--env-name", ENV))
    assert path == first and capsys.readouterr().out.endswith(
        "; the newest of --train-seed 1, 2\n")
    checkpoint(tmp_path / "a2c" / f"{ENV}_seed1.pt", 1)  # another algo: which one is asked
    with pytest.raises(CheckpointError, match="several checkpoints for CartPole-v1"):
        load(parse("--load-dir", str(tmp_path), "--env-name", ENV))
    with pytest.raises(CheckpointError, match="holds a policy for CartPole-v1, not for"):
        load(parse("--load-dir", first, "--env-name", "Acrobot-v1"))


def test_play_envs_rebuilds_the_runs_env_seeded_past_training(tmp_path):
    path = checkpoint(tmp_path / "a2c" / f"{ENV}_seed1.pt", 1, env_kwargs={"max_episode_steps": 5})
    args = parse("--load-dir", path, "--seed", "7")
    _, ckpt = load(args)
    with play_envs(args, ckpt) as envs:
        assert envs.num_envs == 1
        envs.reset()
        env = envs.venv.venv.envs[0]  # VecPyTorch(VecNormalize(DummyVecEnv)): the gym env
        expected, _ = gym.make(ENV).reset(seed=7 + 1000)
        np.testing.assert_array_equal(np.float32(env.unwrapped.state), expected)
        lengths = []
        for _ in range(12):  # the checkpoint's env kwargs: episodes of at most 5 steps
            *_, infos = envs.step(torch.zeros(1, 1, dtype=torch.long))
            lengths += [info["episode"]["l"] for info in infos if "episode" in info]
        assert lengths and max(lengths) <= 5


def test_env_kwargs_the_env_rejects_are_one_config_error(tmp_path):
    path = checkpoint(tmp_path / "ppo" / f"{ENV}_seed1.pt", 1, env_kwargs={"gravity_x": 3})
    args = parse("--load-dir", path)
    _, ckpt = load(args)
    with pytest.raises(ConfigError, match="gravity_x") as exc:
        with play_envs(args, ckpt):
            pass
    assert "\n" not in str(exc.value)
