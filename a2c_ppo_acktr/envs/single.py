"""One env: ``gym.make`` plus Monitor, DeepMind Atari preprocessing, CHW images and seeding."""
import os
import sys
import warnings
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from gymnasium.wrappers import FlattenObservation, RecordVideo

from a2c_ppo_acktr.envs.ids import env_spec, is_atari, is_mujoco, register_ale
from a2c_ppo_acktr.envs.monitor import monitor_t_start
from a2c_ppo_acktr.envs.sb3 import (
    ClipRewardEnv,
    EpisodicLifeEnv,
    FireResetEnv,
    MaxAndSkipEnv,
    Monitor,
    NoopResetEnv,
    WarpFrame,
    opencv,
)
from a2c_ppo_acktr.envs.vec_env import space_shape
from a2c_ppo_acktr.errors import ConfigError, say


def _plain_gymnasium_warnings() -> None:
    """gymnasium colours its warnings with terminal codes, also into a file or a pipe (a log):
    there, plain text. Inherited by the env workers, which build their envs through here."""
    try:
        tty = sys.stderr.isatty()
    except (AttributeError, ValueError):  # replaced or closed
        tty = False
    if not tty:
        gym.logger.colorize = lambda string, *args, **kwargs: string


_plain_gymnasium_warnings()


_mujoco_seen: set[str] | None = None
# (what, env id) this process has had said: MuJoCo's warnings, flattened observations
_claimed: set[tuple[str, str]] = set()


def _claim(what: str, env_id: str) -> bool:
    """True the first time this process asks for ``(what, env_id)``: the env it is about to build,
    wherever that is (a worker process), says ``what``; envs built later (evaluation, a check)
    stay quiet, in this process and in any other."""
    first = (what, env_id) not in _claimed
    _claimed.add((what, env_id))
    return first


def _mujoco_warnings_once(show: bool = True) -> None:
    """Route MuJoCo's warnings to one stderr line per distinct message, from the process that
    builds the env that claimed them (``show``, ``_claim``; other processes stay quiet). MuJoCo's own handler
    prints each warning at every model load (64 times for 64 envs) and appends it to
    ``MUJOCO_LOG.TXT`` in the working directory. The first call in a process decides."""
    global _mujoco_seen
    if _mujoco_seen is not None:
        return
    import mujoco

    _mujoco_seen = set()

    def warn(message: str) -> None:
        if show and message not in _mujoco_seen:
            _mujoco_seen.add(message)
            say(f"mujoco: warning: {message}")

    mujoco.set_mju_user_warning(warn)


# Leaves gymnasium's FlattenObservation turns into one vector (Discrete: one-hot).
_FLAT_LEAVES = (spaces.Box, spaces.Discrete, spaces.MultiDiscrete, spaces.MultiBinary)


def _flattenable(space: gym.Space) -> bool:
    if isinstance(space, spaces.Dict):
        return all(_flattenable(s) for s in space.spaces.values())
    if isinstance(space, spaces.Tuple):
        return all(_flattenable(s) for s in space.spaces)
    return isinstance(space, _FLAT_LEAVES)


def _vector_observations(env: gym.Env, env_id: str, announce: bool) -> gym.Env:
    """``env`` with array observations: Discrete (one-hot), Dict and Tuple observations flattened
    into one vector, reported once per process when ``announce``; a one-line ValueError naming
    any other space. Box, MultiDiscrete and MultiBinary pass as they are."""
    space = env.observation_space
    if isinstance(space, _FLAT_LEAVES) and not isinstance(space, spaces.Discrete):
        return env
    if not _flattenable(space):
        raise ConfigError(f"{env_id} has observations {space}, which are not supported: expected "
                         "Box, Discrete, MultiDiscrete, MultiBinary, or Dict / Tuple of them")
    env = FlattenObservation(env)
    if announce:
        print(f"{env_id}: observations {space} flattened into vectors of "
              f"{space_shape(env.observation_space)[0]} (Discrete ones one-hot)", flush=True)
    return env


