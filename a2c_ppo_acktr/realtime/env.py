"""Real-time environments with rtgym's timing semantics, without depending on rtgym.

``RealTimeEnv`` turns a ``RealTimeGymInterface`` (what a user writes to plug in a device) into a
``gym.Env`` whose ``step`` lasts ``time_step_duration`` seconds of wall time:

    step(a) called during time step k (which started at t_k, with the previous action):
      - observation captured at t_k + start_obs_capture (the effect of the *previous* action),
      - sleep until the deadline t_k + time_step_duration,
      - ``a`` is sent: it is the action of time step k+1, which starts now; ``step`` returns.

The observation was taken before ``a`` acted, so the last ``act_buf_len`` actions are appended to
it. A ``step`` up to ``time_step_timeout_factor`` time steps late is absorbed; later is a time-out
(``env.timeouts``, ``info``, a warning; the clock re-based). The user's view: docs/realtime.md.
"""
import time
import warnings
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any, cast

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from a2c_ppo_acktr.errors import ConfigError

__all__ = ["RealTimeGymInterface", "DEFAULT_CONFIG", "merge_config", "RealTimeEnv",
           "BENCHMARK_KEYS", "mean_benchmarks"]


class RealTimeGymInterface:
    """What a user implements to plug a robot or a game into ``RealTimeEnv``.

    ``send_control`` must not block: the env times the steps. Observations may be any gymnasium
    space that ``gymnasium.spaces.flatten`` handles; the env flattens them to float32.
    """

    def get_observation_space(self) -> gym.Space:
        raise NotImplementedError

    def get_action_space(self) -> gym.Space:
        raise NotImplementedError

    def get_default_action(self) -> np.ndarray:
        """Action applied while nobody acts (at reset, while paused by ``wait``)."""
        raise NotImplementedError

    def send_control(self, action: np.ndarray) -> None:
        raise NotImplementedError

    def reset(self, seed: int | None = None, options: dict | None = None) -> tuple[Any, dict]:
        """Start an episode; return ``obs, info``."""
        raise NotImplementedError

    def get_obs_rew_terminated_info(self) -> tuple[Any, float, bool, dict]:
        """Capture the current observation; return ``obs, reward, terminated, info``."""
        raise NotImplementedError

    def wait(self) -> None:
        """Pause the device (e.g. while the learner updates); default: send the default action."""
        self.send_control(self.get_default_action())

    def render(self) -> np.ndarray | None:
        return None

    def close(self) -> None:
        pass


DEFAULT_CONFIG = MappingProxyType({
    "time_step_duration": 0.05,      # seconds per time step
    "start_obs_capture": 0.05,       # observation captured this long after a step starts
    "time_step_timeout_factor": 1.0,  # lateness (in time steps) absorbed before a time-out
    "ep_max_length": 1000,           # steps, then truncated
    "act_buf_len": 1,                # last actions appended to the observation
    "reset_act_buf": True,           # refill the action buffer with default actions at reset
    "act_in_obs": True,
    "wait_on_done": False,           # call wait() when an episode ends
    "benchmark": False,
    "benchmark_polyak": 0.1,
})


def merge_config(config: Mapping | None = None, base: Mapping = DEFAULT_CONFIG) -> dict:
    """A new dict: ``base`` updated with ``config`` (never mutated); unknown keys -> ValueError."""
    config = dict(config or {})
    unknown = sorted(set(config) - set(base))
    if unknown:
        raise ConfigError(f"unknown real-time config key(s) {', '.join(map(repr, unknown))}; "
                         f"accepted: {', '.join(base)}")
    merged = {**base, **config}
    if not merged["time_step_duration"] > 0:
        raise ConfigError("time_step_duration must be > 0")
    if not 0 <= merged["start_obs_capture"] <= merged["time_step_duration"]:
        raise ConfigError("start_obs_capture must lie in [0, time_step_duration]")
    if merged["ep_max_length"] < 1 or merged["act_buf_len"] < 0:
        raise ConfigError("ep_max_length must be >= 1 and act_buf_len >= 0")
    if not 0 < merged["benchmark_polyak"] <= 1:
        raise ConfigError("benchmark_polyak must lie in (0, 1]")
    return merged


