#!/usr/bin/env python
"""docs/results.md's statistics, computed from its own per-seed columns: each MuJoCo and Atari row's
interquartile mean (IQM) over its seeds with a 95% stratified bootstrap interval, and the MuJoCo
suite's aggregate over envs per recipe (normalized scores: ``a2c_ppo_acktr/analysis/reference_scores.py``)
with the probability that the tuned recipe beats the original's. ``a2c_ppo_acktr/analysis/stats.py``
computes them (10,000 resamples, seed 0); no figure is typed by hand.

    python scripts/results_stats.py            # rewrite the IQM column and the aggregate table
    python scripts/results_stats.py --check    # exit 1 if docs/results.md is not up to date
"""
from __future__ import annotations

import argparse
import os
import re
import sys

import numpy as np

from a2c_ppo_acktr.analysis import reference_scores, stats

RESULTS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "docs",
                       "results.md")
IQM = "last-10 IQM [95% CI]"
# section -> (the column the IQM goes after, the column of per-seed last-10 returns, decimals)
TABLES = {"## MuJoCo": ("last-10 return (deterministic)", "per seed: last 10 / deterministic", 0),
          "## Atari": ("last-10 return at the end, per seed (best)",
                       "last-10 return at the end, per seed (best)", 1)}
BEGIN, END = "<!-- results_stats.py: aggregate -->", "<!-- /results_stats.py -->"
# the MuJoCo suite's aggregate rows, PPO's recipes, then A2C's and ACKTR's: (name, recipe cells,
# seeds held out? None: all of them)
GROUPS = [("tuned, seeds 1-3", ("tuned",), False),
          ("tuned, held-out seeds", ("tuned",), True),
          ("original, seeds 1-3", ("original",), False),
          ("A2C (a2c), seeds 1-3", ("a2c",), False),
          ("A2C (a2c), held-out seeds", ("a2c",), True),
          ("ACKTR (acktr), all seeds", ("acktr",), None)]


def cells(line: str) -> list[str]:
    """A table row's cells as written between its bars (``| a | b |`` -> ``[" a ", " b "]``), so
    that a row rewritten keeps the spacing of the cells it does not change."""
    return line.strip().split("|")[1:-1]


def row(values: list[str]) -> str:
    return "|" + "|".join(values) + "|"


def per_seed(cell: str, mujoco: bool) -> list[float]:
    """The last-10 returns of a row's seeds: MuJoCo's ``a / b / c; <deterministic ones>``; Atari's
    ``a (best) / b (best)``, a later batch of seeds after ``;``, a run of the same seed again
    (``; run again: x``) left out."""
    if mujoco:
        cell = cell.split(";")[0]
    cell = re.sub(r"\([^)]*\)", "", cell.split("; run again")[0])
    return [float(v) for v in re.split(r"[;/]", cell) if v.strip()]


def seed_count(cell: str) -> int:
    """How many seeds a row names: ``1, 2, 3``, ``**4-9**``, ``1, 2, 3; 4, 5, 6 after ... (...)``."""
    text = cell.split("(")[0].replace("*", "")
    return sum(int(b) - int(a) + 1 if b else 1
               for a, b in re.findall(r"(\d+)(?:-(\d+))?", text))


def with_iqm(lines: list[str]) -> tuple[list[str], list[tuple[str, str, str, list[float]]]]:
    """``lines`` with each table's IQM column filled in; the MuJoCo rows as (env, recipe, seeds,
    scores)."""
    out, mujoco, section, spec = [], [], "", None
    for line in lines:
        if line.startswith("## "):
            section, spec = line.strip(), None
        if not line.startswith("|") or section not in TABLES:
            spec = None
            out.append(line)
            continue
        values = cells(line)
        names = [v.strip() for v in values]
        after, source, decimals = TABLES[section]
        if spec is None and after in names:  # a table's header
            if IQM not in names:
                values.insert(names.index(after) + 1, f" {IQM} ")
                names.insert(names.index(after) + 1, IQM)
            spec = (names.index(IQM), names.index(source), len(names))
        elif spec is not None:
            at, source_at, width = spec
            separator = set(names[0]) <= {"-"}
            if len(values) < width:  # a row written before the column
                values.insert(at, "---" if separator else " ")
            if not separator:
                scores = per_seed(values[source_at], section == "## MuJoCo")
                if len(scores) != seed_count(values[2]):
                    raise ValueError(f"{row(values)}: {len(scores)} scores, seeds {values[2]}")
                values[at] = f" {stats.iqm_text(scores, decimals)} "
                if section == "## MuJoCo":
                    mujoco.append((names[0], names[1], names[2], scores))
        out.append(row(values))
    return out, mujoco


def aggregate(mujoco: list[tuple[str, str, str, list[float]]]) -> list[str]:
    """The MuJoCo suite's table over envs: per recipe, normalized scores' IQM and mean with their
    intervals, and P(tuned > original)."""
    groups = {}
    for name, recipes, held_out in GROUPS:
        # held_out None: every row of the recipe (one not chosen on some seeds)
        by_env: dict[str, list[float]] = {}  # an env's rows (seeds 1-3 and 4-6): one stratum
        for env, recipe, seeds, s in mujoco:
            if recipe in recipes and held_out in (None, seeds.startswith("**")):
                by_env.setdefault(env, []).extend(s)
        if by_env:  # an algorithm with no rows yet has no line
            groups[name] = [(env, np.array(s)) for env, s in by_env.items()]
    lines = ["| recipe | envs | runs | IQM [95% CI] | mean [95% CI] | P(tuned > original) [95% CI] |",
             "|---|---|---|---|---|---|"]
    cell = " {} ".format
    original = [stats.normalize(s, *reference_scores.bounds(env)[:2])
                for env, s in groups["original, seeds 1-3"]]
    for name, rows in groups.items():
        strata = [stats.normalize(s, *reference_scores.bounds(env)[:2]) for env, s in rows]
        summary = stats.summary(strata)
        envs = ", ".join(env.split("-")[0] for env, _ in rows)
        versus = ""
        if name.startswith("tuned") and [e for e, _ in rows] == [e for e, _ in groups[
                "original, seeds 1-3"]]:
            p = stats.compare(strata, original)
            versus = stats.interval_text(p["p"], p["ci"], 2)
        lines.append(row(list(map(cell, [
            name, envs, summary["n"], stats.interval_text(summary["iqm"], summary["iqm_ci"], 2),
            stats.interval_text(summary["mean"], summary["mean_ci"], 2), versus])))
            .replace("  |", " |"))
    return lines


def rewrite(text: str) -> str:
    lines, mujoco = with_iqm(text.split("\n"))
    block = [BEGIN, *aggregate(mujoco), END]
    if BEGIN in lines:
        start, end = lines.index(BEGIN), lines.index(END)
        lines[start:end + 1] = block
    else:  # first time: after the MuJoCo table
        at = lines.index("## MuJoCo")
        while not lines[at].startswith("|"):
            at += 1
        while lines[at].startswith("|"):
            at += 1
        lines[at:at] = ["", *block]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="results_stats.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--check", action="store_true", help="exit 1 if the file is not up to date")
    p.add_argument("--file", default=RESULTS, help="(default: docs/results.md)")
    args = p.parse_args(argv)
    with open(args.file) as f:
        text = f.read()
    new = rewrite(text)
    if args.check:
        if new != text:
            print(f"results_stats.py: {args.file} is not up to date: run "
                  "python scripts/results_stats.py", file=sys.stderr)
            return 1
        return 0
    with open(args.file, "w") as f:
        f.write(new)
    return 0


if __name__ == "__main__":
    sys.exit(main())
