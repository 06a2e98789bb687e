"""Learning curves from SB3-format monitor CSV files: loading runs, smoothing, averaging seeds.

Each training run writes one ``<rank>.monitor.csv`` per environment into its log dir. A monitor
file looks like::

    #{"t_start": 1700000000.0, "env_id": "CartPole-v1"}
    r,l,t
    12.0,12,0.051
    ...

where each row is one finished episode (return, length, wall time in seconds since
``t_start``). A run's files are merged in wall-time order and the x-axis is the cumulative
number of env steps across all of the run's envs. ``plot_curves`` draws what ``aggregate``
returns (``scripts/plot.py``, ``scripts/benchmark.py``).
"""
from __future__ import annotations

import csv
import glob
import json
import os
import sys
from collections import OrderedDict

import numpy as np

MONITOR_PATTERN = "*monitor.csv"
UNKNOWN_ENV = "unknown"


class CurveError(Exception):
    """A user-facing error (missing dir, no monitor files, bad input): one line for the user."""


def monitor_files(log_dir: str) -> list[str]:
    """Return the sorted ``*monitor.csv`` files of the run in ``log_dir``.

    ``log_dir`` is a run's own directory, or a ``--log-dir`` that main.py put exactly one run
    under (``<log-dir>/<algo>/<env>_seed<seed>/``). Evaluation files (``eval/``) are not training
    episodes and are left out. Raises ``CurveError`` if the dir does not exist, holds no monitor
    files, or holds several runs (they are to be named one by one).
    """
    if not os.path.isdir(log_dir):
        raise CurveError(f"run directory not found: {log_dir}")
    files = sorted(glob.glob(os.path.join(glob.escape(log_dir), MONITOR_PATTERN)))
    if not files:
        below = glob.glob(os.path.join(glob.escape(log_dir), "**", MONITOR_PATTERN),
                          recursive=True)
        runs = sorted({os.path.dirname(f) for f in below
                       if os.path.basename(os.path.dirname(f)) != "eval"})
        if len(runs) > 1:
            raise CurveError(f"{log_dir} holds several runs: {', '.join(runs)}; name one, or "
                             "join them with commas for a mean and band")
        files = sorted(f for f in below if runs and os.path.dirname(f) == runs[0])
    files = [f for f in files if os.path.isfile(f)]
    if not files:
        raise CurveError(f"no *.monitor.csv files in {log_dir}")
    return files


def read_monitor_file(path: str) -> tuple[dict, np.ndarray, np.ndarray, np.ndarray]:
    """Read one monitor CSV.

    Returns ``(header, r, l, t_abs)`` where ``header`` is the JSON dict from
    the first line and ``t_abs = t_start + t`` is absolute wall time, so that
    files of different ranks can be merged chronologically.
    """
    try:
        with open(path, newline="") as fh:
            first = fh.readline()
            if not first.startswith("#"):
                raise CurveError(f"not a monitor file (missing '#' JSON header): {path}")
            try:
                header = json.loads(first[1:])
            except json.JSONDecodeError as e:
                raise CurveError(f"bad JSON header in {path}: {e}") from None
            reader = csv.DictReader(fh)
            missing = {"r", "l", "t"} - set(reader.fieldnames or [])
            if missing:
                raise CurveError(f"monitor file {path} lacks column(s) {sorted(missing)}")
            r, l, t = [], [], []
            for row in reader:
                if not row or row.get("r") in (None, ""):
                    continue  # blank / truncated trailing line
                r.append(float(row["r"]))
                l.append(float(row["l"]))
                t.append(float(row["t"]))
    except OSError as e:
        raise CurveError(f"cannot read {path}: {e.strerror}") from None
    except ValueError as e:
        raise CurveError(f"bad number in {path}: {e}") from None
    t_start = float(header.get("t_start", 0.0) or 0.0)
    return header, np.asarray(r), np.asarray(l), np.asarray(t) + t_start


def load_run(log_dir: str) -> tuple[np.ndarray, np.ndarray, str]:
    """Load all monitor files of one run (one seed) from ``log_dir``.

    Episodes from all ranks are merged in order of absolute wall time
    (``t_start + t``; ties keep file order). Returns ``(steps, returns,
    env_id)``: ``steps[i]`` is the cumulative env steps (sum of episode
    lengths over all envs) at the end of the i-th finished episode,
    ``returns[i]`` its return, and ``env_id`` the id from the monitor headers
    (``"unknown"`` if absent).

    Raises ``CurveError`` for a missing dir, no monitor files, or no finished
    episodes.
    """
    rs, ls, ts, env_ids = [], [], [], []
    for path in monitor_files(log_dir):
        header, r, l, t = read_monitor_file(path)
        env_ids.append(header.get("env_id") or UNKNOWN_ENV)
        rs.append(r)
        ls.append(l)
        ts.append(t)
    r = np.concatenate(rs)
    l = np.concatenate(ls)
    t = np.concatenate(ts)
    if r.size == 0:
        raise CurveError(f"no finished episodes in monitor files of {log_dir}")
    distinct = list(OrderedDict.fromkeys(env_ids))
    if len(distinct) > 1:
        print(
            f"warning: {log_dir} mixes env ids {distinct}; using {distinct[0]}",
            file=sys.stderr,
        )
    order = np.argsort(t, kind="stable")
    steps = np.cumsum(l[order])
    return steps, r[order], str(distinct[0])


