#!/usr/bin/env python
"""Tune main.py's flags with Optuna: TPE sampling, trials pruned at the median of the learning curve.

    python scripts/tune.py --env-name CartPole-v1 --algo ppo --n-trials 20 --seeds 1 2 3 \\
        --search lr=log:1e-5:1e-2 clip-param=choice:0.1,0.2,0.3 -- --num-env-steps 100000

A trial is one main.py run per seed (all seeds at once, each under
``<out>/<study>/trial<k>/seed<s>/``) with the flags after ``--`` and the trial's values of the
searched flags; its value is the mean over seeds of the last-10 score (``benchmark.py``'s). While
the runs train, the mean over seeds of their logged last-10 return is reported at each tenth of the
budget, and Optuna's median pruner stops a trial that falls below the median of the trials before
it there. ``--search FLAG=DIST`` (FLAG: main.py's flag without dashes; DIST ``log:LOW:HIGH``,
``float:LOW:HIGH``, ``int:LOW:HIGH`` or ``choice:A,B,...``; ``choice:true,false`` for a switch);
without ``--search``, rl-baselines3-zoo's PPO or A2C space in main.py's flags (``SPACES``).

The study lives in ``--storage`` (default ``sqlite:///<study>.db``; any SQLAlchemy URL, e.g. a
PostgreSQL server for many machines): several tune.py processes on one storage share it, and the
study ends at ``--n-trials`` finished (complete or pruned) trials, counting every process's. Ctrl-C
or SIGTERM stops the running trial (lost; its runs save) and starting the same command again
continues the study; a process killed outright loses only its running trial (failed once its
heartbeat is older than 30 s). At the end: the best trial's flags as a main.py command and as a
file that ``main.py --config`` reads (``<study>_best.json``, or ``--best-config``).
"""
from __future__ import annotations

import argparse
import csv
import ctypes
import glob
import json
import math
import os
import shlex
import signal
import subprocess
import sys
import time
import warnings
from collections.abc import Sequence

import numpy as np

from a2c_ppo_acktr.algo import ALGOS
from a2c_ppo_acktr.analysis import stats
from a2c_ppo_acktr.analysis.episodes import load_run
from a2c_ppo_acktr.errors import ConfigError, LogError
from a2c_ppo_acktr.run.interrupt import Children
from a2c_ppo_acktr.run.rundir import check_dir
from a2c_ppo_acktr.settings.arguments import Parser, get_args
from a2c_ppo_acktr.settings.arguments import build_parser as build_main_parser
from a2c_ppo_acktr.settings.checks import COUNT, SEED, check_numbers, check_paths, count
from a2c_ppo_acktr.settings.resolve import given_flags
from space import Spec, specs_of

try:
    import optuna

    from study import PROCESS, finished, open_study, room, surplus
except ImportError:  # the .[tune] extra: one line says so
    optuna = None

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
POLL_S = 1.0  # how often a trial reads its runs' progress.csv
REPORTS = 10  # points of the learning curve reported to the pruner: each tenth of the budget
FAILS = 5  # trials in a row that fail (failed trials do not count toward --n-trials): it stops


def build_parser() -> Parser:
    p = Parser(prog="tune.py", description=__doc__.split("\n\n")[0],
               usage="%(prog)s --env-name ENV [options] [-- MAIN.PY FLAGS]",
               epilog="-- MAIN.PY FLAGS: given to every run (e.g. -- --num-env-steps 100000)")
    p.add_argument("--env-name", required=True)
    p.add_argument("--algo", choices=ALGOS, default="ppo", help="(default: ppo)")
    p.add_argument("--n-trials", type=count, default=20,
                   help="finished trials of the study, all processes' together (default: 20)")
    p.add_argument("--seeds", nargs="+", type=int, default=[1], help="a run per seed (default: 1)")
    p.add_argument("--study-name", help="(default: <algo>-<env-name>)")
    p.add_argument("--storage", help="an SQLAlchemy URL (default: sqlite:///<study-name>.db)")
    p.add_argument("--search", nargs="+", action="extend", default=[], metavar="FLAG=DIST",
                   help="log:LOW:HIGH, float:LOW:HIGH, int:LOW:HIGH or choice:A,B,... (default: "
                   "the zoo's space of --algo)")
    p.add_argument("--out", default="tune", help="the trials' runs, under <out>/<study-name>/ "
                   "(default: tune)")
    p.add_argument("--best-config", metavar="PATH",
                   help="the best flags as a --config file (default: <study-name>_best.json)")
    return p


