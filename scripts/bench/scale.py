"""Scale-out on this machine: PPO env-steps/s with 0, 1, 2 Ray workers and 1, 2 DDP ranks, the
per-update costs of the Ray workers, the DDP gradient all-reduce, and rollout bytes per env step.

    python scripts/bench/scale.py                 # everything (about 15 minutes on 2 cores)
    python scripts/bench/scale.py --only fps --env CartPole-v1
    python scripts/bench/scale.py --only bytes    # Atari rollout payload, packed and not
    python scripts/bench/scale.py --only allreduce

Each training run is a fresh ``main.py`` process (``torchrun`` for DDP) with the same total batch
(envs x steps per update) split over the workers / ranks. fps is main.py's own figure (env steps
over the loop's wall time, start-up excluded); "wall" includes start-up (Ray, worker processes).
"""
import argparse
import csv
import os
import re
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the repository

# Per env: total envs, steps per update, PPO settings, steps to run.
CASES = {
    "CartPole-v1": dict(envs=8, steps=128, extra=["--ppo-epoch", "4", "--num-mini-batch", "4",
                                                  "--lr", "2.5e-4"], total=40960),
    "HalfCheetah-v5": dict(envs=2, steps=1024, extra=["--ppo-epoch", "10", "--num-mini-batch", "32",
                                                      "--lr", "3e-4"], total=20480),
}


