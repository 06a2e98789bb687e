"""Environments: construction, vectorization, normalization and torch conversion.

Layers, innermost first (``make_vec_envs`` builds the whole stack)::

    single.make_env          gym env + Monitor (+ DeepMind Atari wrappers, CHW images, seeding)
    blocks.DummyVecEnv /     numpy batch of N envs with same-step autoreset (classic stack):
    threads.ThreadVecEnv /   here, in a thread per CPU, in worker processes
    shmem.ShmemVecEnv
    ale.AleVecEnv            or: Atari in ALE's C++ vector env, frames stacked there
    native.NativeVecEnv      or: an id's own vector entry point (CartPole)
    envpool.EnvpoolVecEnv    or: MuJoCo ids in EnvPool's C++ envs (the .[envpool] extra)
    normalize.VecNormalize   running obs / discounted-return normalization (vector obs only),
                             the statistics in its base ``Normalizer``
    torch_vec.VecPyTorch     numpy <-> torch on ``device``
    torch_vec.VecPyTorchFrameStack   frame stacking on ``device`` (images, or when asked; not ale)
"""
from a2c_ppo_acktr.envs.ale import AleVecEnv
from a2c_ppo_acktr.envs.blocks import DummyVecEnv
from a2c_ppo_acktr.envs.envpool import EnvpoolVecEnv
from a2c_ppo_acktr.envs.make import VEC_ENV_KINDS, frame_channels, make_vec_envs
from a2c_ppo_acktr.envs.native import NativeVecEnv
from a2c_ppo_acktr.envs.normalize import (
    Normalizer,
    RunningMeanStd,
    VecNormalize,
    get_vec_normalize,
    merge_normalizer,
    normalizer_delta,
    normalizer_state,
)
from a2c_ppo_acktr.envs.shmem import ShmemVecEnv
from a2c_ppo_acktr.envs.single import check_env_kwargs, make_env
from a2c_ppo_acktr.envs.threads import ThreadVecEnv
from a2c_ppo_acktr.envs.torch_vec import TorchVecEnv, VecPyTorch, VecPyTorchFrameStack, to_device
from a2c_ppo_acktr.envs.vec_env import VecEnv, VecEnvWrapper

__all__ = [
    "VEC_ENV_KINDS", "AleVecEnv", "DummyVecEnv", "EnvpoolVecEnv", "NativeVecEnv", "Normalizer",
    "RunningMeanStd", "ShmemVecEnv", "ThreadVecEnv", "TorchVecEnv",
    "VecEnv", "VecEnvWrapper", "VecNormalize", "VecPyTorch", "VecPyTorchFrameStack",
    "check_env_kwargs", "frame_channels", "get_vec_normalize", "make_env", "make_vec_envs",
    "merge_normalizer", "normalizer_delta", "normalizer_state", "to_device",
]
