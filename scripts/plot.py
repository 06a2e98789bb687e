#!/usr/bin/env python
"""Plot learning curves from SB3-format monitor CSV files.

Each training run writes one ``<rank>.monitor.csv`` per environment into its
log dir. A monitor file looks like::

    #{"t_start": 1700000000.0, "env_id": "CartPole-v1"}
    r,l,t
    12.0,12,0.051
    ...

where each row is one finished episode (return, length, wall time in seconds
since ``t_start``). A run's files are merged in wall-time order and the x-axis
is the cumulative number of env steps across all of the run's envs.

Several dirs under one label are treated as seeds: they are smoothed,
interpolated onto a common step grid, and drawn as a mean line with a shaded
spread band (min-max by default, or mean +/- std). Several labels are drawn on
the same axes for comparison. With ``--out-dir`` one PNG per ``env_id`` is
written.

Examples::

    python scripts/plot.py --run ppo=logs/ppo-s* --run a2c=logs/a2c-s* --out curves.png
    python scripts/plot.py --run ours=logs/ours-* --run sb3=logs/sb3-* --out-dir plots/
"""

from __future__ import annotations

import argparse
import csv
import glob
import json
import os
import sys
from collections import OrderedDict

import numpy as np

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

MONITOR_PATTERN = "*monitor.csv"
UNKNOWN_ENV = "unknown"
GLOB_CHARS = "*?["


class PlotError(Exception):
    """A user-facing error (missing dir, no monitor files, bad input).

    ``main`` turns it into a one-line message on stderr and exit status 2.
    """


# --------------------------------------------------------------------------- #
# Loading
# --------------------------------------------------------------------------- #
def monitor_files(log_dir: str) -> list[str]:
    """Return the sorted ``*monitor.csv`` files in ``log_dir``.

    Raises ``PlotError`` if the dir does not exist or holds no monitor files.
    """
    if not os.path.isdir(log_dir):
        raise PlotError(f"run directory not found: {log_dir}")
    files = sorted(glob.glob(os.path.join(glob.escape(log_dir), MONITOR_PATTERN)))
    files = [f for f in files if os.path.isfile(f)]
    if not files:
        raise PlotError(f"no *.monitor.csv files in {log_dir}")
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
                raise PlotError(f"not a monitor file (missing '#' JSON header): {path}")
            try:
                header = json.loads(first[1:])
            except json.JSONDecodeError as e:
                raise PlotError(f"bad JSON header in {path}: {e}") from None
            reader = csv.DictReader(fh)
            missing = {"r", "l", "t"} - set(reader.fieldnames or [])
            if missing:
                raise PlotError(f"monitor file {path} lacks column(s) {sorted(missing)}")
            r, l, t = [], [], []
            for row in reader:
                if not row or row.get("r") in (None, ""):
                    continue  # blank / truncated trailing line
                r.append(float(row["r"]))
                l.append(float(row["l"]))
                t.append(float(row["t"]))
    except OSError as e:
        raise PlotError(f"cannot read {path}: {e.strerror}") from None
    except ValueError as e:
        raise PlotError(f"bad number in {path}: {e}") from None
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

    Raises ``PlotError`` for a missing dir, no monitor files, or no finished
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
        raise PlotError(f"no finished episodes in monitor files of {log_dir}")
    distinct = list(OrderedDict.fromkeys(env_ids))
    if len(distinct) > 1:
        print(
            f"plot.py: warning: {log_dir} mixes env ids {distinct}; using {distinct[0]}",
            file=sys.stderr,
        )
    order = np.argsort(t, kind="stable")
    steps = np.cumsum(l[order])
    return steps, r[order], str(distinct[0])


def expand_dirs(patterns: list[str]) -> list[str]:
    """Expand glob patterns among ``patterns`` into sorted directory lists.

    Literal paths are kept as given (and checked later by ``load_run``). A
    pattern matching no directory raises ``PlotError``.
    """
    out: list[str] = []
    for p in patterns:
        if any(c in p for c in GLOB_CHARS):
            matches = sorted(d for d in glob.glob(p) if os.path.isdir(d))
            if not matches:
                raise PlotError(f"no run directories match {p}")
            out.extend(matches)
        else:
            out.append(p)
    # drop duplicates, keep order
    return list(OrderedDict.fromkeys(out))


# --------------------------------------------------------------------------- #
# Aggregation
# --------------------------------------------------------------------------- #
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
):
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


# --------------------------------------------------------------------------- #
# Plotting
# --------------------------------------------------------------------------- #
BAND_LABEL = {"minmax": "min–max", "std": "±1 std", "none": ""}


def plot_curves(
    curves: list[tuple[str, int, tuple]],
    out_path: str,
    title: str | None = None,
    xmax: float | None = None,
    band: str = "minmax",
) -> str:
    """Draw ``curves`` on one axes and save a PNG to ``out_path``.

    ``curves`` is a list of ``(label, n_seeds, (x, mean, lo, hi))``. The
    legend shows the seed count and, for several seeds, the band type.
    Returns ``out_path``.
    """
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for label, n, (x, mean, lo, hi) in curves:
        desc = f"{label} (n={n}"
        if n > 1 and band != "none":
            desc += f", band: {BAND_LABEL[band]}"
        desc += ")"
        (line,) = ax.plot(x, mean, label=desc, linewidth=1.6)
        if n > 1 and band != "none":
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
    plt.close(fig)
    return out_path


