#!/usr/bin/env python
"""Compare variants over seeds with the statistics the field asks for (Agarwal et al. 2021).

Each ``--run LABEL=DIR[,DIR...]`` is one variant; each DIR one seed's log dir (as ``plot.py
--run``; globs allowed); the first label is the baseline. A run's score is its ``--metric``
(``a2c_ppo_acktr/analysis/metrics.py``): ``last10`` (default; the mean return of its last 10 training
episodes, as ``benchmark.py``), ``last100``, ``final-det`` (its final deterministic evaluation)
or ``max-eval`` (its evaluation where the label's seed-mean evaluation curve peaks). Per env and
label: the mean and the
interquartile mean (IQM), each with a 95% stratified bootstrap confidence interval, the number of
seeds and, against the baseline, the probability of improvement P(label > baseline) (ties count
one half) with its interval. With several envs, scores are normalized per env
(``a2c_ppo_acktr/analysis/reference_scores.py``: Atari human-normalized) and aggregated over envs as
well. ``--out DIR``: IQM learning curves with their bands, one figure per env, and the
performance profiles. ``--seed`` and ``--resamples`` make the intervals reproducible.

    python scripts/compare.py --run 'ppo=logs/ppo-s*' --run 'ppo lr 1e-3=logs/lr-s*' --out cmp

A dir that is missing, empty or not a run: one line, exit status 2.
"""
from __future__ import annotations

import json
import os
import sys

import numpy as np
from plot import expand_dirs, parse_run_spec

from a2c_ppo_acktr.analysis import metrics, reference_scores, stats
from a2c_ppo_acktr.analysis.episodes import load_run
from a2c_ppo_acktr.errors import ConfigError, LogError
from a2c_ppo_acktr.run.rundir import check_dir
from a2c_ppo_acktr.settings.arguments import Parser
from a2c_ppo_acktr.settings.checks import count
from curves import aggregate, env_filename, plot_curves

ALL = "all"  # the aggregate over envs, in the JSON beside the env ids


def build_parser() -> Parser:
    p = Parser(prog="compare.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--run", type=parse_run_spec, action="append", required=True,
                   metavar="LABEL=DIR[,DIR...]",
                   help="a variant's runs, one dir per seed; repeatable; the first is the baseline")
    p.add_argument("--seed", type=int, default=stats.SEED,
                   help=f"the bootstrap's seed (default: {stats.SEED})")
    p.add_argument("--resamples", type=count, default=stats.RESAMPLES,
                   help=f"bootstrap resamples (default: {stats.RESAMPLES})")
    p.add_argument("--metric", default="last10", choices=list(metrics.METRICS),
                   help="how a run is scored: " + "; ".join(
                       f"{name}: {what}" for name, what in metrics.METRICS.items())
                   + " (default: last10)")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of tables")
    p.add_argument("--out", metavar="DIR",
                   help="write IQM learning curves (<env>.png) and performance profiles "
                   "(profile.png) there")
    return p


def load(specs: list[tuple[str, list[str]]]
         ) -> tuple[dict[str, dict[str, list]], dict[str, dict[str, list[str]]]]:
    """``{env_id: {label: [(steps, returns), ...]}}`` and ``{env_id: {label: [dir, ...]}}``, in
    command-line order."""
    runs: dict[str, dict[str, list]] = {}
    dirs: dict[str, dict[str, list[str]]] = {}
    for label, patterns in specs:
        for d in expand_dirs(patterns):
            steps, returns, env_id = load_run(d)
            runs.setdefault(env_id, {}).setdefault(label, []).append((steps, returns))
            dirs.setdefault(env_id, {}).setdefault(label, []).append(d)
    return runs, dirs


def warn_of(runs: dict[str, dict[str, list]]) -> None:
    """One line on stderr for each label whose runs end far apart (their last-10 returns are of
    different points of training) or that has one seed (an interval needs several)."""
    for env, by in runs.items():
        for label, rs in by.items():
            ends = [int(steps[-1]) for steps, _ in rs]
            if min(ends) < 0.9 * max(ends):
                print(f"compare.py: warning: {label} on {env} mixes run lengths ({min(ends):,} to "
                      f"{max(ends):,} steps): its scores are of different points of training",
                      file=sys.stderr)
            if len(rs) == 1:
                print(f"compare.py: warning: {label} on {env} has one seed: its intervals are that "
                      "run's score; intervals need several seeds", file=sys.stderr)


def scores_of(runs: dict[str, dict[str, list]], dirs: dict[str, dict[str, list[str]]],
              metric: str = "last10") -> dict[str, dict[str, np.ndarray]]:
    """Each run's ``metric`` score (``analysis/metrics.py``), as ``runs`` is laid out."""
    return {env: {label: metrics.scores(metric, dirs[env][label], [r for _, r in rs])
                  for label, rs in by.items()} for env, by in runs.items()}


def normalized(scores: dict[str, dict[str, np.ndarray]], labels: list[str]
               ) -> tuple[dict[str, list[np.ndarray]] | None, str]:
    """Each label's normalized scores, one stratum per env, or None and why not."""
    envs = list(scores)
    missing = [f"{label} has no runs of {env}" for env in envs for label in labels
               if label not in scores[env]]
    unknown = [env for env in envs if reference_scores.bounds(env) is None]
    if missing or unknown:
        return None, "; ".join(missing) or (
            f"no random and reference score for {', '.join(unknown)} "
            "(a2c_ppo_acktr/analysis/reference_scores.py)")
    strata = {label: [stats.normalize(scores[env][label], *reference_scores.bounds(env)[:2])
                      for env in envs] for label in labels}
    suites = sorted({reference_scores.bounds(env)[2] for env in envs})
    return strata, "; ".join(reference_scores.SOURCES[s] for s in suites)


