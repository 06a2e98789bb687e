"""One command for a GPU owner: the README's Atari PPO command on CUDA, ours against SB3, and
the measuring modes: steady rate, time to a score, an envs sweep, all of them in one budget.

    python scripts/bench/gpu.py                                # 8 and 16 envs, seeds 1 2, 50k steps
    python scripts/bench/gpu.py --envs 8 --seeds 1 --total 20480
    python scripts/bench/gpu.py --all                          # <= 480 s; table: $OUT/gpu_bench.md
    python scripts/bench/gpu.py --steady --ours eager compile  # README command, 8 envs
    python scripts/bench/gpu.py --score --time-limit 300       # --recipe fast to 18 and 20

Without a mode: runs the README's PPO Pong command (``README_PONG``: the original's recipe) on the
GPU, as ours eager and ours with ``--compile`` (add ``--ours ... bf16`` for ``--precision
bf16``), and stable-baselines3's PPO with the settings it resolves to (8 or 16 envs x 128 steps, 4
epochs of 4 minibatches, clip 0.1, the same value loss weight, lr 2.5e-4 decaying linearly,
entropy 0.01) on the same GPU. Each run is a fresh process; the order of the impls alternates
seed by seed so that machine noise hits all alike.
Printed per impl and number of envs (the format is in docs/benchmarks.md, "GPU"): env-steps/s
(median over seeds; wall time of env and model creation and training, imports excluded, compiling
included), its ratio to SB3's, the GPU's busy share (NVML's utilization.gpu as nvidia-smi shows
it: the share of time a kernel ran, read every 0.5 s during the run) and the seconds spent
compiling.

The modes (``gpu_modes.py``) each run ``main.py`` commands watched as they train
(``watch.py``) and print a row per run as it ends, then write the rows as a markdown table with
the machine named (``--out``). ``--device cpu`` runs their flow on CartPole, to test this script.

On a machine without CUDA it says so in one line and exits with status 2: on the CPU,
``scripts/bench/fps.py --ours eager compile bf16`` measures the same options.
"""
import argparse
import json
import os
import sys
import tempfile
import time

import torch
from fps import (
    SAME_WORK,
    VARIANTS,
    last_returns,
    load_main,
    run_measurement,
    run_sb3,
    train_quietly,
)
from gpu_modes import README_PONG, GpuBusy, make_parts, run_parts
from gpu_report import machine, plan, write_table
from watch import GRACE_S

from a2c_ppo_acktr.errors import fail
from a2c_ppo_acktr.settings.arguments import Parser, get_args


