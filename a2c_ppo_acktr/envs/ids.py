"""An env id: looked up in gymnasium's registry (the ALE ids registered on a miss, a
``module:EnvId`` imported first), a one-line error with suggestions where it names no env.
"""
import difflib
import importlib
import os
import sys

import gymnasium as gym
from gymnasium.envs.registration import EnvSpec

from a2c_ppo_acktr.errors import ConfigError

_ale_registered = False


def register_ale() -> None:
    """Register the ALE ids with gymnasium (gymnasium 1.x no longer does it on its own)."""
    global _ale_registered
    if not _ale_registered:
        try:
            import ale_py
        except ImportError:
            return
        gym.register_envs(ale_py)
        _ale_registered = True


def _import_from_here(module: str) -> None:
    """Import ``module``, also from the working directory, as ``python -m`` and ``python -c``
    find it: a script run by path has its own directory on sys.path instead. The working
    directory goes last on sys.path, shadowing nothing; env workers started later inherit it."""
    try:
        importlib.import_module(module)
        return
    except ModuleNotFoundError as e:
        here = os.getcwd()
        if e.name != module.partition(".")[0] or here in [os.path.abspath(p) for p in sys.path]:
            raise
    sys.path.append(here)
    try:
        importlib.import_module(module)
    except ImportError:
        sys.path.remove(here)
        raise


def env_spec(env_id: str) -> EnvSpec:
    """``gym.spec(env_id)``, registering the Atari ids on a miss; a one-line ValueError if unknown.

    ``module:EnvId`` (gymnasium's form) imports ``module`` first, which registers ``EnvId``.
    """
    module, _, env_id = env_id.rpartition(":")
    if module:
        if not all(part.isidentifier() for part in module.split(".")):  # a path, '../x', 'a b'
            raise ConfigError(f"cannot import {module!r}, named in the env id {module}:{env_id}: "
                              "a module is named as in Python's import (my_pkg.envs), not by "
                              "its file's path")
        try:
            _import_from_here(module)
        except ImportError as e:
            raise ConfigError(f"cannot import {module!r}, named in the env id {module}:{env_id} to "
                             f"register it: {e}") from None
    for attempt in range(2):
        try:
            return gym.spec(env_id)
        except gym.error.Error:
            if attempt == 0:
                register_ale()  # ale_py is imported only when the id is not a stock one
    close = difflib.get_close_matches(env_id, list(gym.registry), n=3, cutoff=0.6)
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    raise ConfigError(f"unknown env id {env_id!r}{hint}")


def check_env_id(env_id: str) -> None:
    """ValueError (one line, with suggestions) unless ``env_id`` names a registered env."""
    env_spec(env_id)


def is_atari(spec: EnvSpec) -> bool:
    """Whether ``spec`` is an ALE (Atari) id, in either style (``PongNoFrameskip-v4``, ``ALE/...``)."""
    return "ale_py" in str(spec.entry_point)


def is_mujoco(spec: EnvSpec) -> bool:
    """Whether ``spec`` is one of gymnasium's MuJoCo envs."""
    return isinstance(spec.entry_point, str) and spec.entry_point.startswith("gymnasium.envs.mujoco")


def env_file_name(env_name: str) -> str:
    """The env id as a file name (checkpoints, expert files, plots): '/' (namespaced ids such as
    ALE/Pong-v5) becomes '_'; of gymnasium's ``module:EnvId`` form only the id counts."""
    return env_name.rpartition(":")[2].replace("/", "_")
