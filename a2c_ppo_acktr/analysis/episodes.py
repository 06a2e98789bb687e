"""Episodes read back from SB3's monitor files (``load_run``: ``scripts/plot.py``, ``compare.py``,
``tune.py``; written by ``envs/monitor.py``'s ``EpisodeMonitor`` or SB3's ``Monitor``).

Each env of a run writes ``<rank>.monitor.csv`` into the run's log dir::

    #{"t_start": 1700000000.0, "env_id": "CartPole-v1"}
    r,l,t
    12.0,12,0.051

one row per finished episode: return, length, wall time in seconds since ``t_start``.
"""
import csv
import glob
import json
import math
import os
import re
from collections import OrderedDict

import numpy as np

from a2c_ppo_acktr.errors import LogError, warn

MONITOR_PATTERN = "*monitor.csv"
UNKNOWN_ENV = "unknown"


SEED_SUFFIX = re.compile(r"_seed\d+$")  # main.py's run dir: <log-dir>/<algo>/<env>_seed<seed>


def run_dirs(log_dir: str) -> list[str]:
    """The runs ``log_dir`` names, sorted: itself where it holds monitor files, else each run
    below it (main.py's ``<log-dir>/<algo>/<env>_seed<seed>/``; ``eval/`` files are not training
    episodes): the seeds of an env, and other envs beside them. Raises ``LogError`` if the dir does
    not exist, holds no monitor files, or holds one env's runs under several dirs (several
    ``--algo``: variants to be named apart, not seeds)."""
    if not os.path.isdir(log_dir):
        raise LogError(f"run directory not found: {log_dir}")
    if glob.glob(os.path.join(glob.escape(log_dir), MONITOR_PATTERN)):
        return [log_dir]
    below = glob.glob(os.path.join(glob.escape(log_dir), "**", MONITOR_PATTERN), recursive=True)
    runs = sorted({os.path.dirname(f) for f in below
                   if os.path.basename(os.path.dirname(f)) != "eval" and os.path.isfile(f)})
    if not runs:
        raise LogError(f"no *.monitor.csv files in {log_dir}")
    parents: dict[str, set] = {}  # env (the run dir's name without its seed) -> where its runs are
    for run in runs:
        parents.setdefault(SEED_SUFFIX.sub("", os.path.basename(run)), set()).add(
            os.path.dirname(run))
    for env, where in parents.items():
        if len(where) > 1:
            raise LogError(f"{log_dir} holds runs of {env} in {', '.join(sorted(where))}: "
                           "variants, not seeds of one; give each its own label")
    return runs


def monitor_files(log_dir: str) -> list[str]:
    """Return the sorted ``*monitor.csv`` files of the run in ``log_dir``.

    ``log_dir`` is a run's own directory, or a ``--log-dir`` that main.py put exactly one run
    under (``run_dirs``). Raises ``LogError`` if the dir does not exist, holds no monitor files,
    or holds several runs (they are to be named one by one).
    """
    runs = run_dirs(log_dir)
    if len(runs) > 1:
        raise LogError(f"{log_dir} holds several runs: {', '.join(runs)}; name one, or "
                       "join them with commas for a mean and band")
    files = sorted(f for f in glob.glob(os.path.join(glob.escape(runs[0]), MONITOR_PATTERN))
                   if os.path.isfile(f))
    if not files:
        raise LogError(f"no *.monitor.csv files in {log_dir}")
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
                raise LogError(f"not a monitor file (missing '#' JSON header): {path}")
            try:
                header = json.loads(first[1:])
            except json.JSONDecodeError as e:
                raise LogError(f"bad JSON header in {path}: {e}") from None
            reader = csv.DictReader(fh)
            missing = {"r", "l", "t"} - set(reader.fieldnames or [])
            if missing:
                raise LogError(f"monitor file {path} lacks column(s) {sorted(missing)}")
            r, l, t, skipped = [], [], [], []
            for row in reader:
                if not row or row.get("r") in (None, ""):
                    continue  # blank / truncated trailing line
                try:
                    values = [float(row[k]) for k in "rlt"]
                except (TypeError, ValueError):  # a cut line, a row of text
                    values = [math.nan]
                if not all(map(math.isfinite, values)):
                    skipped.append(reader.line_num + 1)  # the file's line: the JSON one first
                    continue
                r.append(values[0])
                l.append(values[1])
                t.append(values[2])
    except OSError as e:
        raise LogError(f"cannot read {path}: {e.strerror}") from None
    if skipped:  # one line per file, as plot, compare and episodes read on
        warn(f"{path}: skipped {len(skipped)} rows that are no finite r,l,t numbers "
             f"(line {', '.join(map(str, skipped[:3]))}{', ...' if len(skipped) > 3 else ''})")
    t_start = float(header.get("t_start", 0.0) or 0.0)
    return header, np.asarray(r), np.asarray(l), np.asarray(t) + t_start


def load_run(log_dir: str) -> tuple[np.ndarray, np.ndarray, str]:
    """``(steps, returns, env_id)`` of ``load_episodes``."""
    steps, returns, _, env_id = load_episodes(log_dir)
    return steps, returns, env_id


def load_episodes(log_dir: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, str]:
    """Load all monitor files of one run (one seed) from ``log_dir``.

    Episodes from all ranks are merged in order of absolute wall time (``t_start + t``; ties keep
    file order). Returns ``(steps, returns, lengths, env_id)``: ``steps[i]`` the cumulative env
    steps (episode lengths summed over all envs) when the i-th episode ended, ``returns[i]`` and
    ``lengths[i]`` its return and length, ``env_id`` the headers' id (``"unknown"`` if absent).
    Raises ``LogError`` for a missing dir, no monitor files, or no finished episodes.
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
        raise LogError(f"no finished episodes in monitor files of {log_dir}")
    distinct = list(OrderedDict.fromkeys(env_ids))
    if len(distinct) > 1:
        warn(f"{log_dir} mixes env ids {distinct}; using {distinct[0]}")
    order = np.argsort(t, kind="stable")
    steps = np.cumsum(l[order])
    return steps, r[order], l[order], str(distinct[0])
