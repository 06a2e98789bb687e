"""A benchmark run's result, read from its files, and the report of a suite: a line per run, the
markdown table (mean ± std and IQM with its interval over seeds, a variant's P(variant > recipe)),
the learning curves. ``scripts/benchmark.py`` runs the suite."""
from __future__ import annotations

import csv
import glob
import json
import os
from collections.abc import Sequence

import numpy as np

from a2c_ppo_acktr.analysis import stats
from a2c_ppo_acktr.analysis.episodes import load_run
from a2c_ppo_acktr.analysis.history import evaluate_checkpoint
from a2c_ppo_acktr.errors import LogError
from a2c_ppo_acktr.evaluation import FINAL_EVAL_FILE
from a2c_ppo_acktr.run.checkpoint import CheckpointError, load_checkpoint
from a2c_ppo_acktr.settings import recipes
from curves import aggregate, elapsed, env_filename, format_reached, plot_curves

EVAL_EPISODES = 10  # of the final policy, deterministic: what the zoo's tables report


def saved_steps(run_dir: str) -> tuple[str, int] | None:
    """``run_dir``'s checkpoint and the env steps it holds (None: no single readable one)."""
    found = glob.glob(os.path.join(run_dir, "models", "*", "*.pt"))
    try:
        return (found[0], load_checkpoint(found[0])["env_steps"]) if len(found) == 1 else None
    except CheckpointError:
        return None


def read_result(env: str, name: str, seed: int, steps: int, run_dir: str, rc: int,
                wall: float | None) -> dict:
    """A run's result from its files; ``wall`` None: the training time its log recorded."""
    result = {"env": env, "recipe": name, "seed": seed, "steps": steps, "rc": rc,
              "wall": wall, "dir": run_dir, "score": None, "fps": None, "curve": None,
              "eval": None, "eval_range": None, "rows": [], "no_score": None}
    monitor_dirs = sorted({os.path.dirname(f) for f in glob.glob(
        os.path.join(run_dir, "logs", "**", "*.monitor.csv"), recursive=True)
        if os.path.basename(os.path.dirname(f)) != "eval"})
    if rc == 0 and len(monitor_dirs) == 1:
        try:
            result["curve"] = load_run(monitor_dirs[0])
        except LogError as e:  # e.g. no episode ended within a short budget
            result["no_score"] = str(e)
    elif rc == 0:
        result["no_score"] = (f"{len(monitor_dirs)} directories of monitor files under "
                              f"{os.path.join(run_dir, 'logs')}, expected 1")
    if result["curve"] is not None:
        result["score"] = stats.final_score(result["curve"][1])
        checkpoints = glob.glob(os.path.join(run_dir, "models", "*", "*.pt"))
        final = os.path.join(monitor_dirs[0], FINAL_EVAL_FILE)  # the run's own, if it made one
        if os.path.exists(final):
            with open(final) as f:
                games = json.load(f)["returns"]
            result["eval"] = float(np.mean(games))
            result["eval_range"] = (min(games), max(games))
        elif len(checkpoints) == 1:
            try:
                games = evaluate_checkpoint(checkpoints[0], EVAL_EPISODES)
                result["eval"] = float(np.mean(games))
                result["eval_range"] = (min(games), max(games))
            except CheckpointError:
                pass
    progress = glob.glob(os.path.join(run_dir, "logs", "**", "progress.csv"), recursive=True)
    if progress:
        with open(progress[0], newline="") as f:
            rows = list(csv.DictReader(f))
        if rows:
            result["fps"] = float(rows[-1]["fps"])
            result["rows"] = rows
            if result["wall"] is None:
                result["wall"] = elapsed(rows)[-1]
    return result


def legend(env: str, row: str) -> str:
    """A curve's name in the figure: the row's recipe led by its algorithm where the row does not
    say it ("ppo original" beside "a2c" and "acktr", as the original's figure names them)."""
    name = row.split(", ")[0].split(" ")[0]  # the recipe, without label()'s flags and backend
    algo = recipes.settings(env, name)["algo"]
    return row if name == algo or " --algo " in f"{row} " else f"{algo} {row}"


