"""The vector-env contract, the base of the vector wrappers and of the envs that step a whole batch.

A vector env of N envs has ``num_envs``, ``observation_space`` and ``action_space`` (of one env)
and ``reset() -> obs (N, *obs_shape)``, ``step(actions) -> obs, rewards (N,) f32, terminated (N,),
truncated (N,), infos`` (numpy), ``pause()``, ``benchmarks()``, ``render()``, ``close()``.
``infos[i]["episode"] = {"r", "l", "t"}`` (raw return, length, time) where env i's episode ended,
as SB3's ``Monitor`` sets it.

Optional grouping: an env with ``num_groups`` G > 1 (default 1) also steps its envs in G blocks,
``send(actions, g)`` starting block g's step and ``recv(g)`` returning its results (the rows of
``group_slice(g)``), so that a collector can act on one block while another steps.

Autoreset is *same-step*: when env i terminates or truncates, its real last observation goes to
``infos[i]["final_obs"]``, the env is reset at once and the returned ``obs[i]`` is the first
observation of the next episode, so no transition straddles two episodes.

Optional capabilities of an env (looked up on ``env.unwrapped``, so that this layer needs no
knowledge of real-time envs): ``pause()`` holds it still until its next step, and
``benchmarks()`` returns a dict of its timing statistics. Envs without them are left alone.
"""
import os
from typing import Generic, NoReturn, Protocol, TypeVar

import gymnasium as gym
import numpy as np

from a2c_ppo_acktr.errors import ConfigError

# What ``step`` / ``recv`` of a numpy vector env return: obs (N, *obs_shape), rewards (N,) f32,
# terminated (N,) bool, truncated (N,) bool, infos (N dicts).
StepResult = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, list[dict]]


class VecEnvBase(Protocol):
    """What every vector env has, numpy or torch: the part of the contract a wrapper passes on."""

    num_envs: int
    observation_space: gym.Space
    action_space: gym.Space

    def pause(self) -> None: ...

    def benchmarks(self) -> list[dict | None]: ...

    def render(self) -> np.ndarray | None: ...

    def close(self) -> None: ...


class VecEnv(VecEnvBase, Protocol):
    """The vector-env contract above, for type checkers (``DummyVecEnv``, ``ShmemVecEnv``,
    ``AleVecEnv``, ``NativeVecEnv`` and the numpy wrappers meet it; nothing subclasses it)."""

    def reset(self) -> np.ndarray: ...

    def step(self, actions: np.ndarray) -> StepResult: ...


class GroupedVecEnv(VecEnv, Protocol):
    """A vector env that also steps its envs in ``num_groups`` blocks (``AleVecEnv``)."""

    num_groups: int

    def send(self, actions: np.ndarray, group: int = 0) -> None: ...

    def recv(self, group: int = 0) -> StepResult: ...

    def group_slice(self, group: int) -> slice: ...


class BatchedVecEnv:
    """Base of the vector envs that step their whole batch in one call (``AleVecEnv``,
    ``NativeVecEnv``) rather than gym envs one by one: none is real-time, none renders."""

    kind = ""  # its --vec-env name
    num_envs = 0

    def pause(self) -> None:
        """Not a real-time env: nothing to hold still."""

    def benchmarks(self) -> list[dict | None]:
        return [None] * self.num_envs

    def render(self) -> NoReturn:
        raise ConfigError(f"--vec-env {self.kind} does not render; enjoy.py uses --vec-env dummy")


V = TypeVar("V", bound=VecEnvBase)


class VecEnvWrapper(Generic[V]):
    """Base of the wrappers below: what a wrapper does not change goes to ``self.venv`` (a ``V``).

    A wrapper hides its env's groups (``num_groups`` 1) unless it steps them itself.
    """

    num_groups = 1

    def __init__(self, venv: V) -> None:
        self.venv = venv
        self.num_envs: int = venv.num_envs
        self.observation_space: gym.Space = venv.observation_space
        self.action_space: gym.Space = venv.action_space

    def pause(self) -> None:
        """Real-time envs hold still (default action, clock stopped) until the next step."""
        self.venv.pause()

    def benchmarks(self) -> list[dict | None]:
        """Per env: its timing statistics (``RealTimeEnv.benchmarks()``) or None (not real-time)."""
        return self.venv.benchmarks()

    def render(self) -> np.ndarray | None:
        return self.venv.render()

    def close(self) -> None:
        self.venv.close()


def num_cpus() -> int:
    """CPUs this process may run on (the affinity mask, which os.cpu_count() ignores)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def space_shape(space: gym.Space) -> tuple[int, ...]:
    """``space.shape``, which gymnasium types as Optional: None only for spaces of no fixed shape
    (Graph, Sequence), which no env here has (Discrete observations are one-hot Boxes)."""
    assert space.shape is not None, f"{space} has no fixed shape"
    return space.shape
