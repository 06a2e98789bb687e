"""A policy saved by ``main.py``, played back: its checkpoint found and checked, its env rebuilt,
the policy loaded. Shared by ``enjoy.py`` and ``gail_experts/generate.py``.

Bad input raises ``CheckpointError`` or ``ConfigError`` with one line, for the caller to show.
"""
import argparse
import contextlib
import tempfile
from collections.abc import Iterator

import gymnasium as gym

from a2c_ppo_acktr.algo import ALGOS
from a2c_ppo_acktr.envs import TorchVecEnv, make_vec_envs
from a2c_ppo_acktr.errors import ConfigError
from a2c_ppo_acktr.run import checkpoint


def add_checkpoint_args(p: argparse.ArgumentParser) -> None:
    """The flags that find a checkpoint of main.py (``load``)."""
    p.add_argument("--env-name", default=None,
                   help="gymnasium id (default: the checkpoint's, when --load-dir is a file)")
    p.add_argument("--load-dir", default="./trained_models/",
                   help="the --save-dir of main.py, one of its <algo> directories, or a .pt "
                   "checkpoint file")
    p.add_argument("--algo", default=None, metavar="{" + ",".join(ALGOS) + "}",
                   help="the algorithm whose checkpoint to load (default: the one with one)")
    p.add_argument("--train-seed", type=int, default=None, metavar="S",
                   help="the --seed of the training run to load (default: the newest "
                   "checkpoint's)")


def load(args: argparse.Namespace) -> tuple[str, dict]:
    """The checkpoint that --load-dir, --env-name, --algo and --train-seed designate: its path
    and contents; ``args.env_name`` defaults to its env."""
    path = checkpoint.find_checkpoint(args.load_dir, args.env_name, args.algo, args.train_seed)
    ckpt = checkpoint.load_policy_checkpoint(path, args.env_name)
    args.env_name = args.env_name or ckpt["env_name"]
    steps = ckpt.get("env_steps")
    seeds = checkpoint.train_seeds(path) if path != args.load_dir and args.train_seed is None else []
    print(f"loaded {path}" + (f" ({ckpt.get('algo')}, {steps:,} steps)" if steps else "")
          + (f"; the newest of --train-seed {', '.join(map(str, seeds))}" if len(seeds) > 1 else ""))
    return path, ckpt


@contextlib.contextmanager
def play_envs(args: argparse.Namespace, ckpt: dict,
              render_mode: str | None = None) -> Iterator[TorchVecEnv]:
    """One env in this process, built as the run built its envs (the checkpoint's env kwargs),
    seeded ``args.seed + 1000``; closed on exit."""
    with tempfile.TemporaryDirectory() as log_dir:  # for the Monitor: raw returns in infos
        try:
            envs = make_vec_envs(args.env_name, args.seed + 1000, 1, None, log_dir, "cpu", False,
                                 vec_env="dummy", render_mode=render_mode,
                                 **checkpoint.env_options(ckpt))
        except (ValueError, gym.error.DependencyNotInstalled) as e:
            raise ConfigError(str(e)) from None
        try:
            yield envs
        finally:
            envs.close()