def run_line(r: dict, thresholds: Sequence[float] = ()) -> str:
    head = f"{r['env']} {r['recipe']} {r['steps']} steps seed {r['seed']}: "
    if r["rc"] is None:
        return head + "not started (stopped before its turn)"
    if r["rc"] in (130, 143) and (saved := saved_steps(r["dir"])) is not None:
        return head + f"stopped at {saved[1]:,} steps (checkpoint saved); --reuse continues it"
    if r["score"] is None and r["rc"] == 0:  # it ran as asked: not a failure
        return head + f"finished without a score: {r['no_score']}" + (
            " (a larger --num-env-steps ends some)" if "no finished episodes" in r["no_score"]
            else "")
    if r["score"] is None:
        return head + f"FAILED (exit status {r['rc']}), see {os.path.join(r['dir'], 'stdout.log')}"
    final = "" if r["eval"] is None else (  # the games' range: one lost game or all alike
        f", final policy {r['eval']:.1f} (deterministic, {EVAL_EPISODES} episodes, "
        f"{r['eval_range'][0]:g} to {r['eval_range'][1]:g})")
    return (head + f"mean of last {stats.LAST_EPISODES} episodes {r['score']:.1f}{final}, "
            f"wall {r['wall'] / 60:.1f} min, {r['fps']:.0f} fps"
            + "".join(f", {t:g} at {format_reached(r['rows'], t)}" for t in thresholds))


def table(results: list[dict], thresholds: Sequence[float] = ()) -> str:
    """The markdown table: a row per (env, recipe, steps); a variant's row (``baseline`` set: its
    recipe's row) adds P(variant > recipe)."""
    groups: dict[tuple, list[dict]] = {}
    for r in results:
        if r["score"] is not None:
            groups.setdefault((r["env"], r["recipe"], r["steps"]), []).append(r)
    variants = any(r.get("baseline") for r in results)
    lines = ["| env | recipe | steps | seeds | last10: mean ± std over seeds "
             "| last10: IQM [95% CI] " + ("| last10: P(variant > recipe) [95% CI] " if variants
                                          else "")
             + f"| last10, per seed | final-det ({EVAL_EPISODES} episodes), per seed "
             "| wall time per run | fps |" + "".join(f" steps (training time) to {t:g}, per seed |"
                                                     for t in thresholds),
             "|---|---|---|---|---|---|" + "---|" * (3 + variants + len(thresholds))]
    for (env, name, steps), rs in groups.items():
        scores = np.array([r["score"] for r in rs])
        spread = f" ± {scores.std():.0f}" if len(rs) > 1 else ""
        finals = " / ".join("-" if r["eval"] is None else f"{r['eval']:.0f}" for r in rs)
        versus = ""
        if variants:
            base = groups.get((env, rs[0].get("baseline"), steps))
            p = None if base is None else stats.compare([scores], [[r["score"] for r in base]])
            versus = " - |" if p is None else f" {stats.interval_text(p['p'], p['ci'], 2)} |"
        lines.append(
            f"| {env} | {name} | {steps:,} | {', '.join(str(r['seed']) for r in rs)} | "
            f"{scores.mean():.0f}{spread} | {stats.iqm_text(scores)} |{versus} "
            f"{' / '.join(f'{s:.0f}' for s in scores)} | {finals} | "
            f"{np.mean([r['wall'] for r in rs]) / 60:.1f} min | "
            f"{np.mean([r['fps'] for r in rs]):.0f} |"
            + "".join(f" {' / '.join(format_reached(r['rows'], t) for r in rs)} |"
                      for t in thresholds))
    return "\n".join(lines)


STATISTICS_NOTE = (f"IQM: the interquartile mean over seeds, with its 95% stratified bootstrap "
                   f"interval ({stats.RESAMPLES:,} resamples, seed {stats.SEED}); P(variant > "
                   "recipe): the probability that a run of the variant scores above one of its "
                   "recipe, ties one half, with its interval.")


def write_curves(results: list[dict], out: str) -> list[str]:
    """One PNG per env: a mean curve per recipe with its seeds' min-max band."""
    written = []
    for env in dict.fromkeys(r["env"] for r in results):
        curves = []
        for name in dict.fromkeys(r["recipe"] for r in results if r["env"] == env):
            runs = [r["curve"] for r in results
                    if r["env"] == env and r["recipe"] == name and r["curve"] is not None]
            if runs:
                curves.append((legend(env, name), len(runs), aggregate(runs)))
        if curves:
            written.append(plot_curves(curves, os.path.join(out, env_filename(env)),
                                            env))
    return written
