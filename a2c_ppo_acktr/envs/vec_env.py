"""The vector-env contract, ``DummyVecEnv`` and the base of the vector wrappers.

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
import traceback
from collections.abc import Callable, Sequence
from numbers import Real
from typing import Generic, NoReturn, Protocol, TypeVar, cast

import gymnasium as gym
import numpy as np

from a2c_ppo_acktr.envs.watch import Calling, frame_of
from a2c_ppo_acktr.errors import ConfigError, EnvError, Error
from a2c_ppo_acktr.utils import space_shape

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


def _env_name(env: gym.Env) -> str:
    spec = getattr(env, "spec", None)
    return spec.id if spec is not None else type(getattr(env, "unwrapped", env)).__name__


def _hint(error: Exception) -> str:
    """What a failure's message tells of its cause, where it is a known mistake of an env."""
    text = str(error)
    if isinstance(error, ValueError) and "expected 5, got 4" in text:
        return ("; it returned 4 values, the old gym API (obs, reward, done, info): gymnasium's "
                "step returns obs, reward, terminated, truncated, info")
    if isinstance(error, TypeError) and "NoneType" in text:
        return "; it returned None where a number belongs (a reward must be a number)"
    return ""


def env_failure(env: gym.Env, index: int, method: str, error: Exception) -> EnvError:
    """``error``, raised by env ``index`` in ``method``, as an ``EnvError``: one line, the env's
    traceback (from its ``method`` down, none where it failed in what it returned) beside."""
    if isinstance(error, EnvError):
        return error
    tb = error.__traceback__
    inner = tb.tb_next if tb is not None else None  # below the frame that called the env
    details = "".join(traceback.format_exception(type(error), error, inner)) if inner else ""
    first = (str(error).strip().splitlines() or [""])[0]
    return EnvError(f"env {index} ({_env_name(env)}) failed in {method}: {type(error).__name__}"
                    f"{': ' + first if first else ''}{_hint(error)}"
                    + (" (its traceback above)" if details else ""), details)


# The rewards' usual types, taken without a closer look: the check runs at every env step.
NUMBER_TYPES = frozenset({float, int, np.float64, np.float32, np.int64})


def _is_number(x: object) -> bool:
    if isinstance(x, np.ndarray):
        return x.size == 1 and x.dtype.kind in "biuf"
    return isinstance(x, Real) and not isinstance(x, np.timedelta64)


def check_observation(env: gym.Env, index: int, method: str, o: object, shape: tuple,
                      dtype: np.dtype) -> None:
    """``EnvError`` unless ``o`` has ``shape`` and a dtype that casts to ``dtype`` as numbers
    (float64 to float32, not floats to uint8). Called where the fast check failed: an
    observation numpy would broadcast or cast silently into the batch is refused."""
    try:
        a = np.asarray(o)
    except Exception:  # e.g. ragged lists
        a = np.asarray(o, dtype=object)
    if a.shape == shape and a.dtype != object and np.can_cast(a.dtype, dtype, "same_kind"):
        return
    want = f"shape {shape} {np.dtype(dtype)}"
    raise EnvError(f"env {index} ({_env_name(env)}) returned from {method} an observation of "
                   f"shape {a.shape} {a.dtype}, outside its observation space "
                   f"{env.observation_space}: return {want} observations, or declare the space "
                   "of those it returns")


def check_batch(env_id: str, kind: str, method: str, obs: object, num_envs: int,
                space: gym.Space) -> None:
    """``EnvError`` unless the batch ``obs`` of a vector env that steps all its envs at once
    (``--vec-env kind``) fits ``space``, one env's: as ``check_observation``, per batch."""
    shape, dtype = (num_envs, *space_shape(space)), np.dtype(space.dtype)
    if type(obs) is np.ndarray and obs.shape == shape and obs.dtype == dtype:
        return
    a = np.asarray(obs)
    if a.shape == shape and a.dtype != object and np.can_cast(a.dtype, dtype, "same_kind"):
        return
    raise EnvError(f"{env_id} (--vec-env {kind}) returned from {method} observations of shape "
                   f"{a.shape} {a.dtype} for {num_envs} envs, outside its observation space "
                   f"{space}: expected shape {shape} {np.dtype(dtype)}")


def step_block(envs: Sequence[gym.Env], actions: np.ndarray, obs: np.ndarray, rewards: np.ndarray,
               terminated: np.ndarray, truncated: np.ndarray, first_index: int = 0) -> list[dict]:
    """Step ``envs`` with same-step autoreset, writing row j of each output array; return infos.

    Shared by DummyVecEnv and the ShmemVecEnv workers so both give bit-identical results. An env
    that raises, or returns an observation that does not fit ``obs`` (its space), is an
    ``EnvError`` naming it (index ``first_index + j``).
    """
    infos = []
    shape, dtype = obs.shape[1:], obs.dtype
    for j, env in enumerate(envs):
        method = "step"
        try:
            o, r, term, trunc, info = env.step(actions[j])
            if type(o) is not np.ndarray or o.shape != shape or (o.dtype is not dtype and o.dtype != dtype):
                check_observation(env, first_index + j, method, o, shape, dtype)
            if type(r) not in NUMBER_TYPES and not _is_number(r):  # numpy would store None as NaN
                raise EnvError(f"env {first_index + j} ({_env_name(env)}) returned from step the "
                               f"reward {r!r}: a reward must be a number")
            if term or trunc:
                info["final_obs"] = np.array(o)  # a copy: the env may reuse its buffer
                method = "reset (after its episode ended)"
                o, _ = env.reset()
                if (type(o) is not np.ndarray or o.shape != shape
                        or (o.dtype is not dtype and o.dtype != dtype)):
                    check_observation(env, first_index + j, method, o, shape, dtype)
            obs[j] = o
            rewards[j] = r
            terminated[j] = term
            truncated[j] = trunc
        except Exception as e:
            raise env_failure(env, first_index + j, method, e) from None
        infos.append(info)
    return infos


