#!/usr/bin/env python
"""Run a suite's recipes (a2c_ppo_acktr/settings/recipes.py) over seeds and report the results table.

Each run is ``main.py`` in a subprocess, under ``<out>/runs/<env>/<recipe>/seed<k>/`` (its
``logs/``, ``models/`` and ``stdout.log``). The score of a run is the mean return of its last 10
training episodes (what main.py's log line shows); a row gives the mean ± std of that over the
seeds, and each seed's final policy played deterministically, the first episode of each of 10
envs (the metric of rl-baselines3-zoo's tables; a run's line adds the lowest and highest
game). Writes ``<out>/results.md`` (the table and the commands) and ``<out>/<env>.png``
(learning curves, seed band min-max), and prints each run's line and the table. With
``--reuse`` a run whose checkpoint already holds the whole budget is read, not trained again, and
one cut short (stopped by a signal, which saves its checkpoint) continues with ``main.py
--resume``: a suite cut short continues, and seeds run apart (other ``--out`` dirs, linked in)
make one table; a checkpoint holding more steps than its run trains is another run's, and
``--reuse`` stops in one line before any run starts. Beside the mean ± std, a row gives the
interquartile mean (IQM) over its seeds with its 95% stratified bootstrap interval
(``a2c_ppo_acktr/analysis/stats.py``). Ctrl-C or SIGTERM, to this process alone or to its group,
stops the runs under way (each saves) and starts no more; the table then holds the runs that
finished.
``--thresholds 18 20`` adds, per run, the env steps and training minutes at which the log's mean
of the last 10 training episodes first reached each return (its ``progress.csv``; "-": not
within the budget).
``--vec-env ale shmem`` runs each recipe on each of those backends (a row per backend): the
backends' learning side by side. ``-- <main.py flags>`` at the end runs a variant of every recipe
over the same seeds (``-- --ppo-epoch 10 --value-norm``) beside the recipe itself: its rows name
the flags and give the probability that a run of the variant scores above one of the recipe,
P(variant > recipe), with its interval; its runs lie under ``<recipe>+<hash of the flags>/`` so
that ``--reuse`` never mixes them with the recipe's (which ``--reuse`` reads where they ran before).

    python scripts/benchmark.py --suite mujoco --env HalfCheetah-v5 --recipe tuned --seeds 1 \\
        --num-env-steps 300000
"""
from __future__ import annotations

import argparse
import hashlib
import os
import shlex
import subprocess
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

from run_results import STATISTICS_NOTE, read_result, run_line, saved_steps, table, write_curves

from a2c_ppo_acktr.envs import VEC_ENV_KINDS
from a2c_ppo_acktr.errors import ConfigError
from a2c_ppo_acktr.run.interrupt import Children
from a2c_ppo_acktr.run.rundir import check_dir
from a2c_ppo_acktr.settings import recipes
from a2c_ppo_acktr.settings.arguments import Parser, get_args
from a2c_ppo_acktr.settings.arguments import build_parser as build_main_parser
from a2c_ppo_acktr.settings.checks import BENCHMARK_NUMBERS, check_numbers, check_paths, count
from a2c_ppo_acktr.settings.resolve import given_flags

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CHILDREN = Children()  # the main.py runs; a signal to this process reaches them
# main.py's flags that each run's place in the suite sets, so not the extra flags after "--"
OWN_FLAGS = {"env_name": "--env", "seed": "--seeds", "num_env_steps": "--num-env-steps",
             "vec_env": "--vec-env", "recipe": "--recipe", "log_dir": "--out",
             "save_dir": "--out", "resume": "--reuse", "overwrite": "--reuse"}




