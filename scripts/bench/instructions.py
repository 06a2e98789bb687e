"""Training's CPU instructions per env step, ours against another checkout: a measure that a
shared, noisy machine leaves alone (wall time moved by 20% between runs of the same case here).

    python scripts/bench/instructions.py --case a --against /path/to/checkout-before
    python scripts/bench/instructions.py --case c --totals 4096 8192 --against ../before

Each checkout runs ``scripts/bench/fps.py --one ours CASE --total N`` under valgrind's
cachegrind (instruction counts only, ``--cache-sim=no``; ``PYTHONHASHSEED=0``), at two budgets;
the difference of the two counts is the instructions of the extra env steps' training, start-up
and imports taken out. Prints each checkout's instructions per env step and the ratio ours /
theirs. Instructions are not time (cache misses, SIMD width), but they move with the Python and
dispatch overhead that the CPU cases are made of. Each run is ~30x slower than without valgrind.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys

from cases import CASES

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def instructions(checkout: str, case: str, total: int) -> int:
    """Instructions of one ``fps.py --one ours`` process of ``checkout`` at ``total`` env steps."""
    env = {**os.environ, "PYTHONHASHSEED": "0", "PYTHONPATH": checkout}
    out = subprocess.run(
        ["valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null",
         sys.executable, os.path.join("scripts", "bench", "fps.py"), "--one", "ours", case,
         "--seed", "1", "--total", str(total)],
        cwd=checkout, env=env, capture_output=True, text=True)
    return refs(out.stderr, checkout)


def refs(valgrind_stderr: str, what: str = "the run") -> int:
    """The ``I refs`` count of cachegrind's summary."""
    m = re.search(r"I\s+refs:\s+([\d,]+)", valgrind_stderr)
    if m is None:
        tail = valgrind_stderr.strip().splitlines()[-1:] or ["nothing"]
        raise SystemExit(f"instructions.py: no instruction count from {what}: {tail[0]}")
    return int(m.group(1).replace(",", ""))


def per_step(counts: tuple[int, int], totals: tuple[int, int]) -> float:
    """Instructions per env step between the two budgets."""
    return (counts[1] - counts[0]) / (totals[1] - totals[0])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--case", choices=sorted(CASES), default="a")
    p.add_argument("--against", required=True, help="the other checkout (its scripts/bench/fps.py runs)")
    p.add_argument("--totals", type=int, nargs=2, default=[8192, 16384], metavar=("N1", "N2"),
                   help="the two budgets, env steps, whole updates of the case (default 8192 16384)")
    args = p.parse_args(argv)
    if shutil.which("valgrind") is None:
        p.error("valgrind not found: install it (apt install valgrind)")
    other = os.path.abspath(args.against)
    if not os.path.isfile(os.path.join(other, "scripts", "bench", "fps.py")):
        p.error(f"--against {args.against}: no scripts/bench/fps.py there (expected a checkout)")
    n1, n2 = args.totals
    if not 0 < n1 < n2:
        p.error(f"--totals {n1} {n2}: expected two budgets, the first smaller, both above 0")
    result = {}
    for name, checkout in (("ours", ROOT), ("theirs", other)):
        counts = (instructions(checkout, args.case, n1), instructions(checkout, args.case, n2))
        result[name] = per_step(counts, (n1, n2))
        print(f"{name} ({checkout}): {result[name]:,.0f} instructions per env step", flush=True)
    print(f"case ({args.case}): ours / theirs {result['ours'] / result['theirs']:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
