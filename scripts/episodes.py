#!/usr/bin/env python
"""What a run's games were, window by window: the episodes of its monitor files summed up.

A learning curve's point is a mean of the last few episodes, which one long game can carry (a
Breakout tunnel scores 350 where the policy's games score 20); this reads all the episodes that
ended in each window of env steps: how many, their mean (with its standard error) and median
score, and their mean length. ``--by-score`` bins the episodes by score instead and gives each
bin's mean length (do games at the same score take the same number of steps?).

Examples::

    python scripts/episodes.py 'ale, seed 1=logs/ppo/PongNoFrameskip-v4_seed1' --windows 0 500000 1000000
    python scripts/episodes.py 'shmem=runs/s1,runs/s2' --by-score -21 -20 -10 0 10 21.5

Several dirs under one label, or a log dir of several seeds, are pooled (their episodes
together), one row per env. Prints markdown tables; a
missing or empty run is one line on stderr and exit status 2.
"""
from __future__ import annotations

import sys

import numpy as np
from plot import expand_dirs, parse_run_spec

from a2c_ppo_acktr.analysis.episodes import load_episodes
from a2c_ppo_acktr.errors import LogError
from a2c_ppo_acktr.settings.arguments import Parser


def build_parser() -> Parser:
    p = Parser(prog="episodes.py", description=__doc__.split("\n\n")[0])
    p.add_argument("runs", nargs="+", type=parse_run_spec, metavar="LABEL=DIR[,DIR...]",
                   help="a run's log dir (its monitor files); several dirs: pooled")
    group = p.add_mutually_exclusive_group()
    group.add_argument("--windows", nargs="+", type=float, metavar="STEP",
                       help="edges of the windows of env steps (default: the whole run)")
    group.add_argument("--by-score", nargs="+", type=float, metavar="SCORE",
                       help="edges of score bins [a, b): each bin's mean game length")
    return p


def pooled(label: str, dirs: list[str]) -> list[tuple[str, tuple[np.ndarray, ...]]]:
    """Per env of the runs in ``dirs``: its row's label (``label``, with the env's id where they
    hold several) and (end step, score, length) of every episode of its runs."""
    by_env: dict[str, list] = {}
    for d in expand_dirs(dirs):
        steps, scores, lengths, env_id = load_episodes(d)
        by_env.setdefault(env_id, []).append((steps, scores, lengths))
    return [(f"{label} [{env}]" if len(by_env) > 1 else label,
             tuple(np.concatenate(parts) for parts in zip(*runs))) for env, runs in by_env.items()]


def window_cell(scores: np.ndarray, lengths: np.ndarray) -> str:
    if len(scores) == 0:
        return "-"
    se = scores.std(ddof=1) / np.sqrt(len(scores)) if len(scores) > 1 else float("nan")
    return (f"{scores.mean():.1f} ± {se:.1f} (median {np.median(scores):g}), "
            f"{len(scores)} games of {lengths.mean():.0f} steps")


def span(a: float, b: float) -> str:
    return f"{a:,.0f}-{b:,.0f}"


def main(argv: list[str] | None = None) -> int:
    p = build_parser()
    args = p.parse_args(argv)
    for name in ("windows", "by_score"):
        edges = getattr(args, name)
        if edges is not None and (len(edges) < 2 or any(b <= a for a, b in zip(edges, edges[1:]))):
            p.error(f"--{name.replace('_', '-')} takes 2 or more increasing edges, got "
                    f"{' '.join(f'{e:g}' for e in edges)}")
    try:
        data = [row for label, dirs in args.runs for row in pooled(label, dirs)]
    except LogError as e:
        print(f"episodes.py: error: {e}", file=sys.stderr)
        return 2
    if args.by_score:
        edges, column = args.by_score, lambda a, b: f"score [{a:g}, {b:g})"
    else:
        edges = args.windows or [0, max(float(s.max()) for _, (s, _, _) in data)]
        column = span
    print("| run | " + " | ".join(column(a, b) for a, b in zip(edges, edges[1:])) + " |")
    print("|---" * len(edges) + "|")
    for label, (steps, scores, lengths) in data:
        cells = []
        for a, b in zip(edges, edges[1:]):
            if args.by_score:
                m = (scores >= a) & (scores < b)
                cells.append(f"{lengths[m].mean():.0f} ({m.sum()} games)" if m.any() else "-")
            else:
                m = (steps > a) & (steps <= b)
                cells.append(window_cell(scores[m], lengths[m]))
        print(f"| {label} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
