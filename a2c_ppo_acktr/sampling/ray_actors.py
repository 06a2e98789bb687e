"""Ray rollout workers: N actors sample with the same ``collect_rollout``; the learner stacks them.

Each update the learner publishes one snapshot (``ray.put``: policy weights + normalization
statistics); each of the N ``RolloutWorker`` actors loads it, fills its own ``RolloutStorage`` of
``num_processes`` columns with ``collect_rollout`` and returns the tensors. The learner's
``WorkerGroup.collect`` (``ray_learner.py``) writes worker w's tensors into columns
``w * P .. (w + 1) * P - 1`` of its storage, so the update (A2C, PPO, ACKTR, recurrent) sees one
rollout of ``N * P`` envs and is unchanged. Env ``i`` of worker ``w`` has rank ``w * P + i``; the
workers' normalizer deltas are merged (``envs.merge_normalizer``); a failed worker is restarted
and re-samples, unless its failure keeps coming (``ray_faults.py``). These decisions:
docs/scale-out.md, "Ray rollout workers on one machine".
"""
import logging
import os
import sys
import sysconfig
import time
import types
import zlib
from collections.abc import Mapping
from typing import Any, NoReturn, Optional

import gymnasium as gym
import torch

from a2c_ppo_acktr.config import WorkerConfig
from a2c_ppo_acktr.envs import TorchVecEnv, frame_channels, get_vec_normalize, make_vec_envs, normalizer_delta
from a2c_ppo_acktr.envs.processes import signals_stay_here
from a2c_ppo_acktr.envs.vec_env import space_shape
from a2c_ppo_acktr.evaluation import evaluate, evaluation_row, final_returns
from a2c_ppo_acktr.model import policy_for
from a2c_ppo_acktr.rollout import collect_rollout
from a2c_ppo_acktr.sampling.reaper import Reaper
from a2c_ppo_acktr.storage import RolloutStorage

# The repository (a2c_ppo_acktr/sampling/ -> ..): uploaded to a Ray cluster, the workers' path
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
UPLOAD_EXCLUDES = [".git", ".venv", ".ci-venv", "logs", "trained_models", "runs", "tmp", "*.pt",
                   "__pycache__"]
START_TIMEOUT = 300  # s for a worker to build its envs (or for the cluster to find it a CPU)
# What a worker sends back: every storage tensor but the returns, which the learner computes.
FIELDS = ("obs", "recurrent_hidden_states", "actions", "action_log_probs", "value_preds",
          "rewards", "masks", "bad_masks", "bootstrap_values")


def import_ray(local: bool) -> types.ModuleType:
    """``import ray``; a local Ray then advertises and binds only 127.0.0.1 (see README)."""
    if local:
        # Read by Ray when it is imported: node address = loopback instead of the address of the
        # default route, and its servers listen on 127.0.0.1 only.
        os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    try:
        import ray
    except ImportError:
        raise ImportError("--num-workers needs Ray, which is not installed here: "
                          "pip install -r requirements-ray.txt") from None
    return ray


def local_modules(env_name: str) -> list[str]:
    """The file or package of a ``module:EnvId`` env's module (imported already) where it is
    neither in this repository nor installed, e.g. ``mymod.py`` in the working directory: a
    cluster's nodes get it from Ray (``py_modules``), as they get the repository."""
    module = env_name.rpartition(":")[0]
    path = getattr(sys.modules.get(module.partition(".")[0]), "__file__", None) if module else None
    if path is None:
        return []
    path = os.path.abspath(path)
    if os.path.basename(path) == "__init__.py":
        path = os.path.dirname(path)
    installed = {os.path.abspath(sysconfig.get_paths()[k]) for k in ("stdlib", "purelib", "platlib")}
    if any(path.startswith(root + os.sep) for root in [ROOT, *installed]):
        return []
    return [path]


def _not_token_default(record: logging.LogRecord) -> bool:
    """Not Ray's warning that a local Ray has token authentication on by default (it listens
    on 127.0.0.1 only): for the user, nothing to do."""
    return not record.getMessage().startswith("Token authentication is enabled")


