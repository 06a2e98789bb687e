"""Envs that fail as a user's own env may (issue #72), registered on import for ``--env-name
tests.fault_envs:<Id>``: each steps like a 3-float, 2-action env for ``AT`` steps (across resets
and episodes of 4 steps), then does its fault: ``--env-kwargs at=N`` (default 3); ``only=I``: only
env I (of seed % 100) fails."""
import os
import time

import gymnasium as gym
import numpy as np
from gymnasium import spaces


class Faulty(gym.Env):
    """Good until its ``AT``-th step; then ``fault`` (in ``step``)."""

    observation_space = spaces.Box(-1, 1, (3,), np.float32)
    action_space = spaces.Discrete(2)

    def __init__(self, at=3, only=-1):
        self.steps, self.t, self.index, self.at, self.only = 0, 0, None, at, only

    def _obs(self):
        return np.full(3, self.t / 4, np.float32)

    def _faulty(self):
        return self.steps >= self.at and (self.only < 0 or self.index == self.only)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        if seed is not None:
            self.index = seed % 100
        self.t = 0
        return self._obs(), {}

    def step(self, action):
        self.steps += 1
        self.t += 1
        if self._faulty():
            return self.fault()
        return self._obs(), 1.0, self.t >= 4, False, {}

    def fault(self):
        raise RuntimeError("simulated failure in step")


class RaiseInReset(Faulty):
    def reset(self, *, seed=None, options=None):
        raise ValueError("simulated failure in reset")


class WrongShape(Faulty):
    def fault(self):
        return np.zeros(1, np.float32), 1.0, False, False, {}


class WrongDtype(Faulty):
    observation_space = spaces.Box(0, 255, (3,), np.uint8)

    def fault(self):
        return np.full(3, 0.5), 1.0, False, False, {}


class OldApi(Faulty):
    def fault(self):
        return self._obs(), 1.0, False, {}


class NoneReward(Faulty):
    def fault(self):
        return self._obs(), None, False, False, {}


class NanObs(Faulty):
    def fault(self):
        return np.full(3, np.nan, np.float32), 1.0, False, False, {}


class OutOfBounds(Faulty):
    def fault(self):
        return np.full(3, 5.0, np.float32), 1.0, self.t >= 4, False, {}


class NanReward(Faulty):
    def fault(self):
        return self._obs(), float("inf"), False, False, {}


class Exits(Faulty):
    def fault(self):
        os._exit(3)


class Hangs(Faulty):
    def fault(self):
        while True:
            time.sleep(1)


class FullDisk(Faulty):
    """Writes its own file to a full disk (/dev/full) in ``step``, and as it is built (``at=0``)."""

    def __init__(self, at=3, only=-1):
        super().__init__(at, only)
        if at == 0:
            self.fault()

    def fault(self):
        with open("/dev/full", "w") as f:
            f.write("a row")  # raises ENOSPC as it is flushed


for cls in (Faulty, RaiseInReset, WrongShape, WrongDtype, OldApi, NoneReward, NanObs, OutOfBounds,
            NanReward, Exits, Hangs, FullDisk):
    name = "RaiseInStep" if cls is Faulty else cls.__name__
    gym.register(f"{name}-v0", entry_point=cls, max_episode_steps=100)


class WrongShapeVector(gym.vector.VectorEnv):
    """A vector entry point (``--vec-env native``) whose batches hold 1 float per env where its
    space says 3."""

    metadata = {"autoreset_mode": gym.vector.AutoresetMode.SAME_STEP}

    def __init__(self, num_envs=1, **kwargs):
        self.num_envs = num_envs
        self.single_observation_space = Faulty.observation_space
        self.single_action_space = Faulty.action_space
        self.observation_space = gym.vector.utils.batch_space(self.single_observation_space, num_envs)
        self.action_space = gym.vector.utils.batch_space(self.single_action_space, num_envs)

    def reset(self, *, seed=None, options=None):
        return np.zeros((self.num_envs, 1), np.float32), {}

    def step(self, actions):
        n = self.num_envs
        return np.zeros((n, 1), np.float32), np.ones(n), np.zeros(n, bool), np.zeros(n, bool), {}


gym.register("WrongShapeVector-v0", entry_point=WrongShape, vector_entry_point=WrongShapeVector)