class TransposeImage(gym.ObservationWrapper):
    """HWC image observations -> CHW, the layout torch convolutions expect."""

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        space = env.observation_space
        assert isinstance(space, spaces.Box), f"images are Boxes, not {space}"
        self.observation_space = spaces.Box(
            space.low.transpose(2, 0, 1), space.high.transpose(2, 0, 1), dtype=space.dtype)

    def observation(self, observation: np.ndarray) -> np.ndarray:
        return observation.transpose(2, 0, 1)


class SeedFirstReset(gym.Wrapper):
    """Seeds the env's first ``reset`` (gymnasium seeds through reset, not ``env.seed``)."""

    def __init__(self, env: gym.Env, seed: int) -> None:
        super().__init__(env)
        self._seed: int | None = seed

    def reset(self, *, seed: int | None = None,
              options: dict | None = None) -> tuple[Any, dict]:
        if seed is None:
            seed, self._seed = self._seed, None
        return self.env.reset(seed=seed, options=options)


class WarpFrameGray(WarpFrame):
    """SB3's ``WarpFrame`` (84x84 grayscale, ``INTER_AREA``) that also takes frames already gray.

    With ``obs_type="grayscale"`` the max over the last two frames is taken in grayscale, as
    ALE's ``AtariVectorEnv`` takes it, rather than of RGB frames converted after (the classic
    stack's default): the two differ where an object moved between the frames (docs/details.md,
    "Flags and run files").
    """

    def observation(self, frame: np.ndarray) -> np.ndarray:
        if frame.ndim == 3:
            return super().observation(frame)
        cv2 = opencv()  # imported by the classic Atari stack only (envs/sb3.py)
        return cv2.resize(frame, (self.width, self.height), interpolation=cv2.INTER_AREA)[:, :, None]


def render_offscreen() -> bool:
    """Without a display, have MuJoCo (EGL) and SDL (pygame, ALE) render offscreen, unless told
    otherwise; -> whether a display exists."""
    display = bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))
    if not display:  # their defaults (glfw, SDL's x11) want one
        os.environ.setdefault("MUJOCO_GL", "egl")
        os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
    return display


def record_video(env: gym.Env, video_prefix: str, atari: bool) -> gym.Env:
    """``env`` recording its episodes 0, 1, 8, 27, ..., 1000, 2000, ... (gymnasium's default
    trigger) to ``<video_prefix>-episode-<n>.mp4``; an Atari env is one inside ``MaxAndSkipEnv``:
    its recorded frames (each held in memory until the episode ends) are the agent's steps."""
    fps = 60 // 4 if atari else None  # the emulator's 60 Hz, one frame in 4; else the env's own
    with warnings.catch_warnings():  # the folder holds the videos of this run before a resume
        warnings.filterwarnings("ignore", ".*Overwriting existing videos")
        return RecordVideo(env, os.path.dirname(video_prefix), fps=fps,
                           name_prefix=os.path.basename(video_prefix))


