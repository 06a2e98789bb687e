#!/usr/bin/env python
"""Plot learning curves from SB3-format monitor CSV files (``curves`` loads them).

Several dirs under one label are treated as seeds: they are smoothed,
interpolated onto a common step grid, and drawn as a mean line with a shaded
spread band (min-max by default, or mean +/- std). Several labels are drawn on
the same axes for comparison. With ``--out-dir`` one PNG per ``env_id`` is
written.

Examples::

    python scripts/plot.py --run ppo=logs/ppo-s* --run a2c=logs/a2c-s* --out curves.png
    python scripts/plot.py --run ours=logs/ours-* --run sb3=logs/sb3-* --out-dir plots/
    python scripts/plot.py --history ppo=trained_models/ppo/CartPole-v1_seed1_history --out h.png

``--history`` evaluates a run's policy history (``main.py --save-history N``): each kept
checkpoint plays ``--episodes`` deterministic episodes; the band spans their returns.
"""

from __future__ import annotations

import argparse
import glob
import os
import sys
from collections import OrderedDict

import numpy as np

from a2c_ppo_acktr.analysis.episodes import load_run, run_dirs
from a2c_ppo_acktr.analysis.history import evaluate_history, history_curve
from a2c_ppo_acktr.errors import ConfigError, LogError
from a2c_ppo_acktr.run.checkpoint import CheckpointError
from a2c_ppo_acktr.run.rundir import check_dir
from curves import aggregate, env_filename, plot_curves

GLOB_CHARS = "*?["


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
        allow_abbrev=False,
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
        default=[],
        help="a labelled group of run dirs (seeds); repeatable. Globs are expanded, "
        "e.g. ppo='logs/ppo-*'.",
    )
    p.add_argument(
        "--history",
        metavar="LABEL=DIR",
        type=parse_run_spec,
        action="append",
        default=[],
        help="a run's policy history (main.py --save-history N: "
        "<save-dir>/<algo>/<env>_seed<seed>_history), evaluated checkpoint by checkpoint; "
        "repeatable",
    )
    p.add_argument("--episodes", type=positive_int, default=10,
                   help="--history: deterministic episodes per checkpoint (default: 10)")
    out = p.add_mutually_exclusive_group(required=True)
    out.add_argument("--out", metavar="PATH.png",
                     help="write one figure with all curves (of several envs: PATH_<env>.png each)")
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
        choices=["minmax", "std", "iqm", "none"],
        default="minmax",
        help="spread band across seeds: min-max (default), mean±std, iqm (the interquartile "
        "mean's curve and its 95%% bootstrap interval), or none",
    )
    p.add_argument("--title", help="figure title (default: the env id)")
    p.add_argument("--xmax", type=float, help="truncate curves and the x-axis at this many env steps")
    return p


def expand_dirs(patterns: list[str]) -> list[str]:
    """The run directories ``patterns`` name, in order: globs expanded, and a log dir holding
    several runs (seeds, envs: ``run_dirs``) expanded into them.

    A pattern matching no directory, a missing dir or one without runs raises ``LogError``; a
    run named twice counts once, with a warning.
    """
    out: dict[str, str] = {}  # real path -> the run's dir as named
    for p in patterns:
        if any(c in p for c in GLOB_CHARS):
            matches = sorted(d for d in glob.glob(p) if os.path.isdir(d))
            if not matches:
                raise LogError(f"no run directories match {p}")
        else:
            matches = [p]
        for run in (run for d in matches for run in run_dirs(d)):
            if os.path.realpath(run) in out:
                print(f"warning: {run} is named twice ({', '.join(patterns)}); counted once",
                      file=sys.stderr)
            out.setdefault(os.path.realpath(run), run)
    return list(out.values())