def sb3_case(envs: int, total: int) -> dict:
    """The settings README_PONG resolves to, for fps.run_sb3. Our value loss is 0.5 (R - V)^2
    weighted --value-loss-coef, SB3's (R - V)^2 weighted vf_coef: half of ours."""
    a = get_args(README_PONG + ["--num-processes", str(envs), "--num-env-steps", str(total)])
    return dict(algo=a.algo, env=a.env_name, n_envs=envs, n_steps=a.num_steps, epochs=a.ppo_epoch,
                minibatches=a.num_mini_batch, total=total, lr=a.lr, ent=a.entropy_coef,
                gae=a.use_gae, clip=a.clip_param, vf_coef=a.value_loss_coef / 2,
                lr_decay=a.use_linear_lr_decay)


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
                argv = README_PONG + VARIANTS[impl] + SAME_WORK + [
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


def positive(kind):
    """An argparse type: a number of ``kind`` (int or float) above 0."""
    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            value = None
        if value is None or value <= 0:
            what = "a whole number" if kind is int else "a number"
            raise argparse.ArgumentTypeError(f"{text!r} is not {what} above 0")
        return value
    return parse


def parser() -> argparse.ArgumentParser:
    p = Parser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    mode = p.add_mutually_exclusive_group()
    for name, what in MODES.items():
        mode.add_argument(f"--{name}", dest="mode", action="store_const", const=name, help=what)
    p.add_argument("--envs", type=positive(int), nargs="+", default=None,
                   help="numbers of envs (default: 8 16; --steady: 8)")
    p.add_argument("--seeds", type=int, nargs="+", default=[1, 2],
                   help="one alternating round of the impls per seed")
    p.add_argument("--ours", nargs="+", choices=VARIANTS, default=["eager", "compile"],
                   help="our variants, a row each (default: eager compile)")
    p.add_argument("--total", type=int, default=50_000, help="env steps per run (default: 50000)")
    g = p.add_argument_group("--steady, --score, --sweep and --all")
    g.add_argument("--sweep-envs", type=positive(int), nargs="+", default=[16, 32, 128],
                   help="the sweep's numbers of envs (default: 16 32 128; --score runs 64)")
    g.add_argument("--score-variant", choices=VARIANTS, default="eager",
                   help="the variant of --score and --sweep's runs (default: eager)")
    g.add_argument("--thresholds", type=float, nargs="+", default=[18.0, 20.0],
                   help="returns to time, the run stopping at the highest (default: 18 20)")
    g.add_argument("--skip", type=positive(int), default=3,
                   help="updates before the steady rate's window (default: 3)")
    g.add_argument("--measure", type=positive(float), default=30.0,
                   help="--steady: seconds of updates in the window (default: 30)")
    g.add_argument("--time-limit", type=positive(float), default=None,
                   help="seconds a run may take (default: --steady 180, --score 300, --sweep 120)")
    g.add_argument("--budget", type=positive(float), default=480.0,
                   help="--all: seconds for all its runs (default: 480)")
    g.add_argument("--out", default=None, help="the table's file (default: $OUT/gpu_bench.md "
                   "where $OUT is set, else gpu_bench.md)")
    g.add_argument("--device", choices=("cuda", "cpu"), default="cuda",
                   help="cpu: the same flow on CartPole in seconds, to test this script")
    p.add_argument("--seed", type=int, default=1, help=argparse.SUPPRESS)
    p.add_argument("--one", nargs=2, metavar=("IMPL", "ENVS"), help=argparse.SUPPRESS)
    return p


MODES = {"steady": "the README command's env-steps/s after the first updates, eager and --compile",
         "score": "seconds from the command to a mean-10 return of 18 and 20, --recipe fast",
         "sweep": "--score with other numbers of envs (--sweep-envs)",
         "all": "--steady, --score and --sweep within --budget seconds, into one table (--out)"}
TIME_LIMITS = {"steady": 180.0, "score": 300.0, "sweep": 120.0}


def main(argv=None):
    given = sys.argv[1:] if argv is None else list(argv)
    args = parser().parse_args(given)
    cuda = args.device == "cuda"
    if cuda and not torch.cuda.is_available():
        fail("needs a CUDA GPU (torch.cuda.is_available() is False here); on the CPU, "
             "scripts/bench/fps.py --ours eager compile bf16 measures the same options")
    if args.one:
        return one_measurement(args.one[0], int(args.one[1]), args.seed, args.total)
    if args.mode is None:
        if not cuda:
            fail("--device cpu runs --steady, --score, --sweep or --all, not the comparison "
                 "with SB3")
        return compare(args)
    return measure_modes(args, cuda, given)


def measure_modes(args, cuda: bool, given: list[str]) -> int:
    """--steady, --score, --sweep or --all: the runs, their rows as they end, the table file."""
    out = args.out or os.path.join(os.environ.get("OUT", "."), "gpu_bench.md")
    if not os.path.isdir(os.path.dirname(os.path.abspath(out))):
        fail(f"--out {out}: its directory does not exist")
    parts = make_parts(args.mode, args.ours, args.envs or [8], args.sweep_envs,
                       args.score_variant, args.thresholds, args.measure, args.skip, args.seed,
                       cuda)
    budget = args.budget if args.mode == "all" else None
    title = "scripts/bench/gpu.py " + " ".join(given)
    line = machine(cuda)
    print(f"{line}\n{title}", flush=True)
    if budget is not None:
        print(f"budget {budget:.0f} s: " + ", ".join(
            f"{p.part} {p.envs} envs {cap:.0f} s" for p, cap in
            zip(parts, plan(budget - GRACE_S, [p.weight for p in parts])))
            + f" ({GRACE_S:.0f} s kept for the last run's exit; time a part leaves goes to the "
            "parts after it)", flush=True)
    start = time.perf_counter()
    results = run_parts(parts, args.skip, args.thresholds, cuda, budget,
                        args.time_limit or TIME_LIMITS.get(args.mode, 0.0))
    notes = [f"{time.perf_counter() - start:.0f} s in all"
             + (f" of a {budget:.0f} s budget" if budget is not None else ""),
             f"steady env-steps/s: after the first {args.skip} updates, from progress.csv's "
             "steps and times; start-up: from the command to the first update's end; "
             "GPU busy: NVML's utilization.gpu over the same updates"]
    if any(r["in_process"] for r in results):
        notes.append("torch.compile: Inductor's compile workers failed; compiled in-process")
    write_table(out, title, line, results, args.thresholds, notes)
    print(f"table: {out}", flush=True)
    return 0


def compare(args) -> int:
    envs_counts = args.envs or [8, 16]
    print(f"{torch.cuda.get_device_name()}, {os.cpu_count()} CPUs; README PPO Pong command, "
          f"{args.total:,} steps a run, seeds {' '.join(map(str, args.seeds))}")
    print(f"{'envs':<5}{'impl':<14}{'env-steps/s':>12}{'/ SB3':>8}{'GPU busy':>10}{'compile s':>11}"
          "   per seed: steps/s (GPU busy)")
    for envs in envs_counts:
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
    return 0


if __name__ == "__main__":
    sys.exit(main())
