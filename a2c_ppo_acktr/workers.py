"""Ray rollout workers: N actors sample with the same ``collect_rollout``; the learner stacks them.

Each update the learner publishes one snapshot (``ray.put``: policy weights + normalization
statistics); each of the N ``RolloutWorker`` actors loads it, fills its own ``RolloutStorage`` of
``num_processes`` columns with ``collect_rollout`` and returns the tensors. ``WorkerGroup.collect``
writes worker w's tensors into columns ``w * P .. (w + 1) * P - 1`` of the learner's storage, so
the update (A2C, PPO, ACKTR, recurrent) sees one rollout of ``N * P`` envs and is unchanged.

Decisions (README "Scale-out" has the user's view):

- Normalization statistics: every worker starts each rollout from the learner's statistics,
  updates its own copy while it steps, and returns what it saw as moments
  (``envs.normalizer_delta``); the learner merges all deltas (``envs.merge_normalizer``) and
  ships the result with the next weights. The learner's statistics are those of one normalizer
  fed all N * P envs, and they are what checkpoints and evaluation use.
- Episode logs: env ``i`` of worker ``w`` has rank ``w * P + i`` (seed ``seed + rank``), and its
  monitor file is ``<log-dir>/<rank>.monitor.csv``, written by the worker: on one machine or a
  shared path the log dir holds the files of one big run. The finished episodes' returns also come
  back with each rollout for the learner's log.
- Faults: a worker that dies (process killed, node lost) or raises (an env crashed) is restarted
  by Ray in a fresh process (``max_restarts``), rebuilds its envs with new seeds and re-samples its
  share of the update with the same weights; the other workers' rollouts are kept. The learner
  prints what happened and appends it to ``<log-dir>/workers.log``. A worker failing
  ``MAX_FAILURES`` times in a row for one update stops the run with that message.
- Asynchronous mode: a worker is handed its next rollout as soon as it returns one, with the
  newest weights the learner has, so it samples while the learner updates; the rollout used in
  update j was sampled with the weights of update j - 1 (lag 1; the first: 0), logged.
"""
import os
import time
import zlib

import numpy as np
import torch

from a2c_ppo_acktr.checkpoint import run_paths
from a2c_ppo_acktr.envs import (
    VecNormalize,
    check_env_kwargs,
    frame_channels,
    get_vec_normalize,
    make_env,
    make_vec_envs,
    merge_normalizer,
    normalizer_delta,
)
from a2c_ppo_acktr.evaluation import evaluate
from a2c_ppo_acktr.model import Policy, policy_kwargs
from a2c_ppo_acktr.rollout import collect_rollout
from a2c_ppo_acktr.storage import RolloutStorage

MAX_FAILURES = 3
START_TIMEOUT = 300  # s for a worker to build its envs (or for the cluster to find it a CPU)
# What a worker sends back: every storage tensor but the returns, which the learner computes.
FIELDS = ("obs", "recurrent_hidden_states", "actions", "action_log_probs", "value_preds",
          "rewards", "masks", "bad_masks", "bootstrap_values")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def import_ray(local):
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


