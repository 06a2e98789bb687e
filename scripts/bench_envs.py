"""Raw random-action stepping throughput of our vector envs against stable-baselines3's.

Compares, on the same env thunks (``a2c_ppo_acktr.envs.make_env``) and the same pre-sampled
actions, ours ``ShmemVecEnv`` vs SB3 ``SubprocVecEnv`` (its default start method) and ours
``DummyVecEnv`` vs SB3 ``DummyVecEnv``, in alternating rounds (the machine's speed drifts).
Reports the median steps/s (env steps, i.e. vector steps x num_envs), start-up time and the
worker processes' summed peak RSS and PSS, read from /proc.

    python scripts/bench_envs.py                       # CartPole-v1 and HalfCheetah-v5, 8 envs
    python scripts/bench_envs.py --env-ids PongNoFrameskip-v4 --num-envs 4

``scripts/bench_fps.py`` runs it for its case (e).
"""
import argparse
import json
import os
import statistics
import time

import numpy as np
from stable_baselines3.common.vec_env import DummyVecEnv as SB3DummyVecEnv
from stable_baselines3.common.vec_env import SubprocVecEnv as SB3SubprocVecEnv

from a2c_ppo_acktr.envs import DummyVecEnv, ShmemVecEnv, make_env

# name -> (constructor, worker pids of an instance)
IMPLS = {
    "ours_shmem": (ShmemVecEnv, lambda venv: venv.pids),
    "sb3_subproc": (SB3SubprocVecEnv, lambda venv: [p.pid for p in venv.processes]),
    "ours_dummy": (DummyVecEnv, lambda venv: []),
    "sb3_dummy": (SB3DummyVecEnv, lambda venv: []),
}
RATIOS = {"shmem/subproc": ("ours_shmem", "sb3_subproc"), "dummy/dummy": ("ours_dummy", "sb3_dummy")}


def _proc_kib(path, key):
    """Value in kB of ``key`` in a /proc status-like file, 0 if unreadable."""
    try:
        with open(path) as f:
            for line in f:
                if line.startswith(key):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def _workers_memory_mib(pids):
    """(summed peak RSS, summed PSS) of the worker processes, in MiB. RSS counts the pages they
    share (libraries, the forkserver's copy-on-write heap) once per process; PSS splits them."""
    peak = sum(_proc_kib(f"/proc/{pid}/status", "VmHWM:") for pid in pids)
    pss = sum(_proc_kib(f"/proc/{pid}/smaps_rollup", "Pss:") for pid in pids)
    return peak / 1024, pss / 1024


def _run_once(impl, env_fns, actions, warmup):
    make, pids = IMPLS[impl]
    t0 = time.perf_counter()
    venv = make(env_fns)
    venv.reset()
    startup = time.perf_counter() - t0
    try:
        for a in actions[:warmup]:
            venv.step(a)
        t0 = time.perf_counter()
        for a in actions[warmup:]:
            venv.step(a)
        elapsed = time.perf_counter() - t0
        peak, pss = _workers_memory_mib(pids(venv))
    finally:
        venv.close()
    return {"steps_per_s": (len(actions) - warmup) * len(env_fns) / elapsed, "startup_s": startup,
            "workers_peak_rss_mib": peak, "workers_pss_mib": pss}


def bench_raw_stepping(env_id, num_envs=8, steps=2000, rounds=3, impls=tuple(IMPLS), warmup=50):
    """Random-action stepping of ``num_envs`` copies of ``env_id``, ``steps`` vector steps per run.

    Returns ``{"env_id", "num_envs", "steps", "rounds", "results": {impl: {"steps_per_s",
    "steps_per_s_all", "startup_s", "workers_peak_rss_mib", "workers_pss_mib"}}, "ratios":
    {"shmem/subproc", "dummy/dummy"}}`` with medians over the rounds (ratios of the medians).
    """
    env_fns = [make_env(env_id, 0, rank, None, True) for rank in range(num_envs)]
    probe = env_fns[0]()
    probe.action_space.seed(0)
    actions = np.array([[probe.action_space.sample() for _ in range(num_envs)]
                        for _ in range(steps + warmup)])  # (warmup + steps, N, *act_shape)
    probe.close()
    runs = {impl: [] for impl in impls}
    for _ in range(rounds):
        for impl in impls:  # alternate, so slow drifts of the machine hit every impl alike
            runs[impl].append(_run_once(impl, env_fns, actions, warmup))
    results = {}
    for impl, rs in runs.items():
        results[impl] = {key: statistics.median(r[key] for r in rs) for key in rs[0]}
        results[impl]["steps_per_s_all"] = [round(r["steps_per_s"]) for r in rs]
    ratios = {name: results[a]["steps_per_s"] / results[b]["steps_per_s"]
              for name, (a, b) in RATIOS.items() if a in results and b in results}
    return {"env_id": env_id, "num_envs": num_envs, "steps": steps, "rounds": rounds,
            "results": results, "ratios": ratios}


def print_report(report):
    print(f"\n{report['env_id']}: {report['num_envs']} envs, {report['steps']} steps x "
          f"{report['rounds']} rounds (median)")
    print(f"  {'impl':<12} {'steps/s':>9}  {'each round':<24} {'startup s':>9} {'peak RSS MiB':>12} "
          f"{'PSS MiB':>8}")
    for impl, r in report["results"].items():
        rss = f"{r['workers_peak_rss_mib']:.0f}" if r["workers_peak_rss_mib"] else "-"
        pss = f"{r['workers_pss_mib']:.0f}" if r["workers_pss_mib"] else "-"
        print(f"  {impl:<12} {r['steps_per_s']:>9.0f}  {str(r['steps_per_s_all']):<24} "
              f"{r['startup_s']:>9.2f} {rss:>12} {pss:>8}")
    for name, ratio in report["ratios"].items():
        print(f"  ours/SB3 {name}: {ratio:.2f}x")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env-ids", nargs="+", default=["CartPole-v1", "HalfCheetah-v5"])
    parser.add_argument("--num-envs", type=int, default=8)
    parser.add_argument("--steps", type=int, default=2000, help="timed vector steps per run")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--impls", nargs="+", default=list(IMPLS), choices=list(IMPLS))
    parser.add_argument("--json", help="also write the reports to this file")
    args = parser.parse_args(argv)
    reports = []
    for env_id in args.env_ids:
        reports.append(bench_raw_stepping(env_id, args.num_envs, args.steps, args.rounds,
                                          tuple(args.impls)))
        print_report(reports[-1])
    if args.json:
        with open(args.json, "w") as f:
            json.dump(reports, f, indent=1)


if __name__ == "__main__":
    main()
