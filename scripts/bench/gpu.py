"""One command for a GPU owner: the README's Atari PPO command on CUDA, ours against SB3.

    python scripts/bench/gpu.py                                # 8 and 16 envs, seeds 1 2, 50k steps
    python scripts/bench/gpu.py --envs 8 --seeds 1 --total 20480

Runs the README's PPO Pong command (``README_PONG``: the original's recipe) on the GPU, as ours
eager and ours with ``--compile`` (add ``--ours ... bf16`` for ``--precision bf16``), and
stable-baselines3's PPO with the settings it resolves to (8 or 16 envs x 128 steps, 4 epochs of 4
minibatches, clip 0.1, the same value loss weight, lr 2.5e-4 decaying linearly, entropy 0.01) on
the same GPU. Each run is a fresh process; the order of the impls alternates seed by seed so that
machine noise hits all alike.
Printed per impl and number of envs (the format is in docs/benchmarks.md, "GPU"): env-steps/s
(median over seeds; wall time of env and model creation and training, imports excluded, compiling
included), its ratio to SB3's, the GPU's busy share (NVML's utilization.gpu as nvidia-smi shows
it: the share of time a kernel ran, read every 0.5 s during the run) and the seconds spent
compiling.

On a machine without CUDA it says so in one line and exits with status 2: on the CPU,
``scripts/bench/fps.py --ours eager compile bf16`` measures the same options.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time

import torch
from fps import (
    VARIANTS,
    last_returns,
    load_main,
    run_measurement,
    run_sb3,
    train_quietly,
)

from a2c_ppo_acktr.run.arguments import fail, get_args

# The README's Atari PPO command (tests/test_bench_gpu.py checks that the README still shows it).
README_PONG = ["--env-name", "PongNoFrameskip-v4", "--recipe", "original"]


def sb3_case(envs: int, total: int) -> dict:
    """The settings README_PONG resolves to, for fps.run_sb3. Our value loss is 0.5 (R - V)^2
    weighted --value-loss-coef, SB3's (R - V)^2 weighted vf_coef: half of ours."""
    a = get_args(README_PONG + ["--num-processes", str(envs), "--num-env-steps", str(total)])
    return dict(algo=a.algo, env=a.env_name, n_envs=envs, n_steps=a.num_steps, epochs=a.ppo_epoch,
                minibatches=a.num_mini_batch, total=total, lr=a.lr, ent=a.entropy_coef,
                gae=a.use_gae, clip=a.clip_param, vf_coef=a.value_loss_coef / 2,
                lr_decay=a.use_linear_lr_decay)


class GpuBusy:
    """The GPU's busy share while the block runs: the mean of NVML's utilization.gpu (the share of
    time a kernel ran, as nvidia-smi shows it) for the GPU torch uses, read every 0.5 s in a
    thread: through pynvml (``torch.cuda.utilization``), else from nvidia-smi; ``share`` is None
    where neither answers."""

    def __enter__(self) -> "GpuBusy":
        self.share, self._samples, self._stop = None, [], threading.Event()
        self._uuid = f"GPU-{torch.cuda.get_device_properties(0).uuid}"
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def _read(self) -> float | None:
        try:
            return float(torch.cuda.utilization())
        except Exception:  # no pynvml (ImportError) or NVML refused (pynvml.NVMLError): nvidia-smi
            try:
                out = subprocess.run(["nvidia-smi", "-i", self._uuid, "--query-gpu=utilization.gpu",
                                      "--format=csv,noheader,nounits"],
                                     capture_output=True, text=True, timeout=5)
            except (OSError, subprocess.TimeoutExpired):
                return None
            return float(out.stdout) if out.returncode == 0 and out.stdout.strip().isdigit() else None

    def _sample(self) -> None:
        while not self._stop.wait(0.5):
            value = self._read()
            if value is None:
                return
            self._samples.append(value)

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        if self._samples:
            self.share = sum(self._samples) / len(self._samples) / 100