class RolloutWorker:
    """One Ray actor: ``num_processes`` envs and a CPU copy of the policy (``Policy``)."""

    def __init__(self, index, args):
        self.index, self.args = index, args
        self.envs = None
        torch.set_num_threads(1)

    def pid(self):
        return os.getpid()

    def exit(self):
        """End this process as a crash would: Ray restarts the actor (``max_restarts``)."""
        os._exit(1)

    def start(self, seed, torch_seed, log_dir, monitor_append):
        """Build fresh envs (ranks ``index * P ..``) and policy; -> first observations, spaces."""
        a = self.args
        if self.envs is not None:
            self.envs.close()
        if log_dir is not None:
            os.makedirs(log_dir, exist_ok=True)  # on another node it may not exist yet
        torch.manual_seed(torch_seed)
        self.envs = make_vec_envs(a.env_name, seed, a.num_processes, a.gamma, log_dir, "cpu", False,
                                  vec_env=a.vec_env, monitor_append=monitor_append,
                                  env_kwargs=a.env_kwargs, first_rank=self.index * a.num_processes)
        space = self.envs.observation_space
        self.policy = Policy(space.shape, self.envs.action_space, **policy_kwargs(a))
        obs = self.envs.reset()
        self.rollouts = RolloutStorage(a.num_steps, a.num_processes, space.shape,
                                       self.envs.action_space,
                                       self.policy.recurrent_hidden_state_size, obs_dtype=obs.dtype)
        self.rollouts.obs[0].copy_(obs)
        self.envs.pause()  # real-time envs hold still until the first snapshot arrives
        self.timeouts = [None] * a.num_processes
        vec_norm = get_vec_normalize(self.envs)
        return {"obs": obs, "observation_space": space, "action_space": self.envs.action_space,
                "obs_rms": vec_norm.state_dict() if vec_norm is not None else None,
                "benchmarks": self.envs.benchmarks()}

    def sample(self, snapshot):
        """Load the learner's ``snapshot`` and collect one rollout -> dict of tensors and stats."""
        t0 = time.perf_counter()
        self.policy.load_state_dict(snapshot["weights"])
        vec_norm = get_vec_normalize(self.envs)
        if vec_norm is not None:
            vec_norm.load_state_dict(snapshot["obs_rms"])
        episode_rewards = []
        t1 = time.perf_counter()
        collect_rollout(self.envs, self.policy, self.rollouts, episode_rewards,
                        self.args.use_proper_time_limits, self.timeouts)
        t2 = time.perf_counter()
        if not self.args.async_rollouts:
            self.envs.pause()  # real-time envs hold still while the learner updates
        out = {name: getattr(self.rollouts, name).clone() for name in FIELDS}
        if self.args.check_rollouts:
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


def pack_frames(rollout, channels):
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


def unpack_frames(rollout):
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


def checksums(rollout):
    """CRC32 of each rollout tensor's bytes (``--check-rollouts``: tmrl's "CRC debugging")."""
    return {name: zlib.crc32(rollout[name].contiguous().numpy().tobytes()) for name in FIELDS}


class Evaluator:
    """A Ray actor running ``evaluation.evaluate`` on snapshots, off the learner's critical path."""

    def __init__(self, args, observation_space, action_space, eval_log_dir):
        torch.set_num_threads(1)
        self.args, self.eval_log_dir = args, eval_log_dir
        self.policy = Policy(observation_space.shape, action_space, **policy_kwargs(args))

    def evaluate(self, snapshot, update, env_steps):
        os.makedirs(self.eval_log_dir, exist_ok=True)
        self.policy.load_state_dict(snapshot["weights"])
        returns = evaluate(self.policy, snapshot["obs_rms"], self.args.env_name, self.args.seed,
                           self.args.num_processes, self.eval_log_dir, "cpu",
                           env_kwargs=self.args.env_kwargs)
        return {"update": update, "timesteps": env_steps, "episodes": len(returns),
                "mean_return": float(np.mean(returns)), "std_return": float(np.std(returns))}


class _Spaces:
    """Stands in for the vector env under the learner's VecNormalize, which only keeps statistics."""

    num_envs = 0

    def __init__(self, observation_space, action_space):
        self.observation_space, self.action_space = observation_space, action_space


