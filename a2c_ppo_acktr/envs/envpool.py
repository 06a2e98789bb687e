"""``EnvpoolVecEnv``: gymnasium's MuJoCo ids in EnvPool's C++ envs (``envpool.make_gymnasium``, the
``.[envpool]`` extra), stepped on its own threads, under our vector-env contract.

EnvPool resets an env on the step *after* its episode ended (gymnasium's next-step mode); this
module resets the ended envs at once through EnvPool's per-env ``reset(env_ids)``, so that the
contract's same-step autoreset holds: ``infos[i]["final_obs"]`` is the real last observation and
``obs[i]`` the next episode's first. It counts the time limit itself, as gymnasium's ``TimeLimit``
(EnvPool calls an episode that ends on its last step truncated only), adds Monitor's episode
statistics and files (``EpisodeMonitor``) and seeds env i with ``seed + first_rank + i`` (EnvPool
seeds env i of a pool with ``seed + i``).

What it is not: the same simulator build. EnvPool links its own MuJoCo (3.6 in envpool 1.2.5),
gymnasium the installed ``mujoco``; from the same state and action they agree to within about 1e-6
(tests/envs/test_envpool.py states the tolerance per id), and chaotic envs (HalfCheetah, Ant,
Humanoid) then drift apart over tens of steps as any two builds do. Its resets draw from its own
RNG, not numpy's: the same seed gives other initial states than the gymnasium env's. Its envs'
states cannot be read, so a run on it resumes inexactly (one line, as ``ale``). Hence ``auto``
never picks it: docs/benchmarks.md, "EnvPool".
"""
from typing import Any

import gymnasium as gym
import numpy as np

from a2c_ppo_acktr.envs.blocks import check_batch
from a2c_ppo_acktr.envs.monitor import EpisodeMonitor
from a2c_ppo_acktr.envs.vec_env import BatchedVecEnv, StepResult, space_shape
from a2c_ppo_acktr.errors import ConfigError

# The ids whose EnvPool env was tested step by step against gymnasium's of the same id and version
# (tests/envs/test_envpool.py); EnvPool implements each with that version's options (v4's healthy
# reward on the last step, v5's Walker2d feet, ...).
ENVPOOL_IDS = tuple(f"{name}-{version}" for name in (
    "Ant", "HalfCheetah", "Hopper", "Humanoid", "InvertedPendulum", "Swimmer", "Walker2d")
    for version in ("v4", "v5"))
# gym.make kwargs that EnvPool takes under the same name and meaning, where the id has them.
SUPPORTED_KWARGS = ("max_episode_steps", "reset_noise_scale", "ctrl_cost_weight",
                    "forward_reward_weight", "healthy_reward", "terminate_when_unhealthy")
# gymnasium's v5 switch for the contact forces in the observation (the tuned Ant and Humanoid
# recipes drop them). EnvPool computes them always, last, as gymnasium does; this module cuts them
# off, so that the reward keeps v5's contact cost, which EnvPool drops with its own switch.
CONTACT_FORCES = "include_cfrc_ext_in_observation"
CONTACT_IDS = ("Ant-v5", "Humanoid-v5")
UNSAVEABLE = "EnvPool cannot save or restore its envs"
_NO_LIMIT = 2 ** 31 - 1  # EnvPool's time limit, an int32: ours counts the steps


def envpool_available() -> bool:
    """Whether ``envpool`` (the ``.[envpool]`` extra) is installed."""
    try:
        import envpool  # noqa: F401
    except ImportError:
        return False
    return True


def envpool_kwargs(env_id: str, env_kwargs: dict | None = None) -> dict:
    """EnvPool's config for ``env_id`` and the user's ``--env-kwargs``; a one-line
    ``ConfigError`` for an id it does not run or a kwarg it does not take."""
    if env_id not in ENVPOOL_IDS:
        raise ConfigError(f"--vec-env envpool runs {', '.join(ENVPOOL_IDS)}; not {env_id}")
    if not envpool_available():
        raise ConfigError("--vec-env envpool needs envpool: pip install -e '.[envpool]'")
    import envpool

    config = set(envpool.make_spec(env_id).config._fields)
    takes = [k for k in SUPPORTED_KWARGS if k in config]
    takes += [CONTACT_FORCES] if env_id in CONTACT_IDS else []
    unknown = sorted(set(env_kwargs or ()) - set(takes))
    if unknown:
        raise ConfigError(f"--vec-env envpool takes for {env_id} the env kwargs {', '.join(takes)}; "
                          f"not {', '.join(unknown)} (use --vec-env shmem or dummy for those)")
    contact = (env_kwargs or {}).get(CONTACT_FORCES, True)
    if not isinstance(contact, bool):
        raise ConfigError(f"--env-kwargs {CONTACT_FORCES} takes True or False; not {contact!r}")
    return dict(env_kwargs or {})


