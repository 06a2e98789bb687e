"""The measuring modes of ``scripts/bench/gpu.py``: each a list of parts, each part one
``main.py`` run watched as it trains (``watch.py``), reported as a row of one table.

- steady: the README's PPO Pong command (``README_PONG``), eager and ``--compile``: env-steps/s
  after the first ``skip`` updates, for ``measure`` seconds; start-up and compile time apart; the
  GPU's busy share over the same updates.
- score: the ``fast`` recipe until the mean of the last 10 training episodes reaches the highest
  threshold: seconds from the command's start to each threshold.
- sweep: the ``fast`` recipe with other numbers of envs (its steps per env and minibatch size
  kept), as score.
- all: steady, score and sweep within one budget, each part a share of what is left.

``--device cpu`` (for tests) runs the same flow on CartPole, in seconds.
"""
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from fps import VARIANTS
from gpu_report import header, next_cap, row
from watch import (
    GRACE_S,
    IN_PROCESS,
    Row,
    busy_share,
    compile_seconds,
    failure_line,
    first_reach,
    measured_for,
    reached,
    startup,
    steady_rate,
    wall,
    watch,
)

from a2c_ppo_acktr.settings import recipes
from a2c_ppo_acktr.settings.arguments import get_args

# The README's Atari PPO command (tests/scripts/test_bench_gpu.py checks that the README still shows it).
README_PONG = ["--env-name", "PongNoFrameskip-v4", "--recipe", "original", "--log-dir", "logs/ppo-pong"]
FAST_PONG = ["--env-name", "PongNoFrameskip-v4", "--recipe", "fast"]
CPU_CARTPOLE = ["--env-name", "CartPole-v1", "--recipe", "original", "--no-cuda"]
# The fast recipe's steps per env and samples per minibatch, kept when the sweep changes envs.
_FAST = recipes.ONLY_FOR["fast"]["atari"]
FAST_STEPS = _FAST["num_steps"]
FAST_MINIBATCH = _FAST["num_processes"] * FAST_STEPS // _FAST["num_mini_batch"]
# Issue #50 item 3: the README command with 8 envs on a GPU machine, steady env-steps/s.
TARGETS = {"eager": 3728, "compile": 7000}
TARGET_ENVS = 8
# Shares of the budget (--all): compiling needs a longer run; the time to 20 the longest.
WEIGHTS = {"eager": 1.0, "compile": 3.0, "bf16": 1.0, "compile+bf16": 3.0, "score": 4.5,
           "sweep": 0.75}
MIN_CAP_S = 5.0


class GpuBusy:
    """The GPU's busy share while the block runs: NVML's utilization.gpu (the share of time a
    kernel ran, as nvidia-smi shows it) for the GPU torch uses, read every 0.5 s in a thread
    through pynvml (``torch.cuda.utilization``), else nvidia-smi. ``samples``: (perf_counter,
    share); ``share``: their mean, None where neither answers."""

    def __enter__(self) -> "GpuBusy":
        self.share, self.samples, self._stop = None, [], threading.Event()
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
            self.samples.append((time.perf_counter(), value / 100))

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        if self.samples:
            self.share = sum(v for _, v in self.samples) / len(self.samples)


class NoGpu:
    """GpuBusy's place without CUDA: no samples."""

    samples: list[tuple[float, float]] = []

    def __enter__(self) -> "NoGpu":
        return self

    def __exit__(self, *exc) -> None:
        pass


@dataclass
class Part:
    part: str               # steady | score | sweep
    argv: list[str]         # main.py's
    envs: int
    weight: float
    stop: Callable[[Sequence[Row]], bool]
    target: int | None = None


