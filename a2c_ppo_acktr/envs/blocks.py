"""Gym envs stepped as a block in one process: ``DummyVecEnv`` steps all N one after the other,
each ``ShmemVecEnv`` worker steps its own block. What an env returns is checked against its
spaces as it is written into the batch, and an env that raises or returns what its space does not
allow is named in one line (``env_failure``): its index, id, method and, where known, the fix.
The contract they keep is ``vec_env.py``'s.
"""
import traceback
from collections.abc import Callable, Sequence
from numbers import Real
from typing import cast

import gymnasium as gym
import numpy as np

from a2c_ppo_acktr.envs.vec_env import StepResult, space_shape
from a2c_ppo_acktr.envs.watch import Calling, frame_of
from a2c_ppo_acktr.errors import EnvError, Error, first_line, machine_failure


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
    if (said := machine_failure(error)) is not None:  # a full disk: the env's code is not at fault
        return EnvError(f"env {index} ({_env_name(env)}) failed in {method}: {said}")
    tb = error.__traceback__
    inner = tb.tb_next if tb is not None else None  # below the frame that called the env
    details = "".join(traceback.format_exception(type(error), error, inner)) if inner else ""
    first = first_line(error)
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


def pending_env(thread: int) -> int | None:
    """The index of the env that a block function (``step_block``, ``reset_block``) running in
    ``thread`` is calling, if one is."""
    for block in (step_block, reset_block):
        frame = frame_of(thread, block.__code__)
        if frame is not None and "j" in frame.f_locals:
            return frame.f_locals["first_index"] + frame.f_locals["j"]
    return None


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
            for env in envs:
                env.close()
            name = getattr(fn, "env_id", None)
            which = f"env {first_index + j}{f' ({name})' if name else ''} failed to build"
            if (said := machine_failure(e)) is not None:  # writing its monitor file to a full disk
                raise EnvError(f"{which}: {said}") from None  # one line: no traceback of the env's
            tb = e.__traceback__
            details = "".join(traceback.format_exception(type(e), e, tb.tb_next if tb else None))
            first = first_line(e)
            raise EnvError(f"{which}: {type(e).__name__}{': ' + first if first else ''} (its "
                           "traceback above)", details) from None
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
            self._reset_envs(obs)
        finally:
            self._end()
        return obs

    def _reset_envs(self, obs: np.ndarray) -> None:
        reset_block(self.envs, obs)

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
            infos = self._step_envs(actions, obs, rewards, terminated, truncated)
        finally:
            self._end()
        return obs, rewards, terminated, truncated, infos

    def _step_envs(self, actions: np.ndarray, obs: np.ndarray, rewards: np.ndarray,
                   terminated: np.ndarray, truncated: np.ndarray) -> list[dict]:
        """Step every env into the rows of the arrays (``step_block``); their infos."""
        return step_block(self.envs, actions, obs, rewards, terminated, truncated)

    def describe_pending(self, thread: int) -> str:
        """The env that the block function running in ``thread`` is calling."""
        index = pending_env(thread)
        return f"env {index}" if index is not None else "its envs"

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