RUNS = Children()  # a trial's runs; a pruned trial's are killed
_LIBC = ctypes.CDLL(None) if sys.platform.startswith("linux") else None


def _die_with_parent() -> None:  # kill -9 of tune.py takes its runs along (Linux)
    if _LIBC is not None:
        _LIBC.prctl(1, 9)  # PR_SET_PDEATHSIG, SIGKILL


class Stopped(Exception):
    """Ctrl-C or SIGTERM: the trial's runs saved and stopped."""


class Surplus(Exception):
    """A trial beyond the study's budget, begun as another process began the last one: not run."""


def logged(log_dir: str) -> list[tuple[int, float]]:
    """(env steps, logged last-10 return) of each row of the run's progress.csv that has one."""
    rows: list[tuple[int, float]] = []
    for path in glob.glob(os.path.join(log_dir, "**", "progress.csv"), recursive=True):
        with open(path, newline="") as f:
            rows += [(int(r["timesteps"]), float(r["mean_return"])) for r in csv.DictReader(f)
                     if r.get("mean_return")]
    return rows


def curve_point(runs: list[list[tuple[int, float]]], step: int) -> float | None:
    """The mean over runs of each one's last logged return at or before ``step``; None until every
    run has logged one and trained past ``step``."""
    values = []
    for rows in runs:
        before = [value for steps, value in rows if steps <= step]
        if not before or rows[-1][0] < step:
            return None
        values.append(before[-1])
    return float(np.mean(values))