def smooth_curve(y: np.ndarray, window: int) -> np.ndarray:
    """Trailing moving average over ``window`` episodes.

    The first ``window - 1`` points average over the episodes available so
    far, so the output has the same length as ``y``. ``window <= 1`` returns
    ``y`` unchanged (as float).
    """
    y = np.asarray(y, dtype=float)
    if window <= 1 or y.size == 0:
        return y.copy()
    c = np.cumsum(np.insert(y, 0, 0.0))
    idx = np.arange(1, y.size + 1)
    lo = np.maximum(idx - window, 0)
    return (c[idx] - c[lo]) / (idx - lo)


def aggregate(
    runs: list[tuple[np.ndarray, np.ndarray]],
    num_points: int = 200,
    smooth: int = 20,
    band: str = "minmax",
    xmax: float | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Aggregate several seeds into a mean curve with a spread band.

    ``runs`` is a list of ``(steps, returns)`` (extra tuple items, e.g. the
    env id from ``load_run``, are ignored). Each run's returns are smoothed
    with a ``smooth``-episode trailing moving average, then linearly
    interpolated onto a common grid of ``num_points`` steps spanning the
    range covered by *all* runs (max of first steps .. min of last steps, capped
    at ``xmax``), so no run is extrapolated.

    Returns ``(x, mean, lo, hi)``; ``lo``/``hi`` are the per-point min/max
    across runs for ``band="minmax"``, ``mean -/+ std`` for ``band="std"``,
    and equal to ``mean`` for ``band="none"`` or a single run.
    """
    if not runs:
        raise ValueError("aggregate() needs at least one run")
    if band not in ("minmax", "std", "none"):
        raise ValueError(f"unknown band {band!r}")
    curves = []
    for run in runs:
        steps, returns = np.asarray(run[0], float), np.asarray(run[1], float)
        if steps.size == 0:
            raise ValueError("aggregate() got a run with no episodes")
        curves.append((steps, smooth_curve(returns, smooth)))
    start = max(s[0] for s, _ in curves)
    end = min(s[-1] for s, _ in curves)
    if xmax is not None:
        end = min(end, xmax)
    if end < start:
        raise ValueError(
            f"runs do not overlap in env steps (common range {start:g}..{end:g})"
        )
    x = np.linspace(start, end, max(int(num_points), 2)) if end > start else np.array([start])
    ys = np.stack([np.interp(x, s, y) for s, y in curves])
    mean = ys.mean(axis=0)
    if band == "minmax":
        lo, hi = ys.min(axis=0), ys.max(axis=0)
    elif band == "std":
        std = ys.std(axis=0)
        lo, hi = mean - std, mean + std
    else:
        lo, hi = mean.copy(), mean.copy()
    return x, mean, lo, hi


BAND_LABEL = {"minmax": "min–max", "std": "±1 std", "none": ""}


def plot_curves(
    curves: list[tuple[str, int | str, tuple]],
    out_path: str,
    title: str | None = None,
    xmax: float | None = None,
    band: str = "minmax",
) -> str:
    """Draw ``curves`` on one axes and save a PNG to ``out_path``.

    ``curves`` is a list of ``(label, n_seeds, (x, mean, lo, hi))``. The
    legend shows the seed count and, for several seeds, the band type; ``n_seeds``
    may instead be a text such as ``"5 episodes per checkpoint"`` (a history).
    Returns ``out_path``.
    """
    from matplotlib.figure import Figure  # not pyplot: no backend or display is chosen here

    fig = Figure(figsize=(7, 4.5))
    ax = fig.subplots()
    for label, n, (x, mean, lo, hi) in curves:
        spread = isinstance(n, str) or n > 1
        desc = f"{label} ({n}" if isinstance(n, str) else f"{label} (n={n}"
        if spread and band != "none":
            desc += f", band: {BAND_LABEL[band]}"
        desc += ")"
        (line,) = ax.plot(x, mean, label=desc, linewidth=1.6)
        if spread and band != "none":
            ax.fill_between(x, lo, hi, color=line.get_color(), alpha=0.2, linewidth=0)
    ax.set_xlabel("environment steps")
    ax.set_ylabel("episode return")
    if xmax is not None:
        ax.set_xlim(left=0, right=xmax)
    ax.ticklabel_format(axis="x", style="sci", scilimits=(0, 3))
    ax.grid(True, alpha=0.3)
    if title:
        ax.set_title(title)
    ax.legend(loc="best", fontsize="small")
    fig.tight_layout()
    parent = os.path.dirname(os.path.abspath(out_path))
    os.makedirs(parent, exist_ok=True)
    fig.savefig(out_path, dpi=120)
    return out_path


def env_filename(env_id: str) -> str:
    """File name for an env id's PNG: ``/`` (and ``\\``) replaced by ``_``."""
    return env_id.replace("/", "_").replace("\\", "_") + ".png"