def make_parts(mode: str, ours: Sequence[str], envs: Sequence[int], sweep_envs: Sequence[int],
               score_variant: str, thresholds: Sequence[float], measure: float, skip: int,
               seed: int, cuda: bool) -> list[Part]:
    """The runs of ``mode`` (steady | score | sweep | all), in order."""
    steady_cmd, fast_cmd = (README_PONG, FAST_PONG) if cuda else (CPU_CARTPOLE, CPU_CARTPOLE)
    seeded = ["--seed", str(seed)]
    to_top = reached(max(thresholds))
    runs: list[tuple[str, list[str], float, Callable, int | None]] = []
    if mode in ("steady", "all"):
        runs += [("steady", steady_cmd + ["--num-processes", str(n)] + VARIANTS[v], WEIGHTS[v],
                  measured_for(measure, skip), TARGETS.get(v) if cuda and n == TARGET_ENVS else None)
                 for v in ours for n in envs]
    if mode in ("score", "all"):
        runs.append(("score", fast_cmd + VARIANTS[score_variant], WEIGHTS["score"], to_top, None))
    if mode in ("sweep", "all"):
        for n in sweep_envs:
            minibatches = ["--num-mini-batch", str(max(1, n * FAST_STEPS // FAST_MINIBATCH))]
            runs.append(("sweep", fast_cmd + ["--num-processes", str(n)]
                         + (minibatches if cuda else []) + VARIANTS[score_variant],
                         WEIGHTS["sweep"], to_top, None))
    # main.py's parser checks each command now, before anything runs (one line, exit 2)
    return [Part(name, argv + seeded, get_args(argv).num_processes, weight, stop, target)
            for name, argv, weight, stop, target in runs]


def measure(part: Part, cap: float, skip: int, thresholds: Sequence[float], cuda: bool) -> dict:
    """One part's run, stopped by its ``stop`` or after ``cap`` seconds, as a table row's dict."""
    with tempfile.TemporaryDirectory() as workdir, (GpuBusy() if cuda else NoGpu()) as gpu:
        result = watch(part.argv, workdir, cap, part.stop)
    rows = result.rows
    busy = None
    if len(rows) > skip:
        busy = busy_share([(t - result.started, v) for t, v in gpu.samples],
                          wall(rows[skip - 1], rows), wall(rows[-1], rows))
    reach = {t: (wall(hit, rows), hit.steps) for t in thresholds
             if (hit := first_reach(rows, t)) is not None}
    ended = {"stopped": f"stopped ({'measured' if part.part == 'steady' else 'reached'})",
             "time limit": f"time limit ({cap:.0f} s)"}.get(result.ended, result.ended)
    if result.ended == "failed" or (result.rc not in (0, 143) and not rows):
        ended = "failed, " + failure_line(result)
    return {"part": part.part, "command": " ".join(part.argv), "envs": part.envs,
            "rate": steady_rate(rows, skip), "target": part.target, "startup": startup(rows),
            "compile_s": compile_seconds(result.stdout), "in_process": IN_PROCESS in result.stderr,
            "busy": busy, "reach": reach, "last": rows[-1].mean_return if rows else None,
            "steps": rows[-1].steps if rows else None, "ended": ended, "cap": cap}


def skipped(part: Part, cap: float) -> dict:
    return {"part": part.part, "command": " ".join(part.argv), "envs": part.envs, "rate": None,
            "target": part.target, "startup": None, "compile_s": None, "in_process": False,
            "busy": None, "reach": {}, "last": None, "steps": None,
            "ended": f"skipped: {cap:.0f} s left for it", "cap": cap}


def run_parts(parts: Sequence[Part], skip: int, thresholds: Sequence[float], cuda: bool,
              budget: float | None = None, time_limit: float = 0.0) -> list[dict]:
    """Each part in turn, its cap ``time_limit`` or, with ``budget``, its weight's share of the
    budget left; its row printed as it ends."""
    # a run stopped at its cap may take GRACE_S to exit: kept free at the budget's end
    deadline = None if budget is None else time.perf_counter() + budget - GRACE_S
    print("\n".join(header(thresholds)), flush=True)
    results = []
    for i, part in enumerate(parts):
        cap = time_limit if deadline is None else next_cap(
            deadline - time.perf_counter(), [p.weight for p in parts[i:]])
        results.append(measure(part, cap, skip, thresholds, cuda) if cap >= MIN_CAP_S
                       else skipped(part, cap))
        print(row(results[-1], thresholds), flush=True)
    return results
