"""``RealTimeDrone-v0``: the dummy RC drone of the rtgym tutorial, simulated in a thread.

A demo of ``a2c_ppo_acktr.realtime``, registered with gymnasium by ``import a2c_ppo_acktr``
(``register()``), so ``python main.py --env-name RealTimeDrone-v0`` and
``gym.make("a2c_ppo_acktr:RealTimeDrone-v0")`` work as typed.
"""
import threading
import time
from types import MappingProxyType
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from a2c_ppo_acktr.realtime.env import (
    DEFAULT_CONFIG,
    RealTimeEnv,
    RealTimeGymInterface,
    merge_config,
)

ENV_ID = "RealTimeDrone-v0"


class DroneInterface(RealTimeGymInterface):
    """The rtgym tutorial's dummy RC drone: a 2-D point simulated in a background thread.

    Physics ticks every 10 ms; the action is a velocity (clipped to [-2, 2]^2, then to norm 2);
    the position stays in [-1, 1]^2. Every control and every observation reaches the other side
    after a random 20-50 ms delay, and a message older than the newest one delivered is dropped.
    Observation: (x, y, target_x, target_y); reward: -distance; terminated within 0.01.
    """

    TICK = 0.01

    def __init__(self, min_delay: float = 0.02, max_delay: float = 0.05,
                 render_size: int = 200) -> None:
        self.min_delay, self.max_delay, self.render_size = min_delay, max_delay, render_size
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._target_rng, self._delay_rng = np.random.default_rng(), np.random.default_rng()
        self._target = np.zeros(2, np.float32)
        self._reset_state()

    def _reset_state(self) -> None:
        now = time.perf_counter()
        self._pos = np.zeros(2, np.float32)       # true position (simulator side)
        self._vel = np.zeros(2, np.float32)       # last control delivered to the drone
        # In flight: (arrival, stamp, value).
        self._ctrl_msgs: list[tuple[float, float, np.ndarray]] = []
        self._obs_msgs: list[tuple[float, float, np.ndarray]] = []
        self._ctrl_stamp = self._obs_stamp = now  # newest delivered; anything older is stale
        self._seen_pos = np.zeros(2, np.float32)  # last position delivered to the interface

    def _delay(self) -> float:
        return self._delay_rng.uniform(self.min_delay, self.max_delay)

    @staticmethod
    def _deliver(msgs: list[tuple[float, float, np.ndarray]], now: float, stamp: float,
                 value: np.ndarray) -> tuple[float, np.ndarray]:
        """Deliver the messages that have arrived: the newest wins, older ones are dropped."""
        keep = []
        for arrival, s, v in msgs:
            if arrival > now:
                keep.append((arrival, s, v))
            elif s > stamp:
                stamp, value = s, v
        msgs[:] = keep
        return stamp, value

    def _physics(self) -> None:
        next_tick = time.perf_counter()
        while not self._stop.is_set():
            with self._lock:
                now = time.perf_counter()
                self._ctrl_stamp, self._vel = self._deliver(self._ctrl_msgs, now,
                                                            self._ctrl_stamp, self._vel)
                self._pos = np.clip(self._pos + self._vel * self.TICK, -1, 1).astype(np.float32)
                self._obs_msgs.append((now + self._delay(), now, self._pos.copy()))
            next_tick = max(next_tick + self.TICK, time.perf_counter() - self.TICK)  # no burst
            self._stop.wait(max(0.0, next_tick - time.perf_counter()))

    def get_observation_space(self) -> spaces.Box:
        return spaces.Box(np.array([-1, -1, -0.5, -0.5], np.float32),
                          np.array([1, 1, 0.5, 0.5], np.float32), dtype=np.float32)

    def get_action_space(self) -> spaces.Box:
        return spaces.Box(-2.0, 2.0, shape=(2,), dtype=np.float32)

    def get_default_action(self) -> np.ndarray:
        return np.zeros(2, np.float32)

    def send_control(self, action: np.ndarray) -> None:
        vel = np.clip(np.asarray(action, np.float32), -2, 2)
        norm = float(np.linalg.norm(vel))
        if norm > 2:
            vel = vel * (2 / norm)
        with self._lock:
            now = time.perf_counter()
            self._ctrl_msgs.append((now + self._delay(), now, vel.astype(np.float32)))

    def reset(self, seed: int | None = None,
              options: dict | None = None) -> tuple[np.ndarray, dict]:
        with self._lock:
            if seed is not None:  # two streams, so the targets do not depend on thread timing
                t, d = np.random.SeedSequence(seed).spawn(2)
                self._target_rng, self._delay_rng = np.random.default_rng(t), np.random.default_rng(d)
            self._reset_state()  # the simulator teleports the drone home
            self._target = self._target_rng.uniform(-0.5, 0.5, 2).astype(np.float32)
            obs = np.concatenate([self._seen_pos, self._target])
        if self._thread is None:
            self._stop.clear()
            self._thread = threading.Thread(target=self._physics, daemon=True, name="drone")
            self._thread.start()
        return obs, {}

    def get_obs_rew_terminated_info(self) -> tuple[np.ndarray, float, bool, dict]:
        with self._lock:
            self._obs_stamp, self._seen_pos = self._deliver(
                self._obs_msgs, time.perf_counter(), self._obs_stamp, self._seen_pos)
            obs = np.concatenate([self._seen_pos, self._target])
        dist = float(np.linalg.norm(obs[:2] - obs[2:]))
        return obs, -dist, dist < 0.01, {}

    def render(self) -> np.ndarray:
        """RGB uint8 frame of the true state: drone (red ring), target (blue disc), y up."""
        n = self.render_size
        with self._lock:
            pos, target = self._pos.copy(), self._target.copy()
        img = np.full((n, n, 3), 255, np.uint8)
        rows, cols = np.ogrid[:n, :n]

        def pixel(p: np.ndarray) -> tuple[float, float]:
            return (1 - (p[1] + 1) / 2) * (n - 1), (p[0] + 1) / 2 * (n - 1)

        r, c = pixel(target)
        img[(rows - r) ** 2 + (cols - c) ** 2 <= (n / 50) ** 2] = (0, 0, 255)
        r, c = pixel(pos)
        d2 = (rows - r) ** 2 + (cols - c) ** 2
        img[(d2 <= (n / 20) ** 2) & (d2 >= (n / 20 - 2) ** 2)] = (255, 0, 0)
        return img

    def close(self) -> None:
        if self._thread is not None:
            self._stop.set()
            self._thread.join(timeout=1)
            self._thread = None


# benchmark on, as in the tutorial's drone config: main.py logs the timing statistics.
DRONE_CONFIG = MappingProxyType({**DEFAULT_CONFIG, "time_step_duration": 0.05,
                                 "start_obs_capture": 0.05, "ep_max_length": 100,
                                 "act_buf_len": 4, "benchmark": True})


def make_drone_env(render_mode: str | None = None, **config: Any) -> RealTimeEnv:
    """``RealTimeDrone-v0``'s entry point; keyword arguments override ``DRONE_CONFIG``."""
    return RealTimeEnv(DroneInterface(), merge_config(config, DRONE_CONFIG), render_mode=render_mode)


def register() -> None:
    """Register ``RealTimeDrone-v0`` with gymnasium (again: a no-op)."""
    if ENV_ID not in gym.registry:
        # nondeterministic: wall-clock timing and delays make steps irreproducible by design.
        gym.register(ENV_ID, entry_point="a2c_ppo_acktr.realtime.drone:make_drone_env",
                     max_episode_steps=None, nondeterministic=True)