def build_parser() -> argparse.ArgumentParser:
    p = Parser(
        description=__doc__.split("\n\n")[0],
        usage="%(prog)s [options] [-- MAIN.PY FLAGS]",
        epilog="-- MAIN.PY FLAGS: added to every run's recipe (e.g. -- --ppo-epoch 10)")
    p.add_argument("--suite", choices=sorted(recipes.SUITES), required=True)
    p.add_argument("--env", nargs="+", default=None,
                   help="env ids of the suite (default: all of the suite's envs)")
    p.add_argument("--seeds", nargs="+", type=int, default=[1, 2, 3], help="(default: 1 2 3)")
    p.add_argument("--num-env-steps", type=count, default=None,
                   help="steps per run (default: the suite's budget: "
                   + ", ".join(f"{s} {b:g}" for s, b in recipes.BUDGETS.items()) + ")")
    p.add_argument("--recipe", nargs="+", choices=recipes.RECIPES, default=["tuned"],
                   help="recipe(s) to run (default: tuned)")
    p.add_argument("--jobs", type=int, default=max(1, (os.cpu_count() or 1) // 2),
                   help="runs at a time; each MuJoCo / classic run is mostly one busy core "
                   "(default: half the cores)")
    p.add_argument("--out", default="benchmark", help="output directory (default: benchmark)")
    p.add_argument("--thresholds", nargs="+", type=float, default=[], metavar="RETURN",
                   help="report the steps at which each run's last-10 mean first reached these")
    p.add_argument("--vec-env", nargs="+", default=[None], choices=VEC_ENV_KINDS, metavar="KIND",
                   help="run each recipe with each of these --vec-env kinds, a row each "
                   "(default: the recipe's, main.py's auto)")
    p.add_argument("--reuse", action="store_true",
                   help="read the runs already finished under --out and continue (main.py "
                   "--resume) those cut short, instead of training them again (default: every "
                   "run trains, replacing its old files)")
    return p


def label(name: str, vec_env: str | None, extra: Sequence[str] = ()) -> str:
    """A table row's recipe: the recipe's name, the extra flags and the backend when chosen."""
    name = " ".join([name, *extra])
    return name if vec_env is None else f"{name}, --vec-env {vec_env}"


def variant_dir(name: str, vec_env: str | None, extra: Sequence[str] = ()) -> str:
    """The folder of a row's runs: ``tuned``, ``tuned-shmem``, ``tuned+<8 hex digits>``."""
    tag = "" if not extra else "+" + hashlib.sha1(shlex.join(extra).encode()).hexdigest()[:8]
    return name + tag + ("" if vec_env is None else f"-{vec_env}")


def overrides(vec_env: str | None) -> dict:
    return {} if vec_env is None else {"vec_env": vec_env}


def whole_updates(env: str, name: str, steps: int, extra: Sequence[str] = ()) -> int:
    """``steps`` rounded down to whole updates of the recipe (what main.py trains)."""
    args = get_args(recipes.command(env, name, steps)[2:] + list(extra))
    per_update = args.num_steps * args.num_processes
    return steps // per_update * per_update


def run_path(out: str, env: str, name: str, seed: int, vec_env: str | None = None,
             extra: Sequence[str] = ()) -> str:
    """The directory of one run: ``<out>/runs/<env>/<variant_dir>/seed<k>``."""
    return os.path.join(out, "runs", env.replace("/", "_"), variant_dir(name, vec_env, extra),
                        f"seed{seed}")


def foreign_runs(jobs: Sequence[tuple], steps: int, out: str) -> list[str]:
    """The jobs' directories whose checkpoint holds more env steps than their recipe trains:
    another run's (another recipe's or budget's), which ``--reuse`` would neither read nor
    continue, and training would overwrite."""
    found = []
    for env, name, vec_env, seed, extra in jobs:
        run_dir = run_path(out, env, name, seed, vec_env, extra)
        saved = saved_steps(run_dir)  # None where no run is
        target = whole_updates(env, name, steps, extra)
        if saved is not None and saved[1] > target:
            found.append(f"{run_dir} holds {saved[1]:,} steps, more than the {target:,} this run "
                         "trains")
    return found


def run_one(env: str, name: str, seed: int, steps: int, out: str, reuse: bool = False,
            vec_env: str | None = None, threads: int = 1, extra: Sequence[str] = ()) -> dict:
    """Train one run to completion on ``threads`` intra-op threads (``OMP_NUM_THREADS`` wins if
    set); returns its result (``score`` None if it failed). ``reuse``: a finished run is read, and
    one cut short (its checkpoint below the budget) continues with ``main.py --resume``.
    ``extra``: main.py flags added to the recipe's."""
    run_dir = run_path(out, env, name, seed, vec_env, extra)
    os.makedirs(run_dir, exist_ok=True)
    saved = saved_steps(run_dir) if reuse else None
    target = whole_updates(env, name, steps, extra)
    row = label(name, vec_env, extra)
    if saved is not None and saved[1] == target:
        return read_result(env, row, seed, steps, run_dir, 0, None)
    dirs = ["--log-dir", os.path.join(run_dir, "logs"), "--save-dir", os.path.join(run_dir, "models")]
    main_py = [sys.executable, os.path.join(ROOT, "main.py")]
    if saved is not None and saved[1] < target:  # its saved flags, its paths wherever it now lies
        argv, mode = main_py + ["--resume", saved[0], "--num-env-steps", str(steps)] + dirs, "a"
    else:
        argv = main_py + recipes.command(env, name, steps, seed, **overrides(vec_env))[2:]
        argv, mode = argv + list(extra) + dirs + ["--overwrite"], "w"
    # The cores shared out among the parallel runs, which would otherwise contend for them.
    env_vars = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", str(threads))}
    start = time.time()
    with open(os.path.join(run_dir, "stdout.log"), mode) as log:
        rc = CHILDREN.call(argv, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, env=env_vars)
    if rc is None:  # stopped before its turn
        return {"env": env, "recipe": row, "seed": seed, "steps": steps,
                "rc": None, "dir": run_dir, "score": None, "curve": None}
    wall = time.time() - start if mode == "w" else None  # resumed: the log's parts summed
    return read_result(env, row, seed, steps, run_dir, rc, wall)


def check_extra(p: argparse.ArgumentParser, extra: list[str], envs: list[str],
                recipe_names: list[str], vec_envs: list[str | None], steps: int) -> None:
    """One line and exit 2, before any run starts, where the flags after "--" set what the
    benchmark sets or fail main.py's own checks with some env, recipe or backend."""
    if not extra:
        return
    taken = [d for d in given_flags(build_main_parser(), extra) if d in OWN_FLAGS]
    if taken:
        p.error(f"after --: --{', --'.join(d.replace('_', '-') for d in taken)}: benchmark.py "
                f"sets {'that' if len(taken) == 1 else 'those'} for each run (with its "
                f"{', '.join(sorted({OWN_FLAGS[d] for d in taken}))}, before --)")
    for env in envs:
        for name in recipe_names:
            for vec_env in vec_envs:
                get_args(recipes.command(env, name, steps, **overrides(vec_env))[2:] + extra)


def main(argv: list[str] | None = None) -> int:
    p = build_parser()
    argv = sys.argv[1:] if argv is None else list(argv)
    cut = argv.index("--") if "--" in argv else len(argv)
    args, extra = p.parse_args(argv[:cut]), argv[cut + 1:]
    envs = args.env or list(recipes.SUITES[args.suite])
    unknown = [e for e in envs if e not in recipes.SUITES[args.suite]]
    if unknown:
        p.error(f"not in the {args.suite} suite: {', '.join(unknown)} (choose from "
                f"{', '.join(recipes.SUITES[args.suite])})")
    try:
        check_numbers(args, BENCHMARK_NUMBERS)
        check_paths(args, ["out"])
        check_dir(args.out, "--out")
    except ConfigError as e:
        p.error(str(e))
    steps = args.num_env_steps or recipes.BUDGETS[args.suite]
    check_extra(p, extra, envs, args.recipe, args.vec_env, steps)
    out = os.path.abspath(args.out)
    # a variant runs beside its recipe: the table compares the two
    variants: list[list[str]] = [[], extra] if extra else [[]]
    jobs = [(e, name, v, s, x) for e in envs for name in args.recipe for v in args.vec_env
            for x in variants for s in args.seeds]
    foreign = foreign_runs(jobs, steps, out) if args.reuse else []
    if foreign:
        more = f" (and {len(foreign) - 1} more)" if len(foreign) > 1 else ""
        p.error(f"--reuse: {foreign[0]}{more}: another run's, left as it is; move it or choose "
                "another --out")
    results = []
    threads = max(1, (os.cpu_count() or 1) // args.jobs)  # each run's share of the cores
    with CHILDREN, ThreadPoolExecutor(args.jobs) as pool:
        futures = [pool.submit(run_one, e, name, s, steps, out, args.reuse, v, threads, x)
                   for e, name, v, s, x in jobs]
        for f, (_, name, v, _, x) in zip(futures, jobs):
            results.append({**f.result(), "baseline": label(name, v) if x else None})
            print(run_line(results[-1], args.thresholds), flush=True)
    text = table(results, args.thresholds)
    commands = sorted({shlex.join(recipes.command(e, name, steps, **overrides(v))[:-2] + x)
                       for e, name, v, _, x in jobs})
    with open(os.path.join(out, "results.md"), "w") as f:
        f.write(text + f"\n\n{STATISTICS_NOTE}\n\nCommands (plus `--seed <k>`):\n\n```bash\n"
                + "\n".join(commands) + "\n```\n")
    print(text)
    print(STATISTICS_NOTE)
    for path in write_curves(results, out):
        print(path)
    if CHILDREN.signum is not None:
        return 128 + CHILDREN.signum
    return 0 if all(r["rc"] == 0 for r in results) else 1


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:  # before or after the runs (during them, CHILDREN stops them)
        print("benchmark.py: interrupted", file=sys.stderr)
        sys.exit(130)
