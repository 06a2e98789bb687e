"""How a run is scored: the four metrics the field's tables use, each named, so that two figures
are compared only when they measure the same thing.

- ``last10``: the mean return of the run's last 10 training episodes (this project's log line);
- ``last100``: of its last 100 training episodes (CleanRL's);
- ``final-det``: its final evaluation, deterministic with the normalization frozen
  (``final_eval.json``, ``--final-eval-episodes``; rl-baselines3-zoo's);
- ``max-eval``: the evaluation curve's maximum over training of its mean over seeds (Tianshou's).
  A label has one such step; each run scores its own evaluation there, so seeds still give an
  IQM and intervals. Evaluations are at the same env steps across a label's runs (the intersection
  is used).

Training episodes come from the monitor files (``analysis/episodes.py``), evaluations from
``eval/eval.csv`` and ``final_eval.json`` in the run's log dir.
"""
from __future__ import annotations

import csv
import json
import os

import numpy as np

from a2c_ppo_acktr.analysis import stats
from a2c_ppo_acktr.errors import LogError
from a2c_ppo_acktr.evaluation import FINAL_EVAL_FILE

METRICS = {
    "last10": "mean of the last 10 training episodes",
    "last100": "mean of the last 100 training episodes",
    "final-det": "final deterministic evaluation (normalization frozen)",
    "max-eval": "maximum over training of the seed-mean evaluation curve",
}
LAST = {"last10": 10, "last100": 100}  # training episodes averaged
EVAL_CURVE = os.path.join("eval", "eval.csv")


def final_eval(log_dir: str) -> float:
    """The mean return of the run's ``final_eval.json``; ``LogError`` if it has none."""
    path = os.path.join(log_dir, FINAL_EVAL_FILE)
    try:
        with open(path) as f:
            value = float(json.load(f)["mean_return"])
    except FileNotFoundError:
        raise LogError(f"{log_dir} has no final evaluation ({FINAL_EVAL_FILE}): main.py writes "
                       "it at a run's end with --final-eval-episodes N (default 10)") from None
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise LogError(f"cannot read {path}: {e}") from None
    return value


def eval_curve(log_dir: str) -> dict[int, float]:
    """The run's evaluation curve: {env steps: mean return}, from ``eval/eval.csv``."""
    path = os.path.join(log_dir, EVAL_CURVE)
    try:
        with open(path, newline="") as f:
            curve = {int(float(row["timesteps"])): float(row["mean_return"])
                     for row in csv.DictReader(f)}
    except FileNotFoundError:
        raise LogError(f"{log_dir} has no evaluation curve ({EVAL_CURVE}): main.py writes it "
                       "with --eval-interval N") from None
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise LogError(f"cannot read {path}: {e}") from None
    if not curve:
        raise LogError(f"{path} holds no evaluation")
    return curve


def max_eval(log_dirs: list[str]) -> tuple[np.ndarray, int]:
    """Each run's evaluation at the step where the runs' mean evaluation peaks; -> (scores,
    that step)."""
    curves = [eval_curve(d) for d in log_dirs]
    steps = sorted(set.intersection(*(set(c) for c in curves)))
    if not steps:
        raise LogError(f"the evaluation curves of {', '.join(log_dirs)} share no env step")
    table = np.array([[c[s] for s in steps] for c in curves])  # (runs, steps)
    best = int(np.argmax(table.mean(axis=0)))
    return table[:, best], steps[best]


def scores(metric: str, log_dirs: list[str], returns: list[np.ndarray]) -> np.ndarray:
    """The ``metric`` score of each run: ``log_dirs`` and their training episodes' ``returns``."""
    if metric in LAST:
        return np.array([stats.final_score(r, LAST[metric]) for r in returns])
    if metric == "final-det":
        missing = [d for d in log_dirs if not os.path.exists(os.path.join(d, FINAL_EVAL_FILE))]
        if missing:
            raise LogError(f"--metric final-det: no {FINAL_EVAL_FILE} in {', '.join(missing)}; "
                           "main.py writes it at a run's end with --final-eval-episodes N "
                           "(default 10)")
        return np.array([final_eval(d) for d in log_dirs])
    if metric == "max-eval":
        return max_eval(log_dirs)[0]
    raise ValueError(f"unknown metric {metric!r}; expected one of {', '.join(METRICS)}")