class _Polyak:
    """rtgym-style running mean and mean absolute deviation (first sample initializes)."""

    def __init__(self, polyak: float) -> None:
        self.polyak, self.dev = polyak, 0.0
        self.mean: float | None = None

    def add(self, x: float) -> None:
        if self.mean is None:
            self.mean = x
            return
        p = self.polyak
        self.mean = (1 - p) * self.mean + p * x
        self.dev = (1 - p) * self.dev + p * abs(x - self.mean)


class RealTimeEnv(gym.Env):
    """A ``gym.Env`` stepping a ``RealTimeGymInterface`` at a fixed wall-clock rate (see module doc).

    Observations are a flat float32 Box: the interface observation, flattened, then (with
    ``act_in_obs``) the last ``act_buf_len`` actions, oldest first. Call ``wait()`` before a pause
    (e.g. a learner update): the device gets its default action and no time-out is counted; the
    next ``step`` re-bases the clock. ``benchmarks()`` reports timing statistics when
    ``benchmark=True``.
    """

    metadata = {"render_modes": ["rgb_array"], "render_fps": 20}

    def __init__(self, interface: RealTimeGymInterface, config: Mapping | None = None,
                 render_mode: str | None = None) -> None:
        self.interface = interface
        self.config = merge_config(config)
        c = self.config
        self.render_mode = render_mode
        self.metadata = {**self.metadata, "render_fps": max(1, round(1 / c["time_step_duration"]))}
        self._T = c["time_step_duration"]
        self._obs_space = interface.get_observation_space()
        self.action_space = interface.get_action_space()
        self._default_action = np.asarray(interface.get_default_action(), self.action_space.dtype)
        n_buf = c["act_buf_len"] if c["act_in_obs"] else 0
        flat_obs = spaces.flatten_space(self._obs_space)
        flat_act = spaces.flatten_space(self.action_space)
        assert isinstance(flat_obs, spaces.Box) and isinstance(flat_act, spaces.Box), \
            "the interface's spaces must flatten to Boxes (not Graph or Sequence)"
        low = np.concatenate([flat_obs.low] + [flat_act.low] * n_buf).astype(np.float32)
        high = np.concatenate([flat_obs.high] + [flat_act.high] * n_buf).astype(np.float32)
        self.observation_space = spaces.Box(low, high, dtype=np.float32)
        self._act_buf = [self._default_action.copy() for _ in range(n_buf)]
        self.timeouts = 0  # total over the env's life
        self._paused = True
        self._t_step = self._deadline = 0.0
        self._last_return: float | None = None
        self._steps = 0
        self._warned = False
        self._bench = {k: _Polyak(c["benchmark_polyak"])
                       for k in ("time_step_duration", "step_time", "inference_time")}

    # ------------------------------------------------------------------ helpers
    def _obs(self, obs: Any) -> np.ndarray:
        # Both spaces flatten to Boxes (checked in __init__), so these are arrays.
        parts = [cast(np.ndarray, spaces.flatten(self._obs_space, obs))]
        parts += [cast(np.ndarray, spaces.flatten(self.action_space, a)) for a in self._act_buf]
        return np.concatenate(parts).astype(np.float32)

    def _push_action(self, action: np.ndarray) -> None:
        if self._act_buf:
            self._act_buf.pop(0)
            self._act_buf.append(np.array(action, dtype=self.action_space.dtype))

    @staticmethod
    def _sleep_until(t: float) -> None:
        # Sleeping to absolute deadlines keeps the mean period exact even when a sleep overshoots.
        dt = t - time.perf_counter()
        if dt > 0:
            time.sleep(dt)

    # ------------------------------------------------------------------ gym API
    def reset(self, *, seed: int | None = None,
              options: dict | None = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        obs, info = self.interface.reset(seed=seed, options=options)
        if self.config["reset_act_buf"]:
            self._act_buf = [self._default_action.copy() for _ in self._act_buf]
        self.interface.send_control(self._default_action)  # time step 0 runs the default action
        self._t_step = time.perf_counter()
        self._deadline = self._t_step + self._T
        self._paused, self._steps, self._warned = False, 0, False
        self._last_return = None  # no inference time measured across a reset
        return self._obs(obs), dict(info)

    def step(self, action: np.ndarray) -> tuple[np.ndarray, float, bool, bool, dict]:
        c = self.config
        now = time.perf_counter()
        info: dict[str, Any] = {}
        # After wait() the device held still and the clock stopped: this step captures and sends
        # at once and the clock restarts now. (Sleeping a whole step here would stagger the
        # clocks of envs stepped one after another in one process, and time them out.)
        resumed = self._paused
        timeout = not resumed and now > self._deadline + self._T * c["time_step_timeout_factor"]
        if now <= self._deadline and not resumed:  # on time: capture as scheduled, then wait
            self._sleep_until(self._t_step + c["start_obs_capture"])
            obs, reward, terminated, info = self.interface.get_obs_rew_terminated_info()
            self._sleep_until(self._deadline)
        else:  # late: capture now, send now
            obs, reward, terminated, info = self.interface.get_obs_rew_terminated_info()
        info = dict(info)
        self.interface.send_control(action)
        self._push_action(action)
        if timeout:
            self.timeouts += 1
            info["timeout"], info["timeouts"] = True, self.timeouts
            if not self._warned:
                warnings.warn(f"RealTimeEnv: step called {now - self._deadline:.4f}s after its "
                              f"deadline (time-out; the clock is re-based); further time-outs "
                              f"this episode are only counted", RuntimeWarning, stacklevel=2)
                self._warned = True
        if timeout or resumed:
            self._t_step = time.perf_counter()
        else:
            self._t_step = self._deadline  # a late step is absorbed by a shorter next one
        self._deadline = self._t_step + self._T
        self._paused = False
        self._steps += 1
        truncated = self._steps >= c["ep_max_length"]
        terminated = bool(terminated)

        end = time.perf_counter()
        if c["benchmark"]:
            b = self._bench
            b["step_time"].add(end - now)
            if self._last_return is not None and not resumed:  # a pause is not inference time
                b["inference_time"].add(now - self._last_return)
                b["time_step_duration"].add(end - self._last_return)
        self._last_return = end
        if terminated or truncated:
            info["timeouts"] = self.timeouts
            if c["benchmark"]:
                info["benchmark"] = self.benchmarks()
            if c["wait_on_done"]:
                self.wait()
        return self._obs(obs), float(reward), terminated, truncated, info

    def wait(self) -> None:
        """Pause: the device gets its default action and the clock stops until the next step."""
        self.interface.wait()
        self._push_action(self._default_action)
        self._paused = True
        self._last_return = None

    def pause(self) -> None:
        """The vector envs' optional capability (``envs.vec_env``): hold still until the next
        step, i.e. ``wait``."""
        self.wait()

    def benchmarks(self) -> dict[str, float]:
        """``{name_mean, name_dev}`` in seconds for time_step_duration, step_time (inside
        ``step``) and inference_time (caller's time between steps), NaN before a sample (and
        always with ``benchmark=False``), plus ``timeouts``."""
        out = {}
        for k, p in self._bench.items():
            out[k + "_mean"] = float("nan") if p.mean is None else float(p.mean)
            out[k + "_dev"] = float("nan") if p.mean is None else float(p.dev)
        out["timeouts"] = self.timeouts
        return out

    def render(self) -> np.ndarray | None:
        return self.interface.render()

    def close(self) -> None:
        self.interface.close()


BENCHMARK_KEYS = tuple(f"{k}_{s}" for k in ("time_step_duration", "step_time", "inference_time")
                       for s in ("mean", "dev"))


def mean_benchmarks(benchmarks: Sequence[dict | None]) -> dict[str, float]:
    """Average ``benchmarks()`` over envs (``BENCHMARK_KEYS`` -> seconds); None entries (envs that
    are not real-time) and NaNs (no sample yet) are left out; NaN where no env has a value."""
    out = {}
    for key in BENCHMARK_KEYS:
        values = [b[key] for b in benchmarks if b is not None and b[key] == b[key]]
        out[key] = sum(values) / len(values) if values else float("nan")
    return out
