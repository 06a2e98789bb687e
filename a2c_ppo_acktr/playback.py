"""A policy saved by ``main.py``, played back: its checkpoint found and checked, its env rebuilt,
the policy loaded. Shared by ``enjoy.py`` and ``gail_experts/generate.py``.

Bad input is one line on stderr and exit status 2 (``arguments.fail``), under the caller's
program name ``prog``.
"""
import argparse
import contextlib
import glob
import os
import tempfile
from collections.abc import Iterator

import gymnasium as gym

from a2c_ppo_acktr.arguments import fail
from a2c_ppo_acktr.envs import VecEnvWrapper, make_vec_envs
from a2c_ppo_acktr.evaluation import freeze_normalization
from a2c_ppo_acktr.model import Policy
from a2c_ppo_acktr.utils import CheckpointError, check_checkpoint, load_checkpoint

CHECKPOINT_KEYS = ("actor_critic", "obs_rms", "env_name", "obs_shape", "recurrent_policy")


def add_checkpoint_args(p: argparse.ArgumentParser) -> None:
    """The flags that find a checkpoint of main.py (``checkpoint_path``)."""
    p.add_argument("--env-name", default=None,
                   help="gymnasium id (default: the checkpoint's, when --load-dir is a file)")
    p.add_argument("--load-dir", default="./trained_models/",
                   help="the --save-dir of main.py, or a .pt checkpoint file")
    p.add_argument("--algo", default=None,
                   help="a2c | ppo | acktr (default: the one with a checkpoint)")


def checkpoint_path(args: argparse.Namespace, prog: str) -> str:
    """``<load-dir>/<algo>/<env-name>.pt`` (without ``--algo``: the one algorithm directory that
    holds it), or ``--load-dir`` itself when it names a file."""
    if os.path.isfile(args.load_dir) or args.load_dir.endswith(".pt"):
        return args.load_dir
    if args.env_name is None:
        fail("--env-name is needed when --load-dir is a directory", prog)
    name = args.env_name.replace("/", "_") + ".pt"
    if args.algo is not None:
        return os.path.join(args.load_dir, args.algo, name)
    found = sorted(glob.glob(os.path.join(glob.escape(args.load_dir), "*", name)))
    if len(found) > 1:
        fail(f"several checkpoints for {args.env_name}: {', '.join(found)}; choose with --algo",
             prog)
    return found[0] if found else os.path.join(args.load_dir, "<algo>", name)


def load(args: argparse.Namespace, prog: str) -> tuple[str, dict]:
    """-> (path, checkpoint) of main.py for ``args.env_name`` (taken from it when not given)."""
    path = checkpoint_path(args, prog)
    if not os.path.isfile(path):
        fail(f"no checkpoint at {path} (main.py saves <save-dir>/<algo>/<env-name>.pt)", prog)
    try:
        ckpt = load_checkpoint(path)
    except CheckpointError as e:
        fail(f"{e}; expected a state-dict checkpoint saved by main.py", prog)
    if not isinstance(ckpt, dict) or not all(k in ckpt for k in CHECKPOINT_KEYS):
        fail(f"{path} is not a checkpoint saved by main.py "
             f"(expected keys {', '.join(CHECKPOINT_KEYS)})", prog)
    args.env_name = args.env_name or ckpt["env_name"]
    if ckpt["env_name"] != args.env_name:
        fail(f"{path} holds a policy for {ckpt['env_name']}, not for --env-name {args.env_name}",
             prog)
    return path, ckpt


@contextlib.contextmanager
def play_envs(args: argparse.Namespace, ckpt: dict, prog: str,
              render_mode: str | None = None) -> Iterator[VecEnvWrapper]:
    """One env in this process, built as the run built its envs (the checkpoint's env kwargs),
    seeded ``args.seed + 1000``; closed on exit."""
    with tempfile.TemporaryDirectory() as log_dir:  # for the Monitor: raw returns in infos
        try:
            envs = make_vec_envs(args.env_name, args.seed + 1000, 1, None, log_dir, "cpu", False,
                                 vec_env="dummy", render_mode=render_mode,
                                 env_kwargs=ckpt.get("env_kwargs"))  # older files lack them
        except (ValueError, gym.error.DependencyNotInstalled) as e:
            fail(str(e), prog)
        try:
            yield envs
        finally:
            envs.close()


def build_policy(args: argparse.Namespace, ckpt: dict, path: str, envs: VecEnvWrapper,
                 prog: str) -> Policy:
    """The checkpoint's policy, checked against ``envs``, in eval mode; the envs' normalization
    is frozen at the run's statistics."""
    obs_shape, action_space = tuple(envs.observation_space.shape), envs.action_space
    try:
        check_checkpoint(ckpt, path, args.env_name, obs_shape, action_space)
    except CheckpointError as e:
        fail(str(e), prog)
    policy = Policy(obs_shape, action_space, base_kwargs={"recurrent": ckpt["recurrent_policy"]})
    try:
        policy.load_state_dict(ckpt["actor_critic"])
    except RuntimeError as e:  # "Error(s) in loading state_dict for Policy:\n\tsize mismatch ..."
        first = " ".join(str(e).split("\n", 1)[-1].split()).split(". ")[0]
        fail(f"the policy in {path} does not fit {args.env_name} (observations {obs_shape}, "
             f"actions {action_space}): {first}", prog)
    freeze_normalization(envs, ckpt["obs_rms"])
    return policy.eval()