class WorkerGroup:
    """N Ray rollout workers, seen by ``main.py`` as one vector env of ``N * num_processes`` envs.

    It offers what the loop uses of ``make_vec_envs``'s result — ``observation_space``,
    ``action_space``, ``num_envs``, ``reset``, ``pause``, ``close``, and the learner's copy of the
    normalization statistics as a ``VecNormalize`` in ``.venv`` (so ``get_vec_normalize``,
    checkpoints, resume and evaluation work as before) — and ``collect`` in place of
    ``collect_rollout``.
    """

    def __init__(self, args, log_dir, env_steps, resumed):
        # A bad env id or env kwargs: a one-line ValueError here, before Ray starts.
        make_env(args.env_name, 0, 0, None, False)
        if args.env_kwargs:
            check_env_kwargs(args.env_name, args.env_kwargs)
        ray = self.ray = import_ray(local=args.ray_address is None)
        self.own_ray = not ray.is_initialized()
        if self.own_ray:
            if args.ray_address is None:
                ray.init(num_cpus=max(os.cpu_count() or 1, args.num_workers),
                         include_dashboard=False, log_to_driver=False)
            else:
                try:  # the cluster's nodes import this repository from the copy Ray uploads
                    ray.init(address=args.ray_address, log_to_driver=False,
                             runtime_env={"working_dir": ROOT, "excludes": _UPLOAD_EXCLUDES})
                except (ConnectionError, RuntimeError) as e:
                    cause = str(e.__cause__ or e).strip().splitlines()[0]
                    raise ValueError(f"--ray-address {args.ray_address}: cannot join the Ray "
                                     f"cluster ({cause[:200]})") from None
        # Absolute: workers on other nodes run in the directory Ray unpacked the repository to.
        self.args, self.log_dir = args, os.path.abspath(log_dir)
        self.num_workers, self.P = args.num_workers, args.num_processes
        self.num_envs = self.num_workers * self.P
        self.steps_per_update = args.num_steps * self.num_envs
        self.version = env_steps // self.steps_per_update  # the update the next snapshot is for
        self.seed_base = args.seed + env_steps
        self.events = open(os.path.join(self.log_dir, "workers.log"), "a")
        self.evaluator, self._evaluations = None, []  # Evaluator actor, ObjectRefs of its rows
        self.policy_lag = 0  # updates between the weights that sampled a rollout and the learner's
        self._costs, self._updates_timed = {}, 0
        actor = ray.remote(num_cpus=1, max_restarts=-1, max_task_retries=0)(RolloutWorker)
        self.workers = [actor.remote(w, args) for w in range(self.num_workers)]
        try:
            info = ray.get([self._start(w, monitor_append=resumed)
                            for w in range(self.num_workers)], timeout=START_TIMEOUT)
        except ray.exceptions.GetTimeoutError:
            self.close()
            raise RuntimeError(f"{self.num_workers} Ray workers did not start within "
                               f"{START_TIMEOUT} s: too few free CPUs in the cluster "
                               f"({ray.available_resources().get('CPU', 0)}), or they crash on "
                               "start (see Ray's logs)") from None
        self._first_obs = torch.cat([i["obs"] for i in info])
        self.observation_space = info[0]["observation_space"]
        self.action_space = info[0]["action_space"]
        self.venv = None
        if info[0]["obs_rms"] is not None:
            self.venv = VecNormalize(_Spaces(self.observation_space, self.action_space),
                                     gamma=args.gamma)
            fresh = self.venv.state_dict()  # the same as each worker's before its envs' reset
            self.venv.load_state_dict(merge_normalizer(
                fresh, [normalizer_delta(fresh, i["obs_rms"]) for i in info]))
        self._benchmarks = [b for i in info for b in i["benchmarks"]]
        self.pids = ray.get([w.pid.remote() for w in self.workers])
        self._in_flight = {}  # async mode: worker index -> ObjectRef of its next rollout
        self.log_event(f"{self.num_workers} Ray rollout workers x {self.P} envs (pids "
                       f"{', '.join(map(str, self.pids))}); this node's Ray address "
                       f"{ray.util.get_node_ip_address()}", echo=False)

    def _start(self, w, monitor_append):
        # Env seeds seed + rank as make_vec_envs gives them; worker w's sampling RNG seed + w
        # (worker 0 of a new run then samples exactly as main.py does without workers).
        return self.workers[w].start.remote(self.seed_base, self.seed_base + w, self.log_dir,
                                            monitor_append)

    def log_event(self, message, echo=True):
        line = f"{time.strftime('%Y-%m-%d %H:%M:%S')} update {self.version}: {message}"
        if echo:
            print(line, flush=True)
        self.events.write(line + "\n")
        self.events.flush()

    def reset(self):
        """The workers' first observations (N * P, *obs_shape): they reset their envs on start."""
        return self._first_obs

    def pause(self):
        """Workers pause their own envs after each rollout (sync mode)."""

    def benchmarks(self):
        """Per env: real-time timing statistics as of its worker's last rollout, or None."""
        return list(self._benchmarks)

    def snapshot(self, actor_critic):
        """What every worker loads before sampling: one object in Ray's store per update."""
        vec_norm = self.venv
        return self.ray.put({
            "weights": {k: v.detach().cpu() for k, v in actor_critic.state_dict().items()},
            "obs_rms": vec_norm.state_dict() if vec_norm is not None else None,
            "version": self.version})

    def collect(self, actor_critic, rollouts, episode_rewards, use_proper_time_limits=None,
                timeouts=None):
        """Fill ``rollouts`` (N * P columns) from the workers; the same contract as
        ``collect_rollout`` (``use_proper_time_limits`` is the workers' own, from ``args``)."""
        t0 = time.perf_counter()
        snapshot = self.snapshot(actor_critic)
        t1 = time.perf_counter()
        if self.args.async_rollouts:
            refs = {w: self._in_flight[w] if w in self._in_flight
                    else self.workers[w].sample.remote(snapshot) for w in range(self.num_workers)}
        else:
            refs = {w: self.workers[w].sample.remote(snapshot) for w in range(self.num_workers)}
        results = self._gather(refs, snapshot)
        if self.args.async_rollouts:  # next rollouts start now, while the learner updates
            self._in_flight = {w: self.workers[w].sample.remote(snapshot)
                               for w in range(self.num_workers)}
        t2 = time.perf_counter()
        payload = sum(v.nbytes for r in results for v in r.values() if isinstance(v, torch.Tensor))

        deltas = []
        for w, r in enumerate(results):
            cols = slice(w * self.P, (w + 1) * self.P)
            r["obs"] = unpack_frames(r)
            if "checksums" in r and checksums(r) != r["checksums"]:
                raise RuntimeError(f"--check-rollouts: the rollout of worker {w} for update "
                                   f"{self.version} differs from what the worker saw: "
                                   f"{[k for k, v in checksums(r).items() if v != r['checksums'][k]]}")
            for name in FIELDS:
                getattr(rollouts, name)[:, cols].copy_(r[name])
            episode_rewards.extend(r["episode_rewards"])
            if timeouts is not None:
                timeouts[cols] = r["timeouts"]
            deltas.append(r["obs_rms_delta"])
            self._benchmarks[cols] = r["benchmarks"]
        if self.venv is not None:
            self.venv.load_state_dict(merge_normalizer(self.venv.state_dict(), deltas))
        self.policy_lag = self.version - min(r["version"] for r in results)
        self.version += 1
        self._time({"publish": t1 - t0, "wait": t2 - t1, "stack": time.perf_counter() - t2,
                    **{k: np.mean([r["seconds"][k] for r in results]) for k in results[0]["seconds"]},
                    "bytes per env step": payload / self.steps_per_update})

    def _time(self, costs):
        """Running sums of the per-update costs, summarised in workers.log on close."""
        self._costs = {k: self._costs.get(k, 0.0) + v for k, v in costs.items()}
        self._updates_timed += 1

    def cost_summary(self):
        """Mean per-update costs: ms (publish: ray.put of the snapshot; load / sample / pack: in
        a worker; wait: the learner for the rollouts; stack: unpack, copy, merge) and payload size."""
        n = max(self._updates_timed, 1)
        return {k: v / n * (1 if k == "bytes per env step" else 1000) for k, v in self._costs.items()}

    def _gather(self, refs, snapshot):
        """ray.get the rollouts of ``refs`` (worker -> ObjectRef); restart and re-sample failures."""
        ray = self.ray
        results, failures = [None] * self.num_workers, [0] * self.num_workers
        pending = {ref: w for w, ref in refs.items()}
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1)
            w = pending.pop(ready[0])
            try:
                results[w] = ray.get(ready[0])
            except (ray.exceptions.RayActorError, ray.exceptions.RayTaskError,
                    ray.exceptions.ActorUnavailableError) as e:
                failures[w] += 1
                self._restart(w, e, failures[w])
                pending[self.workers[w].sample.remote(snapshot)] = w
        return results

    def _restart(self, w, error, attempt):
        ray = self.ray
        what = str(error).strip().splitlines()
        what = f"{type(error).__name__}: {what[-1] if what else ''}"[:300]
        if attempt > MAX_FAILURES:
            self.log_event(f"worker {w} failed {attempt} times in a row ({what}); giving up")
            raise RuntimeError(f"Ray rollout worker {w} failed {attempt} times in a row: {what}")
        if isinstance(error, ray.exceptions.RayTaskError):
            # A worker that raised is still alive with broken envs: a fresh process is simplest.
            # Not ray.kill(no_restart=False): it returns before the process is gone, so the
            # start below may still run in the old process, which then dies with the envs it
            # built (and the next call fails with ActorUnavailableError). This call fails only
            # once the process is gone, so every later call reaches the restarted one.
            try:
                ray.get(self.workers[w].exit.remote())
            except ray.exceptions.RayActorError:  # ActorDiedError, ActorUnavailableError
                pass
        # Otherwise the process is already gone and Ray is restarting the actor: a ray.kill now
        # could end the fresh process too, after the start below ran in it (the same race).
        self.seed_base += 10_000  # envs of a restarted worker do not replay old episodes
        deadline = time.time() + START_TIMEOUT
        while True:
            try:
                ray.get(self._start(w, monitor_append=True), timeout=START_TIMEOUT)
                break
            except (ray.exceptions.RayActorError, ray.exceptions.ActorUnavailableError):
                if time.time() > deadline:
                    raise RuntimeError(f"Ray rollout worker {w} did not come back within "
                                       f"{START_TIMEOUT} s of failing ({what})") from None
                time.sleep(0.1)  # still restarting
        self.pids[w] = ray.get(self.workers[w].pid.remote())
        self.log_event(f"worker {w} failed ({what}); restarted by Ray as pid {self.pids[w]} "
                       "with fresh envs and the current weights; re-sampling its share of this "
                       "update")

    def evaluations(self, actor_critic, update, env_steps, wait=False):
        """Start evaluating ``actor_critic`` (None: nothing new) in the Evaluator actor; return
        the result rows finished by now (``wait``: all of them), oldest first."""
        ray = self.ray
        if actor_critic is not None:
            if self.evaluator is None:
                # num_cpus=0: it runs now and then, beside the workers, wherever Ray puts it.
                self.evaluator = ray.remote(num_cpus=0, max_restarts=-1)(Evaluator).remote(
                    self.args, self.observation_space, self.action_space,
                    os.path.abspath(run_paths(self.args).eval_dir))
            self._evaluations.append(
                self.evaluator.evaluate.remote(self.snapshot(actor_critic), update, env_steps))
        rows = []
        while self._evaluations:
            ready, _ = ray.wait(self._evaluations[:1], timeout=None if wait else 0)
            if not ready:
                break
            ref = self._evaluations.pop(0)
            try:
                rows.append(ray.get(ref))
            except ray.exceptions.RayError as e:
                self.log_event(f"evaluation failed ({type(e).__name__}); skipped")
        return rows

    def close(self):
        if self._updates_timed:
            self.log_event("mean per update: " + ", ".join(
                f"{k} {v:.1f}" + ("" if k == "bytes per env step" else " ms")
                for k, v in self.cost_summary().items()), echo=False)
        for worker in self.workers + ([self.evaluator] if self.evaluator is not None else []):
            self.ray.kill(worker, no_restart=True)
        self.events.close()
        if self.own_ray:
            self.ray.shutdown()


_UPLOAD_EXCLUDES = [".git", ".venv", ".ci-venv", "logs", "trained_models", "runs", "tmp", "*.pt",
                    "__pycache__"]
