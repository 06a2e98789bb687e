"""``AleVecEnv``: Atari games in ALE's C++ vector env (``ale_py.vector_env.AtariVectorEnv``), under
our vector-env contract, with the semantics of the classic wrapped stack (``single.make_env``).

ALE runs the classic preprocessing in C++ on its own threads (frameskip 4 with a max over two
frames, 84x84 grayscale, noop starts, FIRE at reset, the frame stack): observations are (N, 4, 84,
84) uint8. This module adds clipped rewards (raw scores in ``infos[i]["episode"]`` and the monitor
files), ``episodic_life`` (a lost life ends the learner's episode, the game goes on: ALE's own
option resets the game), same-step autoreset with ``final_obs``, truncation at
``max_num_frames_per_episode`` (108000), seeds ``seed + first_rank + i``, and ``groups``: blocks
of envs stepped apart (``send``, ``recv``) for a pipelined collector. Where its resets differ from
the classic stack's: docs/benchmarks.md, "`ale` and the classic stack: what differs".
"""
import numpy as np
from gymnasium.envs.registration import EnvSpec

from a2c_ppo_acktr.envs.ids import register_ale
from a2c_ppo_acktr.envs.monitor import EpisodeMonitor
from a2c_ppo_acktr.envs.vec_env import BatchedVecEnv, StepResult
from a2c_ppo_acktr.errors import ConfigError

# gym.make kwargs of the ALE ids that AtariVectorEnv takes too, under the same names.
SUPPORTED_KWARGS = ("repeat_action_probability", "full_action_space", "max_num_frames_per_episode")
# Keys of the ids' own specs that the preprocessing above replaces.
_SPEC_ONLY = ("game", "frameskip", "obs_type")
_UNLIMITED_FRAMES = 2 ** 30  # ALE takes an int; None (no limit) in gym.make
_SEEDS = 2 ** 31  # ALE's seeds are int32: larger ones wrap


def ale_vector_available() -> bool:
    """Whether the installed ale_py has ``AtariVectorEnv`` (ale-py >= 0.11)."""
    try:
        from ale_py.vector_env import AtariVectorEnv  # noqa: F401
    except ImportError:
        return False
    return True


def ale_kwargs(spec: EnvSpec, env_kwargs: dict | None = None) -> dict:
    """``AtariVectorEnv`` arguments for a registered ALE id and the user's ``--env-kwargs``;
    a one-line ValueError for a kwarg it does not take."""
    unknown = sorted(set(env_kwargs or ()) - set(SUPPORTED_KWARGS))
    if unknown:
        raise ConfigError(f"--vec-env ale takes the env kwargs {', '.join(SUPPORTED_KWARGS)}; not "
                         f"{', '.join(unknown)} (use --vec-env dummy for those)")
    merged = {**{k: v for k, v in spec.kwargs.items() if k not in _SPEC_ONLY}, **(env_kwargs or {})}
    kwargs = {k: merged[k] for k in SUPPORTED_KWARGS if k in merged}
    if kwargs.get("max_num_frames_per_episode", 0) is None:
        kwargs["max_num_frames_per_episode"] = _UNLIMITED_FRAMES
    return {"game": spec.kwargs["game"], **kwargs}


class _Group:
    """One ``AtariVectorEnv`` of ``n`` envs and the per-env state of our additions."""

    def __init__(self, n: int, ale_args: dict, threads: int, episodic_life: bool,
                 monitor: EpisodeMonitor) -> None:
        from ale_py import Action
        from ale_py.vector_env import AtariVectorEnv

        try:
            self.ale = AtariVectorEnv(num_envs=n, num_threads=threads, autoreset_mode="SameStep",
                                      reward_clipping=False, life_loss_info=episodic_life,
                                      **ale_args)
        except (RuntimeError, ValueError, TypeError, AssertionError) as e:
            raise ConfigError(f"AtariVectorEnv rejects {ale_args}: {str(e).splitlines()[0]}") from None
        self.n, self.episodic_life, self.monitor = n, episodic_life, monitor
        self.stack = ale_args["stack_num"]
        self.lives = np.zeros(n, np.int32)
        self.frame = np.zeros(n, np.int32)   # ALE's episode frame number
        self.valid = np.full(n, self.stack)  # frames of the learner's episode in the stack
        # Whole games (evaluation): FIRE after a lost life, as the classic stack's FireResetEnv
        # does at its EpisodicLifeEnv's resets; else a deterministic policy that never learned
        # to serve (training serves by sampling) waits out the frame limit, as in Breakout.
        action_set = self.ale.ale.get_action_set()
        self.fire = (action_set.index(Action.FIRE) if ale_args["use_fire_reset"]
                     and not episodic_life and Action.FIRE in action_set else None)
        self.fire_next = np.zeros(n, bool)

    def reset(self, seed: int | None) -> np.ndarray:
        seeds = None if seed is None else (seed + np.arange(self.n)) % _SEEDS
        obs, info = self.ale.reset(seed=seeds)
        self.lives, self.frame = info["lives"], info["episode_frame_number"]
        self.valid[:] = self.stack
        return obs

    def recv(self) -> StepResult:
        obs, raw, terminated, truncated, info = self.ale.recv()
        infos: list[dict] = [{} for _ in range(self.n)]
        ended = terminated | truncated  # ALE reset these games
        lost = None
        lives, frame = info["lives"], info["episode_frame_number"]
        if self.episodic_life:
            # A lost life (terminated, the game not reset: fewer lives, frames counted on) ends
            # the learner's episode only.
            lost = terminated & (lives < self.lives) & (lives > 0) & (frame > self.frame)
            ended &= ~lost
        elif self.fire is not None:
            self.fire_next = (lives < self.lives) & ~ended
        self.lives, self.frame = lives, frame
        self.monitor.step(raw, ended, infos)
        if ended.any():  # ALE reset these games and kept their final observations
            final = info["final_obs"]
            for i in np.flatnonzero(ended).tolist():
                infos[i]["final_obs"] = final[i].copy()
        if lost is not None and (lost.any() or (self.valid < self.stack).any()):
            self._hide_previous_life(obs, infos, ended, lost)
        rewards = np.sign(raw).astype(np.float32)  # raw scores are integers: sign = clip to [-1, 1]
        return obs, rewards, terminated, truncated, infos

    def send(self, actions: np.ndarray) -> None:
        # The agent's action is replaced: whole-game play only (fire_next is only set with a FIRE).
        if self.fire is not None and self.fire_next.any():
            actions = np.where(self.fire_next, self.fire, actions)
        self.ale.send(actions)

    def _hide_previous_life(self, obs: np.ndarray, infos: list[dict], ended: np.ndarray,
                            lost: np.ndarray) -> None:
        """Zero the frames of the previous life in the stacks the learner sees (and in final
        observations taken while some were still in view), as a frame stack reset would."""
        pending = self.valid < self.stack
        self.valid[pending] += 1
        for i in np.flatnonzero(pending).tolist():
            stale = self.stack - self.valid[i]
            if ended[i]:  # the game reset: ALE's new stack starts empty, its final one does not
                infos[i]["final_obs"][:stale] = 0
            else:
                obs[i, :stale] = 0
        self.valid[ended] = self.stack
        for i in np.flatnonzero(lost).tolist():
            infos[i]["final_obs"] = obs[i].copy()
            obs[i, :-1] = 0
            self.valid[i] = 1


