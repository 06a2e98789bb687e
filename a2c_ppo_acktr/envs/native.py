"""``NativeVecEnv``: an id's own vectorized implementation (``gym.make_vec(...,
vectorization_mode="vector_entry_point")``, e.g. CartPole's numpy ``CartPoleVectorEnv``) under our
vector-env contract: same-step autoreset with ``final_obs``, Monitor-equivalent episode
statistics and monitor files.

Such an env steps all N envs in one call and draws every reset from one RNG: seeding it with
``seed + first_rank`` makes runs reproducible, but env i's episodes are not those of the classic
env seeded ``seed + rank``.
"""
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.envs.classic_control.cartpole import CartPoleVectorEnv
from gymnasium.envs.registration import EnvSpec
from gymnasium.vector import AutoresetMode

from a2c_ppo_acktr.envs.blocks import check_batch
from a2c_ppo_acktr.envs.monitor import EpisodeMonitor
from a2c_ppo_acktr.envs.vec_env import BatchedVecEnv, StepResult, space_shape
from a2c_ppo_acktr.envs.watch import Calling
from a2c_ppo_acktr.errors import ConfigError


def _reset_cartpole(env: CartPoleVectorEnv, done: np.ndarray, obs: np.ndarray) -> None:
    """Reset the ``done`` envs now, as ``CartPoleVectorEnv.step`` would on its next call (same
    draws from the env's RNG), and write their first observations into ``obs``."""
    assert env.state is not None, "reset() sets the state before any step"
    env.state[:, done] = env.np_random.uniform(low=env.low, high=env.high, size=(4, done.sum()))
    env.steps[done] = 0
    env.prev_done[done] = False  # reset already: the next step must step them
    obs[done] = env.state[:, done].T


# Next-step vector envs whose envs we can reset in the same step, by class.
# Each function takes an env of its key's class (a mapping that the type system cannot express).
_SAME_STEP_RESETS: dict[type, Callable[[Any, np.ndarray, np.ndarray], None]] = {
    CartPoleVectorEnv: _reset_cartpole}


def has_native(spec: EnvSpec) -> bool:
    """Whether ``spec`` has a vector entry point that ``NativeVecEnv`` can run."""
    return spec.vector_entry_point is not None


class NativeVecEnv(BatchedVecEnv, Calling):
    """``num_envs`` envs of ``env_id`` in its vector entry point (contract of ``vec_env.py``)."""

    kind = "native"

    def __init__(self, env_id: str, num_envs: int, seed: int, first_rank: int = 0,
                 log_dir: str | None = None, monitor_append: bool = False,
                 env_kwargs: dict | None = None) -> None:
        try:
            self.env = gym.make_vec(env_id, num_envs, vectorization_mode="vector_entry_point",
                                    **(env_kwargs or {}))
        except (gym.error.Error, ImportError, TypeError) as e:
            raise ConfigError(f"--vec-env native cannot run {env_id}: {str(e).splitlines()[0]}") from None
        mode = self.env.metadata.get("autoreset_mode")
        self._reset_done = _SAME_STEP_RESETS.get(type(self.env.unwrapped))
        if mode != AutoresetMode.SAME_STEP and self._reset_done is None:
            self.env.close()
            raise ConfigError(f"--vec-env native: {env_id}'s vector env resets in {mode} mode and "
                             "we know no same-step reset for it; use --vec-env dummy")
        self.num_envs = num_envs
        self.observation_space = self.env.single_observation_space
        self.action_space = self.env.single_action_space
        self.monitor = EpisodeMonitor(num_envs, env_id, log_dir, first_rank, monitor_append)
        self.env_id = env_id
        self._seed: int | None = seed + first_rank

    def reset(self) -> np.ndarray:
        self._start("reset")
        try:
            obs, _ = self.env.reset(seed=self._seed)
        finally:
            self._end()
        self._seed = None  # seeded once; later resets continue the RNG
        check_batch(self.env_id, self.kind, "reset", obs, self.num_envs, self.observation_space)
        return obs

    def step(self, actions: np.ndarray) -> StepResult:
        """Step every env: obs, rewards f32, terminated, truncated, infos (numpy)."""
        actions = np.asarray(actions, self.action_space.dtype).reshape(
            self.num_envs, *space_shape(self.action_space))
        self._start("step")
        try:
            obs, rewards, terminated, truncated, info = self.env.step(actions)
        finally:
            self._end()
        check_batch(self.env_id, self.kind, "step", obs, self.num_envs, self.observation_space)
        ended = terminated | truncated
        infos: list[dict] = [{} for _ in range(self.num_envs)]
        self.monitor.step(rewards, ended, infos)
        if ended.any():
            if self._reset_done is not None:
                for i in np.flatnonzero(ended).tolist():
                    infos[i]["final_obs"] = obs[i].copy()
                self._reset_done(self.env.unwrapped, ended, obs)
            else:  # same-step mode already reset them and kept their final observations
                for i in np.flatnonzero(info["_final_obs"]).tolist():
                    infos[i]["final_obs"] = info["final_obs"][i]
        return obs, np.asarray(rewards, np.float32), terminated, truncated, infos

    def close(self) -> None:
        self.env.close()
        self.monitor.close()
