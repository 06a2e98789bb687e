"""Small envs for tests/run/test_cli.py, registered on import, so that ``--env-name
tests.toy_envs:DictObs-v0`` (gymnasium's module:EnvId form) makes the import register them."""
import gymnasium as gym
import numpy as np
from gymnasium import spaces


class DictObs(gym.Env):
    """Dict observations (a Box and a Discrete); its constructor takes no ``render_mode``. Episodes
    last 5 steps; action 1 pays 1."""

    observation_space = spaces.Dict({"position": spaces.Box(-1, 1, (2,), np.float32),
                                     "phase": spaces.Discrete(3)})
    action_space = spaces.Discrete(2)

    def __init__(self):
        self.t = 0

    def _obs(self):
        return {"position": np.full(2, self.t / 5, np.float32), "phase": self.t % 3}

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self._obs(), {}

    def step(self, action):
        self.t += 1
        return self._obs(), float(action), self.t >= 5, False, {}


class TextObs(DictObs):
    """Observations no policy here takes (text)."""

    observation_space = spaces.Text(8)


class Broken(DictObs):
    """An env whose constructor fails."""

    def __init__(self):
        raise RuntimeError("simulated constructor failure")


class MultiDiscreteTarget(gym.Env):
    """MultiDiscrete([3, 4]) actions: the observation is a one-hot state s of 6, and each action
    dimension pays 1 when it names its part of s (s % 3, s % 4). Episodes last 10 steps: a
    random policy earns ~5.8, the best one 20."""

    observation_space = spaces.Box(0, 1, (6,), np.float32)
    action_space = spaces.MultiDiscrete([3, 4])

    def _obs(self):
        self.state = int(self.np_random.integers(6))
        return np.eye(6, dtype=np.float32)[self.state]

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self._obs(), {}

    def step(self, action):
        reward = float(action[0] == self.state % 3) + float(action[1] == self.state % 4)
        self.t += 1
        return self._obs(), reward, self.t >= 10, False, {}


gym.register("DictObs-v0", entry_point=DictObs)
gym.register("MultiDiscreteTarget-v0", entry_point=MultiDiscreteTarget)
gym.register("TextObs-v0", entry_point=TextObs)
gym.register("Broken-v0", entry_point=Broken)