class AleVecEnv(BatchedVecEnv):
    """``num_envs`` copies of the ALE id ``env_id`` (vector-env contract of ``vec_env.py``).

    ``log_dir``: monitor files ``<first_rank + i>.monitor.csv`` (appended with
    ``monitor_append``); ``env_kwargs``: those of ``SUPPORTED_KWARGS``; ``episodic_life``: a lost
    life ends the learner's episode (training; evaluation plays whole games, FIRE after a lost
    life as the classic stack, where the game has FIRE and ``fire_reset``); ``groups``: blocks of
    envs that ``send``/``recv`` step separately. ``noop_max`` and ``fire_reset`` are ALE's reset.
    """

    kind = "ale"

    def __init__(self, env_id: str, num_envs: int, seed: int, first_rank: int = 0,
                 log_dir: str | None = None, monitor_append: bool = False,
                 env_kwargs: dict | None = None, episodic_life: bool = True,
                 frame_stack: int = 4, groups: int = 1, threads: int = 1,
                 noop_max: int = 30, fire_reset: bool = True) -> None:
        import gymnasium as gym

        register_ale()
        if groups < 1 or num_envs % groups:
            raise ConfigError(f"{num_envs} envs cannot be split into {groups} equal groups")
        ale_args = {**ale_kwargs(gym.spec(env_id), env_kwargs), "stack_num": frame_stack,
                    "noop_max": noop_max, "use_fire_reset": fire_reset}
        self.num_envs, self.num_groups = num_envs, groups
        self._seed: int | None = seed + first_rank
        self._groups, self._monitors = [], []
        size = num_envs // groups
        try:
            for g in range(groups):
                monitor = EpisodeMonitor(size, env_id, log_dir, first_rank + g * size,
                                         monitor_append)
                self._monitors.append(monitor)
                self._groups.append(_Group(size, ale_args, threads, episodic_life, monitor))
        except BaseException:
            self.close()
            raise
        self.observation_space = self._groups[0].ale.single_observation_space
        self.frame_channels = 1 if frame_stack > 1 else None  # grayscale frames, stacked
        self.action_space = self._groups[0].ale.single_action_space
        self._size = size
        self.closed = False

    def group_slice(self, group: int) -> slice:
        """The envs (columns) of ``group``."""
        return slice(group * self._size, (group + 1) * self._size)

    def reset(self) -> np.ndarray:
        """Reset every game (seeded on the first call); returns obs (N, stack, 84, 84) uint8."""
        obs = []
        for g, group in enumerate(self._groups):
            seed = None if self._seed is None else self._seed + g * self._size
            obs.append(group.reset(seed))
        self._seed = None  # later resets continue each env's RNG, as SeedFirstReset
        return obs[0] if len(obs) == 1 else np.concatenate(obs)

    def send(self, actions: np.ndarray, group: int = 0) -> None:
        """Start stepping ``group`` with ``actions`` (its envs' rows); returns at once."""
        actions = np.asarray(actions).reshape(self._size).astype(np.int64, copy=False)
        self._groups[group].send(actions)

    def recv(self, group: int = 0) -> StepResult:
        """Wait for ``group``'s step: obs, rewards (clipped) f32, terminated, truncated, infos."""
        return self._groups[group].recv()

    def step(self, actions: np.ndarray) -> StepResult:
        """Step every env: obs, rewards (clipped) f32, terminated, truncated, infos (numpy)."""
        actions = np.asarray(actions).reshape(self.num_envs)
        for g in range(self.num_groups):
            self.send(actions[self.group_slice(g)], g)
        parts = [self.recv(g) for g in range(self.num_groups)]
        if len(parts) == 1:
            return parts[0]
        obs, rewards, terminated, truncated, infos = zip(*parts)
        return (np.concatenate(obs), np.concatenate(rewards), np.concatenate(terminated),
                np.concatenate(truncated), [info for block in infos for info in block])

    def close(self) -> None:
        for group in self._groups:
            group.ale.close()
        for monitor in self._monitors:
            monitor.close()
        self._groups, self._monitors = [], []
        self.closed = True
