"""Convert expert trajectories in the openai/imitation h5 layout to a GAIL expert file.

Usage::

    python gail_experts/convert_to_pytorch.py --h5-file trajs_halfcheetah.h5 --env-name HalfCheetah-v5
                                              [--out-dir gail_experts]

The h5 file holds ``obs_B_T_Do`` (B trajectories, T steps, observation dim Do), ``a_B_T_Da``,
``r_B_T`` and ``len_B``. The env is built once to check that the dimensions fit it and to record
its spaces; the output is ``<out-dir>/trajs_<env-name>.pt`` in the layout of
``a2c_ppo_acktr/algo/gail.py`` (discrete actions become int64 (B, T, 1)), written atomically.
Needs h5py (``pip install h5py`` or ``pip install -e .[gail]``).
"""
import argparse
import os
import sys

import numpy as np
import torch
from gymnasium import spaces

from a2c_ppo_acktr.algo.gail import save_expert_file
from a2c_ppo_acktr.envs import make_vec_envs
from a2c_ppo_acktr.errors import fail

H5_KEYS = ("obs_B_T_Do", "a_B_T_Da", "r_B_T", "len_B")


def _fail(message):
    fail(message, prog="convert_to_pytorch.py")


def get_args(argv=None):
    p = argparse.ArgumentParser(allow_abbrev=False, description="openai/imitation h5 -> GAIL expert file")
    p.add_argument("--h5-file", required=True, help="the h5 file to convert")
    p.add_argument("--env-name", required=True, help="gymnasium id the trajectories were made in")
    p.add_argument("--out-dir", default="./gail_experts",
                   help="where trajs_<env-name>.pt goes (default: ./gail_experts)")
    return p.parse_args(argv)


def read_h5(path):
    """The four arrays of the h5 file as numpy, keyed as in the file."""
    try:
        import h5py
    except ImportError:
        _fail("reading h5 files needs h5py: pip install h5py (or pip install -e .[gail])")
    if not os.path.isfile(path):
        _fail(f"no h5 file at {path}")
    try:
        with h5py.File(path, "r") as f:
            missing = [k for k in H5_KEYS if k not in f]
            if missing:
                _fail(f"{path} lacks {', '.join(missing)}; expected the openai/imitation layout "
                      f"({', '.join(H5_KEYS)})")
            return {k: np.asarray(f[k][...]) for k in H5_KEYS}
    except OSError as e:
        _fail(f"cannot read {path} as h5: {str(e).splitlines()[0]}")


def convert(arrays, env_name, observation_space, action_space, path="the h5 file"):
    """Check the arrays against the spaces and pack them as an expert file dict."""
    obs, act, rew, lengths = (arrays[k] for k in H5_KEYS)
    num, horizon = obs.shape[:2]
    if obs.shape[2:] != tuple(observation_space.shape):
        _fail(f"{path}: observations of shape {obs.shape[2:]} do not fit {env_name}'s "
              f"{tuple(observation_space.shape)}")
    discrete = isinstance(action_space, spaces.Discrete)
    want_act = (1,) if discrete else tuple(action_space.shape)
    if act.ndim == 2:  # (B, T): one scalar action per step
        act = act[..., None]
    if act.shape != (num, horizon, *want_act):
        _fail(f"{path}: actions of shape {act.shape} do not fit {env_name}'s {action_space} "
              f"(expected {(num, horizon, *want_act)})")
    if rew.shape != (num, horizon) or lengths.shape != (num,):
        _fail(f"{path}: r_B_T {rew.shape} and len_B {lengths.shape} do not match obs_B_T_Do "
              f"{obs.shape}")
    if lengths.min() < 1 or lengths.max() > horizon:
        _fail(f"{path}: len_B must lie in [1, {horizon}], got {lengths.min()}..{lengths.max()}")
    return {"states": torch.from_numpy(obs).float(),
            "actions": torch.from_numpy(np.rint(act) if discrete else act).to(
                torch.int64 if discrete else torch.float32),
            "rewards": torch.from_numpy(rew).float(),
            "lengths": torch.from_numpy(lengths).long(),
            "env_name": env_name, "obs_shape": list(observation_space.shape),
            "action_space": str(action_space)}


def main(argv=None):
    args = get_args(argv)
    arrays = read_h5(args.h5_file)
    try:
        envs = make_vec_envs(args.env_name, 0, 1, None, None, "cpu", True, vec_env="dummy")
    except ValueError as e:
        _fail(str(e))
    observation_space, action_space = envs.observation_space, envs.action_space
    envs.close()
    data = convert(arrays, args.env_name, observation_space, action_space, args.h5_file)
    print(save_expert_file(data, args.out_dir))
    return 0


if __name__ == "__main__":
    sys.exit(main())