class EnvpoolVecEnv(BatchedVecEnv):
    """``num_envs`` copies of the MuJoCo id ``env_id`` in one EnvPool (contract of
    ``vec_env.py``). ``log_dir``: monitor files ``<first_rank + i>.monitor.csv`` (appended with
    ``monitor_append``); ``env_kwargs``: those of ``SUPPORTED_KWARGS`` the id has; ``threads``:
    EnvPool's stepping threads (None: one per env, up to the CPUs)."""

    kind = "envpool"
    unsaveable = UNSAVEABLE

    def __init__(self, env_id: str, num_envs: int, seed: int, first_rank: int = 0,
                 log_dir: str | None = None, monitor_append: bool = False,
                 env_kwargs: dict | None = None, threads: int | None = None) -> None:
        import envpool

        from a2c_ppo_acktr.envs.vec_env import num_cpus

        kwargs = envpool_kwargs(env_id, env_kwargs)
        contact = kwargs.pop(CONTACT_FORCES, True)
        threads = threads or max(1, min(num_envs, num_cpus()))
        # The time limit is ours (module docstring): EnvPool's never comes.
        self.max_steps = kwargs.pop("max_episode_steps", gym.spec(env_id).max_episode_steps)
        kwargs["max_episode_steps"] = _NO_LIMIT
        try:  # EnvPool seeds env i with seed + i: ours is seed + first_rank + i.
            self.pool: Any = envpool.make_gymnasium(env_id, num_envs=num_envs,
                                                    seed=seed + first_rank, num_threads=threads,
                                                    **kwargs)
        except (RuntimeError, ValueError, TypeError) as e:
            raise ConfigError(f"EnvPool rejects {env_id} with {kwargs}: "
                              f"{(str(e).splitlines() or [type(e).__name__])[0]}") from None
        self.num_envs, self.env_id = num_envs, env_id
        # gymnasium's spaces for the id (EnvPool's action Box is float64, gymnasium's float32), so
        # that a checkpoint of either backend loads on the other.
        self.observation_space, self.action_space = _gym_spaces(
            env_id, {} if contact else {CONTACT_FORCES: False})
        # The observation's first entries kept: all, or those before the contact forces.
        self._keep = None if contact else space_shape(self.observation_space)[0]
        self.monitor = EpisodeMonitor(num_envs, env_id, log_dir, first_rank, monitor_append)
        self._ids = np.arange(num_envs, dtype=np.int32)
        self._elapsed = np.zeros(num_envs, np.int64)

    def reset(self) -> np.ndarray:
        """Reset every env; returns obs (N, *obs_shape). Envs are seeded once, when built: a
        second reset continues each env's RNG, as ``SeedFirstReset`` does."""
        obs, info = self.pool.reset()
        obs = self._in_order(obs, info["env_id"])
        check_batch(self.env_id, self.kind, "reset", obs, self.num_envs, self.observation_space)
        self.monitor.returns[:], self.monitor.lengths[:] = 0.0, 0
        self._elapsed[:] = 0
        return obs

    def step(self, actions: np.ndarray) -> StepResult:
        """Step every env: obs, rewards f32, terminated, truncated, infos (numpy)."""
        actions = np.asarray(actions, np.float64).reshape(self.num_envs,
                                                          *space_shape(self.action_space))
        obs, rewards, terminated, _, info = self.pool.step(actions, self._ids)
        obs = self._in_order(obs, info["env_id"])
        self._elapsed += 1
        truncated = self._elapsed >= self.max_steps if self.max_steps else np.zeros_like(terminated)
        rewards = np.asarray(rewards, np.float32)
        infos: list[dict] = [{} for _ in range(self.num_envs)]
        ended = terminated | truncated
        self.monitor.step(rewards, ended, infos)
        if ended.any():
            done = np.flatnonzero(ended)
            for i in done.tolist():
                infos[i]["final_obs"] = obs[i].copy()
            self._elapsed[done] = 0
            first, reset_info = self.pool.reset(done.astype(np.int32))
            # EnvPool answers in its own order: env_id says
            obs[reset_info["env_id"]] = first[:, :self._keep]
        return obs, rewards, terminated, truncated, infos

    def _in_order(self, obs: np.ndarray, env_ids: np.ndarray) -> np.ndarray:
        obs = obs[:, :self._keep]
        if np.array_equal(env_ids, self._ids):  # sync mode answers in order
            return np.array(obs)  # ours: EnvPool may reuse its buffer
        out = np.empty_like(obs)
        out[env_ids] = obs
        return out

    def close(self) -> None:
        self.pool.close()
        self.monitor.close()


def _gym_spaces(env_id: str, kwargs: dict) -> tuple[gym.Space, gym.Space]:
    """The observation and action spaces of gymnasium's ``env_id`` built with ``kwargs``."""
    env = gym.make(env_id, **kwargs)
    env.close()
    return env.observation_space, env.action_space
