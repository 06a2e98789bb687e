"""The learner's side of the Ray rollout workers (``ray_actors.py`` holds the actors).

``WorkerGroup`` starts N ``RolloutWorker`` actors, publishes one snapshot per update, stacks their
rollouts into the learner's storage, merges their normalizer statistics and restarts failed
workers; ``RayCollector`` is the training loop's view of it (docs/scale-out.md, "Ray rollout
workers on one machine").
"""
import os
import time
from collections import deque
from typing import Any

import numpy as np
import torch

from a2c_ppo_acktr.config import WorkerConfig
from a2c_ppo_acktr.envs import (
    Normalizer,
    check_env_kwargs,
    make_env,
    merge_normalizer,
    normalizer_delta,
)
from a2c_ppo_acktr.evaluation import FINAL_EVAL_SEED, write_final_eval
from a2c_ppo_acktr.model import Policy
from a2c_ppo_acktr.rollout import Collector
from a2c_ppo_acktr.sampling.ray_actors import (
    FIELDS,
    START_TIMEOUT,
    Evaluator,
    RolloutWorker,
    checksums,
    local_modules,
    start_ray,
    unpack_frames,
)
from a2c_ppo_acktr.sampling.ray_faults import Failures, Waiting, describe
from a2c_ppo_acktr.sampling.reaper import descendants
from a2c_ppo_acktr.storage import RolloutStorage

POLL_S = 1.0  # s between looks at the rollouts not back yet (a hung env's warning)