def collect(
    run_specs: list[tuple[str, list[str]]],
) -> OrderedDict[str, OrderedDict[str, list]]:
    """Load every run: returns ``{env_id: {label: [(steps, returns), ...]}}``.

    Globs in dirs are expanded; insertion order follows the command line.
    Raises ``LogError`` on missing/empty dirs.
    """
    groups: OrderedDict[str, OrderedDict[str, list]] = OrderedDict()
    for label, patterns in run_specs:
        for d in expand_dirs(patterns):
            steps, returns, env_id = load_run(d)
            groups.setdefault(env_id, OrderedDict()).setdefault(label, []).append(
                (steps, returns)
            )
    return groups


def check_format(path: str) -> None:
    """``ConfigError`` unless matplotlib writes figures of ``path``'s extension."""
    from matplotlib.figure import Figure
    formats = Figure().canvas.get_supported_filetypes()
    ext = os.path.splitext(path)[1].lstrip(".").lower()
    if ext not in formats:
        raise ConfigError(f"--out {path}: figures are written as "
                          f"{', '.join('.' + f for f in sorted(formats))}, not {ext or 'no extension'}")


def main(argv: list[str] | None = None) -> int:
    """CLI entry point. Returns the exit status (0 ok, 2 on input errors)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if not args.run and not args.history:
        parser.error("give at least one --run or --history")
    try:  # before any run is read or played: where the figures go
        if args.out_dir:
            check_dir(args.out_dir, "--out-dir")
        else:
            check_dir(os.path.dirname(os.path.abspath(args.out)), "--out")
            check_format(args.out)
    except ConfigError as e:
        print(f"plot.py: error: {e}", file=sys.stderr)
        return 2
    written: list[str] = []
    try:
        groups = collect(args.run)
        histories = []
        for label, dirs in args.history:
            for d in dirs:
                points = evaluate_history(d, args.episodes)
                for steps, returns in points:
                    print(f"{d}: {steps} steps, deterministic return {np.mean(returns):.1f} "
                          f"(min {np.min(returns):.1f}, max {np.max(returns):.1f})")
                histories.append((label, f"{args.episodes} episodes per checkpoint",
                                  history_curve(points, args.band)))

        def agg(runs):
            try:
                return aggregate(runs, args.num_points, args.smooth, args.band, args.xmax)
            except ValueError as e:
                raise LogError(str(e)) from None

        stem, ext = os.path.splitext(args.out or "")
        if args.out_dir or len(groups) > 1:  # envs on their own scales: one figure per env
            for env_id, by_label in groups.items():
                curves = [(lbl, len(runs), agg(runs)) for lbl, runs in by_label.items()]
                title = f"{args.title}: {env_id}" if args.title else env_id
                path = (os.path.join(args.out_dir, env_filename(env_id)) if args.out_dir
                        else f"{stem}_{env_filename(env_id)[:-len('.png')]}{ext}")  # <out>_<env>
                written.append(plot_curves(curves + histories, path, title, args.xmax, args.band))
        if not groups and args.out_dir:  # histories only: one figure of them
            path = os.path.join(args.out_dir, "policy_history.png")
            written.append(plot_curves(list(histories), path, args.title or "policy history",
                                       args.xmax, args.band))
        elif len(groups) <= 1 and args.out:
            curves = list(histories)
            for by_label in groups.values():
                curves += [(lbl, len(runs), agg(runs)) for lbl, runs in by_label.items()]
            title = args.title or ", ".join(groups) or "policy history"
            written.append(plot_curves(curves, args.out, title, args.xmax, args.band))
    except (LogError, CheckpointError) as e:
        print(f"plot.py: error: {e}", file=sys.stderr)
        return 2
    except OSError as e:  # a figure that cannot be written (read-only, full disk)
        print(f"plot.py: error: cannot write {e.filename or 'the figure'}: {e.strerror or e}",
              file=sys.stderr)
        return 1
    except KeyboardInterrupt:  # Ctrl-C, e.g. while --history plays its checkpoints
        print("plot.py: interrupted: " + (f"wrote {', '.join(written)} only" if written
                                          else "nothing written"), file=sys.stderr)
        return 130
    for path in written:
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