def start_ray(num_workers: int, address: Optional[str], modules: Optional[list[str]] = None
              ) -> tuple[types.ModuleType, bool, Optional[Reaper]]:
    """Ray for ``num_workers`` actors: a local one started here (``address`` None) or the
    cluster at ``address``, joined, its nodes given this repository and ``modules`` (paths,
    ``local_modules``); -> (ray, whether this process started it and shuts it down, for a
    local Ray the ``Reaper`` that ends its processes with this one). Ray's start-up lines are
    not shown (``logging_level``), nor the token note of a local Ray.
    """
    ray = import_ray(local=address is None)
    if ray.is_initialized():
        return ray, False, None
    if address is None:
        logging.getLogger("ray._private.authentication.authentication_token_setup").addFilter(
            _not_token_default)
        with signals_stay_here():  # Ray's head processes are in our process group
            ray.init(num_cpus=max(os.cpu_count() or 1, num_workers), include_dashboard=False,
                     log_to_driver=False, logging_level=logging.WARNING)
            reaper = Reaper()
        return ray, True, reaper
    try:  # the cluster's nodes import this repository from the copy Ray uploads
        ray.init(address=address, log_to_driver=False, logging_level=logging.WARNING,
                 runtime_env={"working_dir": ROOT, "excludes": UPLOAD_EXCLUDES,
                              **({"py_modules": modules} if modules else {})})
    except (ConnectionError, RuntimeError) as e:
        cause = str(e.__cause__ or e).strip().splitlines()[0]
        raise ValueError(f"--ray-address {address}: cannot join the Ray cluster "
                         f"({cause[:200]})") from None
    return ray, True, None


class RolloutWorker:
    """One Ray actor: ``num_processes`` envs and a CPU copy of the policy (``Policy``)."""

    def __init__(self, index: int, cfg: WorkerConfig) -> None:
        self.index, self.cfg = index, cfg
        self.envs: Optional[TorchVecEnv] = None
        torch.set_num_threads(1)

    def pid(self) -> int:
        return os.getpid()

    def exit(self) -> NoReturn:
        """End this process as a crash would: Ray restarts the actor (``max_restarts``)."""
        os._exit(1)

    def start(self, seed: int, torch_seed: int, log_dir: Optional[str],
              monitor_append: bool) -> dict[str, Any]:
        """Build fresh envs (ranks ``index * P ..``) and policy; -> first observations, spaces."""
        env, sampling = self.cfg.env, self.cfg.sampling
        if self.envs is not None:
            self.envs.close()
        if log_dir is not None:
            os.makedirs(log_dir, exist_ok=True)  # on another node it may not exist yet
        torch.manual_seed(torch_seed)
        self.envs = envs = make_vec_envs(env.env_name, seed, env.num_processes, self.cfg.gamma,
                                         log_dir, "cpu", False, vec_env=env.vec_env,
                                         monitor_append=monitor_append,
                                         first_rank=self.index * env.num_processes,
                                         env_timeout=env.env_timeout, **env.options)
        space = envs.observation_space
        self.policy = policy_for(space, envs.action_space, self.cfg.policy)
        obs = envs.reset()
        self.rollouts = RolloutStorage(sampling.num_steps, env.num_processes, space_shape(space),
                                       envs.action_space,
                                       self.policy.recurrent_hidden_state_size, obs_dtype=obs.dtype)
        self.rollouts.obs[0].copy_(obs)
        envs.pause()  # real-time envs hold still until the first snapshot arrives
        self.timeouts: list[int | None] = [None] * env.num_processes
        vec_norm = get_vec_normalize(envs)
        return {"obs": obs, "observation_space": space, "action_space": envs.action_space,
                "obs_rms": vec_norm.state_dict() if vec_norm is not None else None,
                "benchmarks": envs.benchmarks()}

    def sample(self, snapshot: dict[str, Any]) -> dict[str, Any]:
        """Load the learner's ``snapshot`` and collect one rollout -> dict of tensors and stats."""
        assert self.envs is not None, "sample() before start()"
        t0 = time.perf_counter()
        self.policy.load_state_dict(snapshot["weights"])
        vec_norm = get_vec_normalize(self.envs)
        if vec_norm is not None:
            vec_norm.load_state_dict(snapshot["obs_rms"])
        episode_rewards: list[float] = []
        t1 = time.perf_counter()
        collect_rollout(self.envs, self.policy, self.rollouts, episode_rewards,
                        self.cfg.use_proper_time_limits, self.timeouts)
        t2 = time.perf_counter()
        if not self.cfg.sampling.async_rollouts:
            self.envs.pause()  # real-time envs hold still while the learner updates
        out: dict[str, Any] = {name: getattr(self.rollouts, name).clone() for name in FIELDS}
        if self.cfg.sampling.check_rollouts:
            out["checksums"] = checksums(out)
        pack_frames(out, frame_channels(self.envs))
        out.update(episode_rewards=episode_rewards, timeouts=list(self.timeouts),
                   benchmarks=self.envs.benchmarks(),
                   version=snapshot["version"],
                   seconds={"load": t1 - t0, "sample": t2 - t1, "pack": time.perf_counter() - t2},
                   obs_rms_delta=(normalizer_delta(snapshot["obs_rms"], vec_norm.state_dict())
                                  if vec_norm is not None else {}))
        self.rollouts.after_update()
        return out