class WorkerGroup:
    """N Ray rollout workers, seen by ``main.py`` as one vector env of ``N * num_processes`` envs.

    It offers what the loop uses of ``make_vec_envs``'s result — ``observation_space``,
    ``action_space``, ``num_envs``, ``reset``, ``pause``, ``close``, and the learner's copy of the
    normalization statistics as a ``Normalizer`` in ``.venv`` (so ``get_vec_normalize``,
    checkpoints, resume and evaluation work as without workers) — and ``collect`` in place of
    ``collect_rollout``.
    """

    def __init__(self, cfg: WorkerConfig, log_dir: str, eval_dir: str, env_steps: int,
                 resumed: bool) -> None:
        env, sampling = cfg.env, cfg.sampling
        # A bad env id or env kwargs: a one-line ValueError here, before Ray starts.
        make_env(env.env_name, 0, 0, None, False)
        if env.env_kwargs:
            check_env_kwargs(env.env_name, env.kwargs)
        ray, self.own_ray, self.reaper = start_ray(sampling.num_workers, sampling.ray_address,
                                                   local_modules(env.env_name))
        self.ray = ray
        self.failures = Failures()  # what a failed worker's next failure is measured against
        # Absolute: workers on other nodes run in the directory Ray unpacked the repository to.
        self.cfg, self.log_dir, self.eval_dir = cfg, os.path.abspath(log_dir), os.path.abspath(eval_dir)
        self.num_workers, self.P = sampling.num_workers, env.num_processes
        self.num_envs = self.num_workers * self.P
        self.steps_per_update = sampling.num_steps * self.num_envs
        self.version = env_steps // self.steps_per_update  # the update the next snapshot is for
        self.seed_base = env.seed + env_steps
        self.events = open(os.path.join(self.log_dir, "workers.log"), "a")
        # The Evaluator actor (started by the first evaluation), the ObjectRefs of its rows.
        self.evaluator: Any = None
        self._evaluations: list[Any] = []
        self.policy_lag = 0  # updates between the weights that sampled a rollout and the learner's
        self._costs: dict[str, float] = {}
        self._updates_timed = 0
        actor = ray.remote(num_cpus=1, max_restarts=-1, max_task_retries=0)(RolloutWorker)
        self.workers = [actor.remote(w, cfg) for w in range(self.num_workers)]
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
            self.venv = Normalizer(self.observation_space.shape, gamma=cfg.gamma)
            fresh = self.venv.state_dict()  # the same as each worker's before its envs' reset
            self.venv.load_state_dict(merge_normalizer(
                fresh, [normalizer_delta(fresh, i["obs_rms"]) for i in info]))
        self._benchmarks = [b for i in info for b in i["benchmarks"]]
        self.pids = ray.get([w.pid.remote() for w in self.workers])
        if self.reaper is not None:  # the local Ray's processes, started by now, end with this one
            self.reaper.watch(descendants(os.getpid()))
        self._in_flight: dict[int, Any] = {}  # async mode: worker index -> ObjectRef of its next rollout
        self.log_event(f"{self.num_workers} Ray rollout workers x {self.P} envs (pids "
                       f"{', '.join(map(str, self.pids))}); this node's Ray address "
                       f"{ray.util.get_node_ip_address()}", echo=False)

    def _start(self, w, monitor_append):
        # Env seeds seed + rank as make_vec_envs gives them; worker w's sampling RNG seed + w
        # (worker 0 of a new run then samples exactly as main.py does without workers).
        return self.workers[w].start.remote(self.seed_base, self.seed_base + w, self.log_dir,
                                            monitor_append)

    def log_event(self, message: str, echo: bool = True) -> None:
        line = f"{time.strftime('%Y-%m-%d %H:%M:%S')} update {self.version}: {message}"
        if echo:
            print(line, flush=True)
        self.events.write(line + "\n")
        self.events.flush()

    def reset(self) -> torch.Tensor:
        """The workers' first observations (N * P, *obs_shape): they reset their envs on start."""
        return self._first_obs

    def pause(self) -> None:
        """Workers pause their own envs after each rollout (sync mode)."""

    def benchmarks(self) -> list[dict | None]:
        """Per env: real-time timing statistics as of its worker's last rollout, or None."""
        return list(self._benchmarks)

    def snapshot(self, actor_critic: Policy) -> Any:
        """What every worker loads before sampling: one object in Ray's store per update."""
        vec_norm = self.venv
        return self.ray.put({
            "weights": {k: v.detach().cpu() for k, v in actor_critic.state_dict().items()},
            "obs_rms": vec_norm.state_dict() if vec_norm is not None else None,
            "version": self.version})

    def collect(self, actor_critic: Policy, rollouts: RolloutStorage,
                episode_rewards: list[float] | deque[float],
                use_proper_time_limits: bool | None = None,
                timeouts: list[int | None] | None = None) -> None:
        """Fill ``rollouts`` (N * P columns) from the workers; the same contract as
        ``collect_rollout`` (``use_proper_time_limits`` is the workers' own, from their config)."""
        t0 = time.perf_counter()
        snapshot = self.snapshot(actor_critic)
        t1 = time.perf_counter()
        if self.cfg.sampling.async_rollouts:
            refs = {w: self._in_flight[w] if w in self._in_flight
                    else self.workers[w].sample.remote(snapshot) for w in range(self.num_workers)}
        else:
            refs = {w: self.workers[w].sample.remote(snapshot) for w in range(self.num_workers)}
        results = self._gather(refs, snapshot)
        if self.cfg.sampling.async_rollouts:  # next rollouts start now, while the learner updates
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

    def cost_summary(self) -> dict[str, float]:
        """Mean per-update costs: ms (publish: ray.put of the snapshot; load / sample / pack: in
        a worker; wait: the learner for the rollouts; stack: unpack, copy, merge) and payload size."""
        n = max(self._updates_timed, 1)
        return {k: v / n * (1 if k == "bytes per env step" else 1000) for k, v in self._costs.items()}

    def _gather(self, refs, snapshot):
        """ray.get the rollouts of ``refs`` (worker -> ObjectRef); restart and re-sample failures."""
        ray = self.ray
        results, failures = [None] * self.num_workers, [0] * self.num_workers
        pending = {ref: w for w, ref in refs.items()}
        waiting = Waiting(self.cfg.env.env_name, self.P, self.cfg.env.env_timeout)
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1, timeout=POLL_S)
            if not ready:  # a hung env is said after 60 s, as in-process
                waiting.check(pending.values())
                continue
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
        what = describe(error)
        stop = self.failures.verdict(w, error, attempt, self.version)
        if stop is not None:
            self.log_event(f"worker {w} failed ({what}); stopping the run: {stop}", echo=False)
            raise stop
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

    def evaluations(self, actor_critic: Policy | None, update: int, env_steps: int,
                    wait: bool = False) -> list[dict]:
        """Start evaluating ``actor_critic`` (None: nothing new) in the Evaluator actor; return
        the result rows finished by now (``wait``: all of them), oldest first."""
        ray = self.ray
        if actor_critic is not None:
            self._evaluations.append(
                self._evaluator().evaluate.remote(self.snapshot(actor_critic), update, env_steps))
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

    def final_evaluation(self, actor_critic: Policy, env_steps: int, episodes: int,
                         log_dir: str) -> dict:
        """``evaluation.final_evaluation`` played in the Evaluator actor, where the workers'
        envs can be made (a real-time env's machine), written to ``log_dir`` here."""
        returns = self.ray.get(self._evaluator().final.remote(self.snapshot(actor_critic),
                                                              episodes))
        return write_final_eval(log_dir, env_steps, returns, self.cfg.env.seed + FINAL_EVAL_SEED)

    def _evaluator(self) -> Any:
        """The Evaluator actor, started by the first evaluation."""
        if self.evaluator is None:
            # num_cpus=0: it runs now and then, beside the workers, wherever Ray puts it.
            self.evaluator = self.ray.remote(num_cpus=0, max_restarts=-1)(Evaluator).remote(
                self.cfg, self.observation_space, self.action_space, self.eval_dir)
        return self.evaluator

    def close(self) -> None:
        if self._updates_timed:
            self.log_event("mean per update: " + ", ".join(
                f"{k} {v:.1f}" + ("" if k == "bytes per env step" else " ms")
                for k, v in self.cost_summary().items()), echo=False)
        for worker in self.workers + ([self.evaluator] if self.evaluator is not None else []):
            self.ray.kill(worker, no_restart=True)
        self.events.close()
        if self.own_ray:
            self.ray.shutdown()
        if self.reaper is not None:
            self.reaper.close()


class RayCollector(Collector):
    """Ray rollout workers (``envs``: a ``WorkerGroup``) fill the columns of one storage."""

    inexact = "--num-workers: the Ray workers' envs are not saved"

    def collect(self, actor_critic: Policy) -> RolloutStorage:
        self.envs.collect(actor_critic, self.rollouts, self.episode_returns, timeouts=self.timeouts)
        return self.rollouts

    def stats(self) -> dict:
        return {**super().stats(), "policy_lag": self.envs.policy_lag}