def make_env(env_id: str, seed: int, rank: int, log_dir: str | None, allow_early_resets: bool,
             render_mode: str | None = None, monitor_append: bool = False,
             env_kwargs: dict | None = None, video_prefix: str | None = None
             ) -> Callable[[], gym.Env]:
    """Return a thunk building env ``rank``: gym env, Monitor, Atari preprocessing, CHW images.

    The id is checked now (ValueError if unknown); the env itself is built when the thunk is
    called, possibly in a worker process (thunks are cloudpickled there). ``env_kwargs`` go to
    ``gym.make`` (they override ``render_mode`` and the Atari ``frameskip`` set here).
    ``video_prefix``: env rank 0 renders ``rgb_array`` frames and records videos (``record_video``).
    """
    spec = env_spec(env_id)
    show_mujoco = rank == 0 and is_mujoco(spec) and _claim("mujoco", env_id)
    announce = rank == 0 and _claim("observations", env_id)
    atari, mujoco = is_atari(spec), is_mujoco(spec)
    video = video_prefix if rank == 0 else None
    render_mode = "rgb_array" if video else render_mode

    def _thunk() -> gym.Env:
        kwargs = {}
        if video:
            render_offscreen()
        if mujoco:
            _mujoco_warnings_once(show=show_mujoco)
        if atari:
            register_ale()  # a fresh worker process has not registered them yet
            opencv()  # WarpFrame's: not imported by other runs (envs/sb3.py)
            if spec.kwargs.get("frameskip", 1) != 1:
                kwargs["frameskip"] = 1  # e.g. ALE/*-v5: MaxAndSkipEnv does the skipping
        # render_mode only when asked: an env whose constructor has no render_mode still runs.
        # The spec, not the id: a worker process may not have registered it (RealTimeDrone-v0).
        asked = {"render_mode": render_mode} if render_mode is not None else {}
        with warnings.catch_warnings(record=True) as caught:  # shown unless the error says it
            warnings.simplefilter("default")
            try:
                env = gym.make(spec, **{**asked, **kwargs, **(env_kwargs or {})})
            except TypeError as e:
                if "render_mode" not in str(e) or not asked:
                    raise
                raise ConfigError(f"{env_id} cannot render: its constructor takes no "
                                 "render_mode") from None
        for w in caught:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
        env = _vector_observations(env, env_id, announce)
        if atari:
            env = NoopResetEnv(env, noop_max=30)
            env = MaxAndSkipEnv(env, skip=4)
        if video:  # whole games, outside EpisodicLifeEnv, as the monitor files count them
            env = record_video(env, video, atari)
        if log_dir is not None:
            # Inside EpisodicLife, so the CSV holds whole games with raw (unclipped) rewards.
            filename = os.path.join(log_dir, str(rank))
            t_start = monitor_t_start(filename + ".monitor.csv") if monitor_append else None
            # A new file (one that is gone too, at --resume) starts with its header.
            env = Monitor(env, filename, allow_early_resets=allow_early_resets,
                          override_existing=t_start is None)
            if t_start is not None:
                env.t_start = t_start  # appended rows continue the file's clock
        if atari:
            env = EpisodicLifeEnv(env)
            ale_env: Any = env.unwrapped  # ale_py's AtariEnv
            if "FIRE" in ale_env.get_action_meanings():
                env = FireResetEnv(env)
            env = WarpFrameGray(env, width=84, height=84)
            env = ClipRewardEnv(env)
        shape = env.observation_space.shape
        if shape is not None and len(shape) == 3 and shape[2] in (1, 3):
            env = TransposeImage(env)
        env = SeedFirstReset(env, seed + rank)
        env.action_space.seed(seed + rank)
        return env

    _thunk.env_id = env_id  # type: ignore[attr-defined]  # named if it fails (build_envs)
    return _thunk


def check_env_kwargs(env_id: str, env_kwargs: dict) -> None:
    """Build and close one env with ``env_kwargs``: a bad key is a one-line ValueError here, not a
    traceback from a worker process."""
    spec = env_spec(env_id)
    if is_mujoco(spec):
        _mujoco_warnings_once(show=_claim("mujoco", env_id))
    if is_atari(spec) and env_kwargs.get("obs_type", "rgb") not in ("rgb", "grayscale"):
        raise ConfigError(f"the Atari preprocessing takes obs_type rgb or grayscale, not "
                          f"{env_kwargs['obs_type']!r}")
    try:
        gym.make(env_id, **env_kwargs).close()
    except (TypeError, ValueError) as e:  # TypeError: unknown key; ValueError: rejected value
        raise ConfigError(f"{env_id} rejects env kwargs {env_kwargs}: {str(e).splitlines()[0]}") from None