def train(env, workers=0, ranks=1):
    case = CASES[env]
    split = max(workers, ranks, 1)
    argv = ["--algo", "ppo", "--env-name", env, "--use-gae", "--use-proper-time-limits",
            "--entropy-coef", "0", "--num-processes", str(case["envs"] // split),
            "--num-steps", str(case["steps"]), "--num-env-steps", str(case["total"]),
            "--log-interval", "1"] + case["extra"]
    if workers:
        argv += ["--num-workers", str(workers)]
    with tempfile.TemporaryDirectory() as tmp:
        argv += ["--log-dir", os.path.join(tmp, "logs"), "--save-dir", os.path.join(tmp, "models")]
        if ranks > 1:
            cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone",
                   "--nproc_per_node", str(ranks), "main.py"] + argv
        else:
            cmd = [sys.executable, "main.py"] + argv
        start = time.time()
        subprocess.run(cmd, cwd=ROOT, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        wall = time.time() - start
        with open(os.path.join(tmp, "logs", "progress.csv")) as f:
            fps = int(list(csv.DictReader(f))[-1]["fps"])
        costs = ""
        if workers:
            with open(os.path.join(tmp, "logs", "workers.log")) as f:
                costs = re.search(r"mean per update: (.*)", f.read()).group(1)
    return fps, wall, costs


def bench_fps(envs):
    print("| env | setting | envs x steps | fps | wall s | Ray per-update costs |")
    print("|---|---|---|---|---|---|")
    for env in envs:
        case = CASES[env]
        for label, kw in [("in-process", {}), ("1 Ray worker", {"workers": 1}),
                          ("2 Ray workers", {"workers": 2}), ("DDP 1 rank (torchrun)", None),
                          ("DDP 2 ranks (torchrun)", {"ranks": 2})]:
            if kw is None:  # torchrun with one rank: the in-process loop plus torchrun's start-up
                kw = {"ranks": 1}
            split = max(kw.get("workers", 0), kw.get("ranks", 1), 1)
            fps, wall, costs = train(env, **kw)
            print(f"| {env} | {label} | {split} x {case['envs'] // split} x {case['steps']} | "
                  f"{fps} | {wall:.0f} | {costs} |", flush=True)


def bench_bytes(env="PongNoFrameskip-v4", num_processes=8, num_steps=128):
    """Payload of one Atari rollout from a worker (run here, without Ray), packed and not."""
    import torch

    from a2c_ppo_acktr.sampling import ray_actors as workers
    from a2c_ppo_acktr.settings.arguments import get_config

    cfg = get_config(["--env-name", env, "--num-processes", str(num_processes), "--num-steps",
                       str(num_steps), "--num-workers", "1", "--vec-env", "dummy"])
    worker = workers.RolloutWorker(0, cfg.workers)
    worker.start(seed=0, torch_seed=0, log_dir=None, monitor_append=False)
    snapshot = {"weights": worker.policy.state_dict(), "obs_rms": None, "version": 0}
    rollout = worker.sample(snapshot)
    packed = sum(v.nbytes for v in rollout.values() if isinstance(v, torch.Tensor))
    rollout["obs"] = workers.unpack_frames(rollout)
    full = sum(rollout[k].nbytes for k in workers.FIELDS)
    worker.envs.close()
    steps = num_processes * num_steps
    print(f"{env}, {num_processes} envs x {num_steps} steps: {full / steps:.0f} bytes per env step "
          f"with whole frame stacks, {packed / steps:.0f} with new frames only "
          f"({full / packed:.2f}x less)")


def _allreduce_rank(rank, port, hidden, results):
    import torch
    import torch.distributed as dist

    from a2c_ppo_acktr.sampling.ddp import DDP

    torch.set_num_threads(1)
    os.environ.update(RANK=str(rank), WORLD_SIZE="2", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    # The MLP policy's shapes: 2 x (obs -> hidden -> hidden) + value head + action head.
    def model():
        torch.manual_seed(0)
        return torch.nn.ModuleList([torch.nn.Linear(17, hidden), torch.nn.Linear(hidden, hidden),
                                    torch.nn.Linear(17, hidden), torch.nn.Linear(hidden, hidden),
                                    torch.nn.Linear(hidden, 1), torch.nn.Linear(hidden, 6)])

    def loss(m, x):
        a = torch.tanh(m[1](torch.tanh(m[0](x))))
        c = torch.tanh(m[3](torch.tanh(m[2](x))))
        return m[4](c).sum() + m[5](a).sum()

    x = torch.randn(64, 17)
    ddp = DDP(cuda=False)
    timings = {}
    plain = model()
    flat = model()
    ddp.average_gradients(flat)
    per_param = model()
    params = list(per_param.parameters())

    def hook(p):
        dist.all_reduce(p.grad)
        p.grad /= 2
    for p in params:
        p.register_post_accumulate_grad_hook(hook)
    for name, m in (("no all-reduce", plain), ("one flat all-reduce", flat),
                    ("one all-reduce per parameter", per_param)):
        for _ in range(20):
            loss(m, x).backward()
        dist.barrier()
        start = time.perf_counter()
        for _ in range(200):
            loss(m, x).backward()
        timings[name] = (time.perf_counter() - start) / 200 * 1000
    if rank == 0:
        results.update(timings)
    ddp.close()


def bench_allreduce():
    import socket

    import torch.multiprocessing as mp

    print("| backward of the MLP policy (64 samples), 2 ranks, gloo | hidden 64 ms | hidden 256 ms |")
    print("|---|---|---|")
    rows = {}
    for hidden in (64, 256):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        with mp.Manager() as manager:
            results = manager.dict()
            mp.spawn(_allreduce_rank, args=(port, hidden, results), nprocs=2)
            for k, v in results.items():
                rows.setdefault(k, []).append(v)
    for k, (a, b) in rows.items():
        print(f"| {k} | {a:.3f} | {b:.3f} |")


def main():
    p = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    p.add_argument("--only", choices=["fps", "bytes", "allreduce"])
    p.add_argument("--env", action="append", choices=list(CASES), help="fps: these envs only")
    args = p.parse_args()
    print(f"load average before: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    if args.only in (None, "allreduce"):
        bench_allreduce()
    if args.only in (None, "bytes"):
        bench_bytes()
    if args.only in (None, "fps"):
        bench_fps(args.env or list(CASES))
    print(f"load average after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
