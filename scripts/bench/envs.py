"""Random-action stepping throughput of our vector envs against others', on the same actions.

Raw vector envs (numpy in, numpy out), on the same env thunks (``a2c_ppo_acktr.envs.make_env``):
ours ``ShmemVecEnv`` vs SB3 ``SubprocVecEnv`` (its default start method) and gymnasium's
``AsyncVectorEnv`` (shared memory), ours ``DummyVecEnv`` vs SB3 ``DummyVecEnv``, ours
``ThreadVecEnv`` (``ours_threads``). Whole stacks
(``make_vec_envs``: backend, VecNormalize for vector observations, torch tensors out, torch
actions in): ``stack_<kind>`` for each ``--vec-env`` kind, and ``ale_alone``, ALE's
``AtariVectorEnv`` by itself with the same preprocessing (numpy, its defaults). Rounds alternate
the impls (the machine's speed drifts). Reports the median steps/s (env steps, i.e. vector steps
x num_envs), start-up time and the worker processes' summed peak RSS and PSS, read from /proc.

    python scripts/bench/envs.py                       # CartPole-v1 and HalfCheetah-v5, 8 envs
    python scripts/bench/envs.py --env-ids PongNoFrameskip-v4 --impls stack_ale ale_alone
    python scripts/bench/envs.py --env-ids CartPole-v1 --impls stack_native stack_dummy
    python scripts/bench/envs.py --env-ids HalfCheetah-v5 Hopper-v5 --impls ours_shmem gym_async
    # EnvPool (the .[envpool] extra): alone (next-step resets, its defaults), as our backend
    # (``envpool_ours``: same-step resets, monitor) and as the whole --vec-env envpool stack
    python scripts/bench/envs.py --env-ids Hopper-v5 --impls ours_shmem envpool envpool_ours

``scripts/bench/fps.py`` runs it for its case (e).
"""
import argparse
import json
import statistics
import time

import gymnasium as gym
import numpy as np
import torch
from stable_baselines3.common.vec_env import DummyVecEnv as SB3DummyVecEnv
from stable_baselines3.common.vec_env import SubprocVecEnv as SB3SubprocVecEnv

from a2c_ppo_acktr.envs import DummyVecEnv, ShmemVecEnv, ThreadVecEnv, make_env, make_vec_envs


def _stack(kind):
    """The full ``make_vec_envs`` stack with backend ``kind``: torch actions in."""
    def make(env_id, env_fns):
        venv = make_vec_envs(env_id, 0, len(env_fns), 0.99, None, "cpu", False, vec_env=kind)
        return venv, lambda a: torch.from_numpy(a.reshape(len(env_fns), -1))
    return make


def _ale_alone(env_id, env_fns):
    from ale_py.vector_env import AtariVectorEnv

    from a2c_ppo_acktr.envs.ale import ale_kwargs
    from a2c_ppo_acktr.envs.ids import env_spec
    return AtariVectorEnv(num_envs=len(env_fns), **ale_kwargs(env_spec(env_id))), None


def _envpool(env_id, env_fns):
    """EnvPool's own C++ envs (same-step autoreset is not one of its modes: numpy, its defaults)."""
    import envpool  # the .[envpool] extra
    return envpool.make_gymnasium(env_id, num_envs=len(env_fns)), None


def _envpool_ours(env_id, env_fns):
    """``--vec-env envpool``'s backend alone: EnvPool with same-step resets and the monitor."""
    from a2c_ppo_acktr.envs.envpool import EnvpoolVecEnv
    return EnvpoolVecEnv(env_id, len(env_fns), 0), None


def _gym_async(env_id, env_fns):
    return gym.vector.AsyncVectorEnv(env_fns, shared_memory=True,
                                     autoreset_mode=gym.vector.AutoresetMode.SAME_STEP), None


# name -> (constructor (env_id, env_fns) -> (venv, action converter or None), worker pids)
IMPLS = {
    "ours_shmem": (lambda env_id, fns: (ShmemVecEnv(fns), None), lambda venv: venv.pids),
    "sb3_subproc": (lambda env_id, fns: (SB3SubprocVecEnv(fns), None),
                    lambda venv: [p.pid for p in venv.processes]),
    "gym_async": (_gym_async, lambda venv: [p.pid for p in venv.processes]),
    "envpool": (_envpool, lambda venv: []),
    "envpool_ours": (_envpool_ours, lambda venv: []),
    "ours_dummy": (lambda env_id, fns: (DummyVecEnv(fns), None), lambda venv: []),
    "ours_threads": (lambda env_id, fns: (ThreadVecEnv(fns), None), lambda venv: []),
    "sb3_dummy": (lambda env_id, fns: (SB3DummyVecEnv(fns), None), lambda venv: []),
    **{f"stack_{kind}": (_stack(kind), lambda venv: []) for kind in ("dummy", "shmem", "threads",
                                                                          "native", "envpool")},
    "stack_ale": (_stack("ale"), lambda venv: []),
    "ale_alone": (_ale_alone, lambda venv: []),
}
DEFAULT_IMPLS = ("ours_shmem", "sb3_subproc", "ours_dummy", "sb3_dummy")
RATIOS = {"shmem/subproc": ("ours_shmem", "sb3_subproc"), "dummy/dummy": ("ours_dummy", "sb3_dummy"),
          "shmem/gym-async": ("ours_shmem", "gym_async"), "shmem/envpool": ("ours_shmem", "envpool"),
          "envpool-ours/shmem": ("envpool_ours", "ours_shmem"),
          "envpool/shmem (stacks)": ("stack_envpool", "stack_shmem"),
          "native/dummy (stacks)": ("stack_native", "stack_dummy"),
          "ale-stack/ALE-alone": ("stack_ale", "ale_alone")}


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


def _run_once(impl, env_id, env_fns, actions, warmup):
    make, pids = IMPLS[impl]
    t0 = time.perf_counter()
    venv, convert = make(env_id, env_fns)
    venv.reset()
    startup = time.perf_counter() - t0
    if convert is not None:  # converted before the clock starts: the caller's tensors
        actions = [convert(a) for a in actions]
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


def bench_raw_stepping(env_id, num_envs=8, steps=2000, rounds=3, impls=DEFAULT_IMPLS, warmup=50):
    """Random-action stepping of ``num_envs`` copies of ``env_id``, ``steps`` vector steps per run.

    Returns ``{"env_id", "num_envs", "steps", "rounds", "results": {impl: {"steps_per_s",
    "steps_per_s_all", "startup_s", "workers_peak_rss_mib", "workers_pss_mib"}}, "ratios":
    {name: ratio}}`` with medians over the rounds (ratios of the medians, ``RATIOS`` whose two
    impls ran).
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
            runs[impl].append(_run_once(impl, env_id, env_fns, actions, warmup))
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
        print(f"  {name}: {ratio:.2f}x")


def main(argv=None):
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n\n")[0])
    parser.add_argument("--env-ids", nargs="+", default=["CartPole-v1", "HalfCheetah-v5"])
    parser.add_argument("--num-envs", type=int, default=8)
    parser.add_argument("--steps", type=int, default=2000, help="timed vector steps per run")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--impls", nargs="+", default=list(DEFAULT_IMPLS), choices=list(IMPLS))
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