def env_filename(env_id: str) -> str:
    """File name for an env id's PNG: ``/`` (and ``\\``) replaced by ``_``."""
    return env_id.replace("/", "_").replace("\\", "_") + ".png"


# --------------------------------------------------------------------------- #
# CLI
# --------------------------------------------------------------------------- #
def parse_run_spec(spec: str) -> tuple[str, list[str]]:
    """Parse ``LABEL=DIR[,DIR...]`` into ``(label, [dir, ...])``."""
    label, sep, dirs = spec.partition("=")
    label = label.strip()
    parts = [d.strip() for d in dirs.split(",") if d.strip()]
    if not sep or not label or not parts:
        raise argparse.ArgumentTypeError(
            f"expected LABEL=DIR[,DIR...], got {spec!r}"
        )
    return label, parts


def positive_int(value: str) -> int:
    """argparse type: integer >= 1."""
    try:
        v = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {value!r}") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {v}")
    return v


def build_parser() -> argparse.ArgumentParser:
    """The argparse parser for the CLI."""
    p = argparse.ArgumentParser(
        prog="plot.py",
        description=(
            "Plot learning curves (episode return vs cumulative env steps) from "
            "<log_dir>/<rank>.monitor.csv files. Dirs under one label are seeds: "
            "mean line plus a shaded band (min-max across seeds by default, or "
            "mean±std with --band std). Several labels are compared on one axes."
        ),
    )
    p.add_argument(
        "--run",
        metavar="LABEL=DIR[,DIR...]",
        type=parse_run_spec,
        action="append",
        required=True,
        help="a labelled group of run dirs (seeds); repeatable. Globs are expanded, "
        "e.g. ppo='logs/ppo-*'.",
    )
    out = p.add_mutually_exclusive_group(required=True)
    out.add_argument("--out", metavar="PATH.png", help="write a single figure with all curves")
    out.add_argument(
        "--out-dir",
        metavar="DIR",
        help="write one figure per env id (from monitor headers) as DIR/<env_id>.png",
    )
    p.add_argument(
        "--smooth",
        type=positive_int,
        default=20,
        help="moving-average window over episodes (default: 20; 1 = no smoothing)",
    )
    p.add_argument(
        "--num-points",
        type=positive_int,
        default=200,
        help="points of the common step grid that seeds are interpolated onto (default: 200)",
    )
    p.add_argument(
        "--band",
        choices=["minmax", "std", "none"],
        default="minmax",
        help="spread band across seeds: min-max (default), mean±std, or none",
    )
    p.add_argument("--title", help="figure title (default: the env id)")
    p.add_argument("--xmax", type=float, help="truncate curves and the x-axis at this many env steps")
    return p


def collect(
    run_specs: list[tuple[str, list[str]]],
) -> "OrderedDict[str, OrderedDict[str, list]]":
    """Load every run: returns ``{env_id: {label: [(steps, returns), ...]}}``.

    Globs in dirs are expanded; insertion order follows the command line.
    Raises ``PlotError`` on missing/empty dirs.
    """
    groups: OrderedDict[str, OrderedDict[str, list]] = OrderedDict()
    for label, patterns in run_specs:
        for d in expand_dirs(patterns):
            steps, returns, env_id = load_run(d)
            groups.setdefault(env_id, OrderedDict()).setdefault(label, []).append(
                (steps, returns)
            )
    return groups


def main(argv: list[str] | None = None) -> int:
    """CLI entry point. Returns the exit status (0 ok, 2 on input errors)."""
    args = build_parser().parse_args(argv)
    try:
        groups = collect(args.run)

        def agg(runs):
            try:
                return aggregate(runs, args.num_points, args.smooth, args.band, args.xmax)
            except ValueError as e:
                raise PlotError(str(e)) from None

        written = []
        if args.out_dir:
            for env_id, by_label in groups.items():
                curves = [(lbl, len(runs), agg(runs)) for lbl, runs in by_label.items()]
                title = f"{args.title}: {env_id}" if args.title else env_id
                path = os.path.join(args.out_dir, env_filename(env_id))
                written.append(plot_curves(curves, path, title, args.xmax, args.band))
        else:
            multi_env = len(groups) > 1
            curves = []
            for env_id, by_label in groups.items():
                for lbl, runs in by_label.items():
                    name = f"{lbl} [{env_id}]" if multi_env else lbl
                    curves.append((name, len(runs), agg(runs)))
            title = args.title or ", ".join(groups)
            written.append(plot_curves(curves, args.out, title, args.xmax, args.band))
    except PlotError as e:
        print(f"plot.py: error: {e}", file=sys.stderr)
        return 2
    for path in written:
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