def pause_block(envs: Sequence[gym.Env]) -> None:
    """Envs that can hold still (the optional ``pause`` capability) do so until the next step."""
    for env in envs:
        pause = getattr(env.unwrapped, "pause", None)
        if pause is not None:
            pause()


def benchmark_block(envs: Sequence[gym.Env]) -> list[dict | None]:
    """The optional ``benchmarks()`` of each env (real-time envs' timing statistics), else None."""
    return [env.unwrapped.benchmarks() if hasattr(env.unwrapped, "benchmarks") else None
            for env in envs]


def reset_block(envs: Sequence[gym.Env], obs: np.ndarray, first_index: int = 0) -> None:
    shape, dtype = obs.shape[1:], obs.dtype
    for j, env in enumerate(envs):
        try:
            o, _ = env.reset()
            if type(o) is not np.ndarray or o.shape != shape or (o.dtype is not dtype and o.dtype != dtype):
                check_observation(env, first_index + j, "reset", o, shape, dtype)
            obs[j] = o
        except Exception as e:
            raise env_failure(env, first_index + j, "reset", e) from None


def build_envs(env_fns: Sequence[Callable[[], gym.Env]], first_index: int = 0) -> list[gym.Env]:
    """The envs of ``env_fns``; one whose constructor raises is an ``EnvError`` naming it (our
    own one-line errors, e.g. an env that cannot render, pass as they are)."""
    envs = []
    for j, fn in enumerate(env_fns):
        try:
            envs.append(fn())
        except Error:
            raise
        except Exception as e:
            tb = e.__traceback__
            details = "".join(traceback.format_exception(type(e), e, tb.tb_next if tb else None))
            first = (str(e).strip().splitlines() or [""])[0]
            for env in envs:
                env.close()
            name = getattr(fn, "env_id", None)
            raise EnvError(f"env {first_index + j}{f' ({name})' if name else ''} failed to build: "
                           f"{type(e).__name__}{': ' + first if first else ''} (its traceback "
                           "above)",
                           details) from None
    return envs


class DummyVecEnv(Calling):
    """Runs N envs one after the other in this process (numpy in, numpy out)."""

    def __init__(self, env_fns: Sequence[Callable[[], gym.Env]]) -> None:
        self.envs = build_envs(env_fns)
        self.num_envs = len(self.envs)
        self.observation_space = self.envs[0].observation_space
        self.action_space = self.envs[0].action_space

    def reset(self) -> np.ndarray:
        """Reset all envs; returns obs (N, *obs_shape)."""
        obs = np.empty((self.num_envs, *space_shape(self.observation_space)), self.observation_space.dtype)
        self._start("reset")
        try:
            reset_block(self.envs, obs)
        finally:
            self._end()
        return obs

    def step(self, actions: np.ndarray) -> StepResult:
        """Returns obs (N, *obs_shape), rewards (N,) f32, terminated (N,), truncated (N,), infos."""
        n = self.num_envs
        # Same cast as the shared action buffer of ShmemVecEnv; a fresh array, as an env may keep it.
        actions = np.array(actions, dtype=self.action_space.dtype).reshape(n, *space_shape(self.action_space))
        obs = np.empty((n, *space_shape(self.observation_space)), self.observation_space.dtype)
        rewards = np.empty(n, np.float32)
        terminated = np.empty(n, bool)
        truncated = np.empty(n, bool)
        self._start("step")
        try:
            infos = step_block(self.envs, actions, obs, rewards, terminated, truncated)
        finally:
            self._end()
        return obs, rewards, terminated, truncated, infos

    def describe_pending(self, thread: int) -> str:
        """The env that the block function running in ``thread`` is calling."""
        for block in (step_block, reset_block):
            frame = frame_of(thread, block.__code__)
            if frame is not None and "j" in frame.f_locals:
                return f"env {frame.f_locals['j']}"
        return "its envs"

    def pause(self) -> None:
        pause_block(self.envs)

    def benchmarks(self) -> list[dict | None]:
        return benchmark_block(self.envs)

    def render(self) -> np.ndarray | None:
        """The first env's frame."""
        # gymnasium types a frame for every render mode; an rgb_array env's is an array.
        return cast(np.ndarray | None, self.envs[0].render())

    def close(self) -> None:
        for env in self.envs:
            env.close()


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