def one_measurement(impl: str, envs: int, seed: int, total: int) -> None:
    """Runs inside the subprocess: one run, its figures as one JSON line."""
    if impl == "sb3":
        import stable_baselines3.common.env_util  # noqa: F401  (imports before the clock)
    else:
        train = load_main()
    with tempfile.TemporaryDirectory() as workdir:
        start = time.perf_counter()
        with GpuBusy() as busy:
            if impl == "sb3":
                run_sb3(sb3_case(envs, total), seed, workdir, device="cuda")
            else:
                argv = README_PONG + VARIANTS[impl] + [
                    "--num-processes", str(envs), "--num-env-steps", str(total),
                    "--seed", str(seed), "--log-interval", "1000000", "--save-interval", "1000000",
                    "--log-dir", os.path.join(workdir, "logs"),
                    "--save-dir", os.path.join(workdir, "models")]
                train_quietly(train, argv)
        elapsed = time.perf_counter() - start
        final = last_returns(workdir)
    from torch._dynamo.utils import calculate_time_spent
    print(json.dumps({"fps": total / elapsed, "seconds": elapsed, "busy": busy.share,
                      "compile_s": calculate_time_spent().get("total_wall_time", 0.0),
                      "return": final}))


def measure(impl: str, envs: int, seed: int, total: int) -> dict:
    """One run in a fresh process -> its figures, or {"refused": main.py's one error line}."""
    return run_measurement(os.path.abspath(__file__),
                           [impl, str(envs), "--seed", str(seed), "--total", str(total)],
                           f"{impl} with {envs} envs")


def percent(share) -> str:
    return "-" if share is None else f"{100 * share:.0f}%"


def main(argv=None):
    p = argparse.ArgumentParser(allow_abbrev=False, description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--envs", type=int, nargs="+", default=[8, 16], help="numbers of envs")
    p.add_argument("--seeds", type=int, nargs="+", default=[1, 2],
                   help="one alternating round of the impls per seed")
    p.add_argument("--ours", nargs="+", choices=VARIANTS, default=["eager", "compile"],
                   help="our variants, a row each (default: eager compile)")
    p.add_argument("--total", type=int, default=50_000, help="env steps per run (default: 50000)")
    p.add_argument("--seed", type=int, default=1, help=argparse.SUPPRESS)
    p.add_argument("--one", nargs=2, metavar=("IMPL", "ENVS"), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if not torch.cuda.is_available():
        fail("needs a CUDA GPU (torch.cuda.is_available() is False here); on the CPU, "
             "scripts/bench/fps.py --ours eager compile bf16 measures the same options")
    if args.one:
        return one_measurement(args.one[0], int(args.one[1]), args.seed, args.total)

    print(f"{torch.cuda.get_device_name()}, {os.cpu_count()} CPUs; README PPO Pong command, "
          f"{args.total:,} steps a run, seeds {' '.join(map(str, args.seeds))}")
    print(f"{'envs':<5}{'impl':<14}{'env-steps/s':>12}{'/ SB3':>8}{'GPU busy':>10}{'compile s':>11}"
          "   per seed: steps/s (GPU busy)")
    for envs in args.envs:
        impls = args.ours + ["sb3"]
        runs, refused = {impl: [] for impl in impls}, {}
        for r, seed in enumerate(args.seeds):
            for impl in impls if r % 2 == 0 else impls[::-1]:
                if impl not in refused:
                    result = measure(impl, envs, seed, args.total)
                    if "refused" in result:
                        refused[impl] = result["refused"]
                    else:
                        runs[impl].append(result)
        median = {impl: sorted(x["fps"] for x in rs)[len(rs) // 2] for impl, rs in runs.items()
                  if rs}
        for impl, rs in runs.items():
            if impl in refused:
                print(f"{envs:<5}{impl:<14}refused: {refused[impl]}", flush=True)
                continue
            busy = [x["busy"] for x in rs if x["busy"] is not None]
            compiled = max(x["compile_s"] for x in rs)
            print(f"{envs:<5}{impl:<14}{median[impl]:>12.0f}{median[impl] / median['sb3']:>7.2f}x"
                  f"{percent(sum(busy) / len(busy) if busy else None):>10}{compiled:>11.1f}   "
                  + ", ".join(f"{x['fps']:.0f} ({percent(x['busy'])})" for x in rs), flush=True)


if __name__ == "__main__":
    sys.exit(main())
