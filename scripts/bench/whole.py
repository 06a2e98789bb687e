"""Whole processes, ours against stable-baselines3: imports, start-up, training and exit.

    python scripts/bench/whole.py --cases a b c d --pairs 5
    python scripts/bench/whole.py --cases b --pairs 1 --warmup 0 --total 640   # a quick check
    A2C_PPO_ACKTR_SPEED=flat python scripts/bench/whole.py --cases b --against plain  # a mechanism

Issue #50's CPU targets compare whole processes. For each case of ``cases.py``, ours is
``python main.py`` with the case's flags (those ``fps.py`` passes), SB3 is ``python
scripts/bench/fps.py --one sb3 CASE`` (SB3's PPO or A2C on the same settings, in a process that
imports nothing of ours). After ``--warmup`` runs of each (not counted), ``--pairs`` pairs run in
turn, ours then SB3, each in a fresh directory. A run's wall time is a monotonic clock around the
process; its CPU time (user + system) and peak memory are the operating system's accounting of
the finished process (``os.wait4``; peak memory is the largest single process, a child's
included). Printed per pair as it ends, then per case: each side's median wall time, the
median (min-max) of the pairs' wall-time ratios SB3 / ours, the median ratio of CPU times ours /
SB3, and each side's peak memory. ``fps.py`` times the training loop alone, seed by seed.

``--against plain``: SB3's side is ours with the speed seam off (``A2C_PPO_ACKTR_SPEED=none``),
ours runs with the mechanisms this environment's ``A2C_PPO_ACKTR_SPEED`` names (default all):
the A/B that decides whether a mechanism stays (docs/design.md, "The speed seam").
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

from fps import ROOT, case_argv

from cases import CASES


def timed(cmd: list[str], env: dict | None = None) -> dict:
    """Run ``cmd`` (in ``env``, by default this one's) to its end, its output thrown away -> wall
    s, cpu s, peak MiB; raises with the end of its error output if it fails."""
    with tempfile.TemporaryFile() as err:
        start = time.monotonic()
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=err, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.monotonic() - start
        proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here, not by Popen
        if proc.returncode != 0:
            err.seek(0)
            raise RuntimeError(f"{' '.join(cmd[:3])} ... exited {proc.returncode}:\n"
                               + err.read().decode(errors="replace")[-3000:])
    return {"wall": wall, "cpu": usage.ru_utime + usage.ru_stime,
            "peak": usage.ru_maxrss / 1024.0}


def ours(case: str, seed: int, total: int | None, env: dict | None = None) -> dict:
    c = dict(CASES[case], total=total or CASES[case]["total"])
    with tempfile.TemporaryDirectory() as workdir:
        return timed([sys.executable, os.path.join(ROOT, "main.py"), *case_argv(c, seed, workdir)],
                     env)


def plain(case: str, seed: int, total: int | None) -> dict:
    """Ours with the speed seam off."""
    return ours(case, seed, total, {**os.environ, "A2C_PPO_ACKTR_SPEED": "none"})


def sb3(case: str, seed: int, total: int | None) -> dict:
    fps = os.path.join(ROOT, "scripts", "bench", "fps.py")
    return timed([sys.executable, fps, "--one", "sb3", case, "--seed", str(seed)]
                 + (["--total", str(total)] if total else []))


def compare(case: str, pairs: int, warmup: int, seed: int, total: int | None,
            against: str = "sb3") -> None:
    other, name = (sb3, "SB3") if against == "sb3" else (plain, "plain")
    for _ in range(warmup):
        ours(case, seed, total)
        other(case, seed, total)
    runs: list[tuple[dict, dict]] = []
    for i in range(pairs):
        a, b = ours(case, seed, total), other(case, seed, total)
        runs.append((a, b))
        print(f"{case}  pair {i + 1}: ours {a['wall']:.1f} s, {name} {b['wall']:.1f} s, {name} / "
              f"ours {b['wall'] / a['wall']:.2f}x", flush=True)
    ratios = [b["wall"] / a["wall"] for a, b in runs]
    cpu = statistics.median(a["cpu"] / b["cpu"] for a, b in runs)
    c = CASES[case]
    print(f"{case}  {c['algo'].upper()} {c['env']}, {total or c['total']:,} steps: ours "
          f"{statistics.median(a['wall'] for a, _ in runs):.1f} s, {name} "
          f"{statistics.median(b['wall'] for _, b in runs):.1f} s; {name} / ours wall "
          f"{statistics.median(ratios):.2f}x ({min(ratios):.2f}-{max(ratios):.2f}, {pairs} "
          f"pairs); ours / {name} CPU time {cpu:.2f}; peak MiB ours "
          f"{max(a['peak'] for a, _ in runs):.0f}, {name} {max(b['peak'] for _, b in runs):.0f}",
          flush=True)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(allow_abbrev=False, description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cases", nargs="+", default=list("abcd"), choices=list("abcd"))
    p.add_argument("--pairs", type=int, default=5, help="counted pairs per case (default 5)")
    p.add_argument("--warmup", type=int, default=1,
                   help="runs of each side first, not counted (default 1)")
    p.add_argument("--seed", type=int, default=1, help="both sides' seed (default 1)")
    p.add_argument("--against", choices=["sb3", "plain"], default="sb3",
                   help="the other side: SB3 (default) or ours with the speed seam off")
    p.add_argument("--total", type=int, default=None,
                   help="env steps per run instead of the case's (a quick check of the script)")
    args = p.parse_args(argv)
    if args.pairs < 1:
        p.error(f"--pairs must be at least 1; got {args.pairs}")
    if args.warmup < 0:
        p.error(f"--warmup must be at least 0; got {args.warmup}")
    if args.total is not None and args.total < 1:
        p.error(f"--total must be at least 1; got {args.total}")
    for case in args.cases:
        compare(case, args.pairs, args.warmup, args.seed, args.total, args.against)


if __name__ == "__main__":
    main()