def grouped(scores: dict[str, dict[str, np.ndarray]], labels: list[str]
            ) -> tuple[dict[str, dict[str, list[np.ndarray]]], str | None, str | None]:
    """``{env_id or "all": {label: strata}}``: one stratum per env, the aggregate's normalized;
    the normalization's sources, and why there is no aggregate (None: there is, or one env)."""
    groups = {env: {label: [s] for label, s in by.items()} for env, by in scores.items()}
    if len(scores) == 1:
        return groups, None, None
    strata, why = normalized(scores, labels)
    if strata is None:
        return groups, None, why
    return {**groups, ALL: strata}, why, None


def report(groups: dict[str, dict[str, list[np.ndarray]]], base: str, resamples: int,
           seed: int) -> dict:
    """The JSON object of the comparison: each group's summaries and P(label > ``base``)."""
    result: dict = {"envs": {}, "improvement": {}}
    for env, by in groups.items():
        result["envs"][env] = {label: stats.summary(s, resamples, seed) for label, s in by.items()}
        if base in by:
            result["improvement"][env] = {label: stats.compare(s, by[base], resamples, seed)
                                          for label, s in by.items() if label != base}
    result["bootstrap"] = {"resamples": resamples, "seed": seed, "level": stats.LEVEL}
    return result


def interval(value: float, ci: list[float]) -> str:
    return stats.interval_text(value, ci, digits(value))


def digits(value: float) -> int:
    return 0 if abs(value) >= 100 else 1 if abs(value) >= 10 else 2


def tables(result: dict, base: str) -> str:
    b, metric = result["bootstrap"], result["metric"]
    lines = [f"{metric} ({metrics.METRICS[metric]}); 95% stratified bootstrap intervals "
             f"({b['resamples']:,} resamples, seed {b['seed']})"]
    for env, by in result["envs"].items():
        what = f"{metric}, normalized: {result['normalization']}" if env == ALL else metric
        lines += ["", f"{'all envs' if env == ALL else env} ({what})", "",
                  f"| run | seeds | mean [95% CI] | IQM [95% CI] | P(run > {base}) [95% CI] |",
                  "|---|---|---|---|---|"]
        for label, s in by.items():
            p = result["improvement"].get(env, {}).get(label)
            vs = "baseline" if label == base else "-" if p is None else interval(p["p"], p["ci"])
            lines.append(f"| {label} | {s['n']} | {interval(s['mean'], s['mean_ci'])} | "
                         f"{interval(s['iqm'], s['iqm_ci'])} | {vs} |")
    return "\n".join(lines)


def figures(runs: dict[str, dict[str, list]], groups: dict[str, dict[str, list[np.ndarray]]],
            out: str, resamples: int, seed: int, metric: str = "last10") -> list[str]:
    """IQM learning curves per env (of the training episodes, titled with the runs' ``metric``);
    the performance profiles of the ``metric`` scores where they share a scale (one env, or all
    envs normalized)."""
    written = []
    for env, by in runs.items():
        curves = []
        for label, rs in by.items():
            try:
                curves.append((label, len(rs), aggregate(rs, band="iqm")))
            except ValueError as e:  # runs that do not overlap in env steps
                raise LogError(f"{env}, {label}: {e}") from None
        written.append(plot_curves(curves, os.path.join(out, env_filename(env)),
                                   f"{env} (runs scored by {metric})", band="iqm"))
    if len(groups) > 1 and ALL not in groups:
        return written  # several envs, each on its own scale
    key = ALL if ALL in groups else next(iter(groups))
    every = np.concatenate([np.concatenate(s) for s in groups[key].values()])
    taus = np.linspace(every.min(), every.max(), 101)
    profiles = [(label, sum(map(len, s)), (taus, *stats.profile_band(s, taus, resamples, seed)))
                for label, s in groups[key].items()]
    xlabel = f"normalized {metric} (tau)" if key == ALL else f"{metric} return (tau)"
    written.append(plot_curves(profiles, os.path.join(out, "profile.png"),
                               f"performance profile ({metric})",
                               band="ci", xlabel=xlabel,
                               ylabel="fraction of runs with score > tau"))
    return written


def main(argv: list[str] | None = None) -> int:
    p = build_parser()
    args = p.parse_args(argv)
    if not 0 <= args.seed < 2**32:
        p.error(f"--seed must be an integer from 0 to 2**32 - 1, got {args.seed}")
    try:
        if args.out is not None:
            check_dir(args.out, "--out")  # before any run is read
    except ConfigError as e:
        p.error(str(e))
    labels = list(dict.fromkeys(label for label, _ in args.run))
    try:
        runs, dirs = load(args.run)
        warn_of(runs)
        groups, sources, why = grouped(scores_of(runs, dirs, args.metric), labels)
        result = {"metric": args.metric, **report(groups, labels[0], args.resamples, args.seed)}
        if sources:
            result["normalization"] = sources
        written = (figures(runs, groups, args.out, args.resamples, args.seed, args.metric)
                   if args.out else [])
    except LogError as e:
        print(f"compare.py: error: {e}", file=sys.stderr)
        return 2
    except OSError as e:  # a figure that cannot be written (a full disk)
        print(f"compare.py: error: cannot write {e.filename or 'a figure'}: {e.strerror or e}",
              file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(result))
    else:
        print(tables(result, labels[0]))
        if why:
            print(f"\nno aggregate over envs: {why}")
    for path in written:
        print(path, file=sys.stderr if args.json else sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