def pack_frames(rollout: dict[str, Any], channels: Optional[int]) -> None:
    """Frame stacks -> the first stack and each step's new frame only (in place; None: no stack).

    Step t + 1's stack is step t's shifted by one frame plus the new one, or zeros plus the new one
    where an episode ended (masks[t + 1] = 0), as ``VecPyTorchFrameStack`` and ``AleVecEnv`` build
    it (``envs.frame_channels``); so 4 stacked Atari frames cross the network as 1 (tmrl's sample
    compression).
    """
    if channels is None:
        return
    obs = rollout.pop("obs")                              # (T + 1, P, nstack * C, H, W)
    rollout["obs0"] = obs[0]                              # (P, nstack * C, H, W)
    rollout["frames"] = obs[1:, :, -channels:].clone()    # (T, P, C, H, W)


def unpack_frames(rollout: Mapping[str, Any]) -> torch.Tensor:
    """The full observations (T + 1, P, ...) of a rollout that ``pack_frames`` may have packed."""
    if "frames" not in rollout:
        return rollout["obs"]
    frames, masks = rollout["frames"], rollout["masks"]
    c = frames.shape[2]
    obs = torch.empty((frames.shape[0] + 1, *rollout["obs0"].shape), dtype=frames.dtype)
    obs[0] = rollout["obs0"]
    for t in range(frames.shape[0]):
        obs[t + 1, :, :-c] = obs[t, :, c:] * masks[t + 1].view(-1, *[1] * (obs.dim() - 2)).to(
            obs.dtype)
        obs[t + 1, :, -c:] = frames[t]
    return obs


def checksums(rollout: Mapping[str, Any]) -> dict[str, int]:
    """CRC32 of each rollout tensor's bytes (``--check-rollouts``: tmrl's "CRC debugging")."""
    return {name: zlib.crc32(rollout[name].contiguous().numpy().tobytes()) for name in FIELDS}


class Evaluator:
    """A Ray actor running ``evaluation.evaluate`` on snapshots, off the learner's critical path."""

    def __init__(self, cfg: WorkerConfig, observation_space: gym.Space,
                 action_space: gym.Space, eval_log_dir: str) -> None:
        torch.set_num_threads(1)
        self.env, self.eval_log_dir = cfg.env, eval_log_dir
        self.policy = policy_for(observation_space, action_space, cfg.policy)

    def evaluate(self, snapshot: dict[str, Any], update: int, env_steps: int) -> dict:
        os.makedirs(self.eval_log_dir, exist_ok=True)
        self.policy.load_state_dict(snapshot["weights"])
        returns = evaluate(self.policy, snapshot["obs_rms"], self.env.env_name, self.env.seed,
                           self.env.num_processes, self.eval_log_dir, "cpu",
                           **self.env.options)
        return evaluation_row(update, env_steps, returns)

    def final(self, snapshot: dict[str, Any], episodes: int) -> list[float]:
        """The run's final evaluation's returns (``final_returns``), here where the workers'
        envs can be made; the learner writes them down."""
        self.policy.load_state_dict(snapshot["weights"])
        return final_returns(self.policy, snapshot["obs_rms"], episodes, self.env.env_name,
                             self.env.seed, "cpu", **self.env.options)