class Trials:
    """What every trial of the study runs: the command before the searched flags, the seeds,
    where the runs go."""

    def __init__(self, args: argparse.Namespace, specs: list[Spec], fixed: list[str]) -> None:
        self.args, self.specs, self.fixed = args, specs, fixed
        self.budget = get_args(fixed).num_env_steps
        self.out = os.path.abspath(os.path.join(args.out, args.study_name))
        self.threads = str(max(1, (os.cpu_count() or 1) // len(args.seeds)))
        self.failed = 0  # trials in a row

    def __call__(self, trial) -> float:
        if surplus(trial.study, trial.number, self.args.n_trials):
            print(f"trial {trial.number}: not run: {self.args.n_trials} trials of the study have "
                  "finished or are running", flush=True)
            raise Surplus()
        values = {spec.flag: spec.suggest(trial) for spec in self.specs}
        flags = [a for spec in self.specs for a in spec.argv(values[spec.flag])]
        trial.set_user_attr("flags", flags)
        trial.set_user_attr("process", PROCESS)
        shown = f"trial {trial.number}: {shlex.join(flags)}"
        dirs = [os.path.join(self.out, f"trial{trial.number}", f"seed{seed}")
                for seed in self.args.seeds]
        procs = []
        env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", self.threads)}
        for seed, d in zip(self.args.seeds, dirs):
            os.makedirs(d, exist_ok=True)
            argv = [sys.executable, os.path.join(ROOT, "main.py"), *self.fixed, *flags,
                    "--seed", str(seed), "--log-dir", os.path.join(d, "logs"),
                    "--save-dir", os.path.join(d, "models"), "--overwrite"]
            with open(os.path.join(d, "stdout.log"), "w") as log:
                proc = RUNS.start(argv, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, env=env,
                                  preexec_fn=_die_with_parent)
            if proc is None:
                break
            procs.append(proc)
        reported = 0
        while len(procs) == len(dirs) and any(p.poll() is None for p in procs):
            time.sleep(POLL_S)
            curves = [logged(os.path.join(d, "logs")) for d in dirs]
            while reported < REPORTS - 1 and RUNS.signum is None:
                step = self.budget * (reported + 1) // REPORTS
                point = curve_point(curves, step)
                if point is None:
                    break
                trial.report(point, step)
                reported += 1
                if trial.should_prune():
                    for p in procs:
                        RUNS.end(p, kill=True)
                    print(f"{shown}: pruned at {step:,} steps ({point:.1f})", flush=True)
                    raise optuna.TrialPruned()
        codes = [RUNS.end(p) for p in procs]
        if RUNS.signum is not None:
            raise Stopped()
        failed = [(seed, d, rc) for seed, d, rc in zip(self.args.seeds, dirs, codes) if rc != 0]
        try:
            scores = [stats.final_score(load_run(os.path.join(d, "logs"))[1]) for d in dirs]
        except LogError as e:
            failed = failed or [(self.args.seeds[0], dirs[0], str(e))]
        if failed:
            seed, d, why = failed[0]
            log = os.path.join(d, "stdout.log")
            if isinstance(why, int):  # its last line: main.py's one-line error, if it gave one
                with open(log, errors="replace") as f:
                    last = ([line.strip() for line in f if line.strip()] or [""])[-1]
                why = f"exit status {why}: {last}"
            print(f"{shown}: failed: seed {seed}: {why} (see {log})", flush=True)
            self.failed += 1
            return math.nan  # a failed trial: the study goes on
        self.failed = 0
        value = float(np.mean(scores))
        trial.set_user_attr("scores", scores)
        seeds = "seeds" if len(scores) > 1 else "seed"
        print(f"{shown}: {value:.1f} ({seeds} {', '.join(map(str, self.args.seeds))}: "
              f"{' / '.join(f'{s:.1f}' for s in scores)})", flush=True)
        return value


def report_best(study, fixed: list[str], path: str) -> int:
    """Print the best trial's flags as a main.py command; write them as a --config file."""
    complete = study.get_trials(deepcopy=False, states=[optuna.trial.TrialState.COMPLETE])
    if not complete:
        print("tune.py: no trial of the study has finished with a score yet", file=sys.stderr)
        return 1
    best = study.best_trial
    flags = fixed + best.user_attrs["flags"]
    scores = best.user_attrs.get("scores", [])
    over = f"mean over {len(scores)} seeds" if len(scores) > 1 else "one seed"
    print(f"best: trial {best.number} of {len(study.trials)}, {best.value:.1f} "
          f"(last-10 return, {over})")
    log_dir = [] if "--log-dir" in flags else ["--log-dir", os.path.join("logs", study.study_name)]
    print(shlex.join(["python", "main.py", *flags, *log_dir]))  # not main.py's shared /tmp/gym
    with open(path, "w") as f:
        json.dump(given_flags(build_main_parser(), flags), f, indent=1)
        f.write("\n")
    print(f"wrote {path}: python main.py --config {path} runs it")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    p = build_parser()
    argv = sys.argv[1:] if argv is None else list(argv)
    cut = argv.index("--") if "--" in argv else len(argv)
    args, extra = p.parse_args(argv[:cut]), argv[cut + 1:]
    if optuna is None:
        p.error("needs optuna: pip install -e .[tune]")
    args.study_name = args.study_name or f"{args.algo}-{args.env_name.replace('/', '_')}"
    try:
        check_numbers(args, {"seeds": SEED, "n_trials": COUNT})
        check_paths(args, ["out", "best_config", "storage", "study_name"])
        check_dir(args.out, "--out")  # before a trial runs: where its runs and the best go
        best = args.best_config or f"{args.study_name}_best.json"
        if os.path.isdir(best):
            raise ConfigError(f"--best-config {best} is a directory: give a file's path")
        check_dir(os.path.dirname(os.path.abspath(best)), "--best-config")
    except ConfigError as e:
        p.error(str(e))
    specs, fixed = specs_of(p, args, extra)
    optuna.logging.set_verbosity(optuna.logging.ERROR)  # tune.py prints a line per trial
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)  # heartbeat
    study, storage = open_study(p, args.study_name,
                                args.storage or f"sqlite:///{args.study_name}.db")

    def stopped() -> bool:
        return RUNS.signum is not None

    trials = Trials(args, specs, fixed)

    def enough(study, trial) -> None:  # every process's trials count, those running too
        if trials.failed >= FAILS or not room(study, storage, args.n_trials, stopped):
            study.stop()
    with RUNS:
        try:
            if room(study, storage, args.n_trials, stopped):
                study.optimize(trials, callbacks=[enough], catch=(Surplus,))
            if RUNS.signum is not None:
                raise Stopped()
        except Stopped:
            name = signal.Signals(RUNS.signum or signal.SIGINT).name
            print(f"tune.py: {name}: stopped, the running trial lost; {finished(study)} of "
                  f"{args.n_trials} trials finished; the same command continues the study",
                  file=sys.stderr)
            return 128 + (RUNS.signum or signal.SIGINT)
    if trials.failed >= FAILS:
        print(f"tune.py: {FAILS} trials in a row failed (their lines above say why); stopped",
              file=sys.stderr)
        return 1
    return report_best(study, fixed, args.best_config or f"{args.study_name}_best.json")


if __name__ == "__main__":
    sys.exit(main())
