"""Learning curves of runs read by ``analysis.episodes.load_run``: smoothing, averaging seeds and
drawing them (``scripts/plot.py``, ``scripts/benchmark.py``, ``scripts/compare.py``: its IQM curves
and performance profiles); the steps and training time at which a run's ``progress.csv`` first
reaches a return. The x-axis is the cumulative number of env steps
across all of a run's envs."""
from __future__ import annotations

import os

import numpy as np

from a2c_ppo_acktr.analysis import stats
from a2c_ppo_acktr.envs.ids import env_file_name


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
    and equal to ``mean`` for ``band="none"`` or a single run. ``band="iqm"``: the
    curve is the interquartile mean over runs and ``lo``/``hi`` its 95% stratified
    bootstrap interval (``analysis.stats.iqm_band``).
    """
    if not runs:
        raise ValueError("aggregate() needs at least one run")
    if band not in ("minmax", "std", "iqm", "none"):
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
    if band == "iqm":
        return (x, *stats.iqm_band(ys))
    if band == "minmax":
        lo, hi = ys.min(axis=0), ys.max(axis=0)
    elif band == "std":
        std = ys.std(axis=0)
        lo, hi = mean - std, mean + std
    else:
        lo, hi = mean.copy(), mean.copy()
    return x, mean, lo, hi


BAND_LABEL = {"minmax": "min–max", "std": "±1 std", "iqm": "IQM, 95% CI",
              "ci": "95% CI", "none": ""}


def plot_curves(
    curves: list[tuple[str, int | str, tuple]],
    out_path: str,
    title: str | None = None,
    xmax: float | None = None,
    band: str = "minmax",
    xlabel: str = "environment steps",
    ylabel: str = "episode return",
) -> str:
    """Draw ``curves`` on one axes and save a PNG to ``out_path``.

    ``curves`` is a list of ``(label, n_seeds, (x, mean, lo, hi))``. The
    legend shows the seed count and, for several seeds, the band type; ``n_seeds``
    may instead be a text such as ``"5 episodes per checkpoint"`` (a history).
    A performance profile is drawn the same way (x: the score threshold, y: the
    fraction of runs above it). Returns ``out_path``.
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
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
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
    """File name for an env id's PNG (``envs/ids.env_file_name``, e.g. ALE_Pong-v5.png)."""
    return env_file_name(env_id) + ".png"


def elapsed(rows: list[dict]) -> list[float]:
    """Training seconds at each progress row. Each process of a resumed run logs ``time`` from 0,
    so a part's seconds add to the parts' before it."""
    seconds, before, last = [], 0.0, 0.0
    for row in rows:
        now = float(row["time"])
        if now < last:  # a resumed part starts
            before += last
        last = now
        seconds.append(before + now)
    return seconds


def reached(rows: list[dict], threshold: float) -> tuple[int, float] | None:
    """(env steps, training seconds) at the first progress row whose ``mean_return`` (the last 10
    training episodes) is at least ``threshold``; None if none is."""
    for row, seconds in zip(rows, elapsed(rows)):
        if row["mean_return"] and float(row["mean_return"]) >= threshold:
            return int(row["timesteps"]), seconds
    return None


def steps_to(rows: list[dict], threshold: float) -> int | None:
    """The env steps of ``reached``; None if the threshold was not reached."""
    hit = reached(rows, threshold)
    return None if hit is None else hit[0]


def format_reached(rows: list[dict], threshold: float) -> str:
    hit = reached(rows, threshold)
    return "-" if hit is None else f"{hit[0]:,} ({hit[1] / 60:.0f} min)"


if __name__ == "__main__":  # a module: say so, rather than end at once with nothing
    import sys
    print("curves.py is a module of learning-curve helpers (scripts/plot.py, scripts/benchmark.py "
          "import it); to draw curves: python scripts/plot.py --run LABEL=LOG_DIR --out FILE.png",
          file=sys.stderr)
    sys.exit(2)
