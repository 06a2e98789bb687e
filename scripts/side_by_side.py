#!/usr/bin/env python
"""Ours against a peer's rerun, env by env, under every metric: docs/results.md's side-by-side
table, made from run directories.

``--ours DIR`` and ``--peer DIR`` are two ``--log-dir``s (``<dir>/<algo>/<env>_seed<s>/``, as
main.py and ``scripts/peers.py`` write them); the envs and seeds both hold for ``--algo`` are
compared. Each row is one (env, metric): each side's IQM over seeds with its 95% stratified
bootstrap interval, P(ours > peer) with its interval (``compare.py``'s statistics,
``a2c_ppo_acktr/analysis/metrics.py``'s metrics) and both sides' scores seed by seed. A
metric a side has no files for (a run without ``final_eval.json`` or ``eval/eval.csv``) gives
"-" and a note under the table.

    python scripts/side_by_side.py --ours runs/ours --peer runs/zoo --algo ppo
"""
from __future__ import annotations

import glob
import json
import os
import re
import sys

import compare as compare_py
from a2c_ppo_acktr.analysis import metrics, stats
from a2c_ppo_acktr.config.env import parse_env_kwargs
from a2c_ppo_acktr.errors import LogError
from a2c_ppo_acktr.run.checkpoint import CONFIG_FILE
from a2c_ppo_acktr.settings.arguments import Parser
from a2c_ppo_acktr.settings.checks import count


def build_parser() -> Parser:
    p = Parser(prog="side_by_side.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--ours", required=True, metavar="DIR", help="our runs' --log-dir")
    p.add_argument("--peer", required=True, metavar="DIR", help="the peer's --out")
    p.add_argument("--algo", required=True, help="the algorithm's folder in both: ppo, a2c, ...")
    p.add_argument("--peer-name", default="zoo", help="the peer's label (default: zoo)")
    p.add_argument("--resamples", type=count, default=stats.RESAMPLES,
                   help=f"bootstrap resamples (default: {stats.RESAMPLES})")
    return p


def runs_of(log_dir: str, algo: str) -> dict[str, dict[int, str]]:
    """``{env file name: {seed: run dir}}`` under ``<log_dir>/<algo>/``."""
    found: dict[str, dict[int, str]] = {}
    for d in sorted(glob.glob(os.path.join(glob.escape(log_dir), algo, "*_seed*"))):
        m = re.fullmatch(r"(.+)_seed(-?\d+)", os.path.basename(d))
        if m and os.path.isdir(d):
            found.setdefault(m[1], {})[int(m[2])] = d
    return found


def rows(ours: dict, peer: dict, name: str, resamples: int) -> tuple[list[str], list[str]]:
    """The table's rows and the notes on what could not be scored."""
    lines, notes = [], []
    for env in sorted(set(ours) & set(peer)):
        seeds = sorted(set(ours[env]) & set(peer[env]))
        if not seeds:
            continue
        kwargs = {repr(env_kwargs_of(d))
                  for d in [ours[env][s] for s in seeds] + [peer[env][s] for s in seeds]}
        if len(kwargs) > 1:
            notes.append(f"{env}: the runs made their envs with other gym.make kwargs "
                         f"({', '.join(sorted(kwargs))}): not the same env")
        specs = [(name, [peer[env][s] for s in seeds]), ("ours", [ours[env][s] for s in seeds])]
        try:
            runs, dirs = compare_py.load(specs)
        except LogError as e:
            notes.append(f"{env}: {e}")
            continue
        for metric in metrics.METRICS:
            try:
                scores = compare_py.scores_of(runs, dirs, metric)
            except LogError as e:
                notes.append(f"{env}, {metric}: {e}")
                lines.append(f"| {env} | {metric} | {', '.join(map(str, seeds))} | - | - | - | - |")
                continue
            (env_id, by), = scores.items()
            a, b = stats.summary([by["ours"]], resamples), stats.summary([by[name]], resamples)
            p = stats.compare([by["ours"]], [by[name]], resamples)
            lines.append(f"| {env_id} | {metric} | {', '.join(map(str, seeds))} | "
                         f"{compare_py.interval(a['iqm'], a['iqm_ci'])} | "
                         f"{compare_py.interval(b['iqm'], b['iqm_ci'])} | "
                         f"{stats.interval_text(p['p'], p['ci'], 2)} | "
                         f"{per_seed(by['ours'])}; {per_seed(by[name])} |")
    return lines, notes


def env_kwargs_of(run_dir: str) -> dict:
    """The gym.make keyword arguments a run's config.json records: ours as ``--env-kwargs``
    flags, a peer's as a dict."""
    try:
        with open(os.path.join(run_dir, CONFIG_FILE)) as f:
            config = json.load(f)
    except (OSError, ValueError):
        return {}
    if "flags" in config:
        return parse_env_kwargs(config["flags"].get("env_kwargs") or [])
    return config.get("env_kwargs") or {}


def per_seed(scores: list[float]) -> str:
    """A side's scores in seed order, rounded: ``2476 / 3413 / 3057``."""
    return " / ".join(f"{x:.0f}" for x in scores)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    for flag, d in (("--ours", args.ours), ("--peer", args.peer)):
        if not os.path.isdir(os.path.join(d, args.algo)):
            print(f"side_by_side.py: error: {flag} {d} holds no {args.algo}/ runs", file=sys.stderr)
            return 2
    lines, notes = rows(runs_of(args.ours, args.algo), runs_of(args.peer, args.algo),
                        args.peer_name, args.resamples)
    if not lines:
        print(f"side_by_side.py: error: no env and seed has runs in both {args.ours} and "
              f"{args.peer}", file=sys.stderr)
        return 2
    print(f"| env | metric | seeds | ours: IQM [95% CI] | {args.peer_name}: IQM [95% CI] | "
          f"P(ours > {args.peer_name}) [95% CI] | per seed: ours; {args.peer_name} |")
    print("|---|---|---|---|---|---|---|")
    print("\n".join(lines))
    for note in notes:
        print(f"\nnote: {note}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
