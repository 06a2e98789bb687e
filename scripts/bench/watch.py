"""Watch a ``main.py`` run as it trains: its ``progress.csv`` rows as they are written, each with
the wall-clock second (from the command's start) at which it was read, and what they give.

    result = watch(["--env-name", "PongNoFrameskip-v4", "--recipe", "fast"], workdir,
                   limit=300, stop=reached(20))

The run is ``python main.py <argv> --log-interval 1 --save-dir '' --log-dir <workdir>/logs`` in a
fresh process (imports, env and model creation are inside its wall-clock). It is stopped by
SIGTERM (``main.py`` finishes the update and exits 143) once ``stop(rows)`` holds or ``limit``
seconds have passed. The row's own ``time`` column (seconds since the training loop began) times
the updates; the reading times place the loop's start on the command's clock
(``loop_start``), to within the polling interval.
"""
import csv
import glob
import math
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MAIN = os.path.join(ROOT, "main.py")
POLL_S = 0.1
GRACE_S = 20.0  # after SIGTERM: the update under way finishes, then the process exits
COMPILE_LINE = re.compile(r"^torch\.compile: ([0-9.]+) s compiling", re.M)
IN_PROCESS = "compiling in this process"  # speed.in_process_on_worker_failure's line


@dataclass
class Row:
    """One update: ``steps`` after it, ``time`` (its loop's seconds), the mean return of the last
    10 training episodes (None before one ended), ``seen``: the command's seconds when read."""

    update: int
    steps: int
    time: float
    mean_return: float | None
    seen: float


@dataclass
class Watched:
    rows: list[Row]
    rc: int | None          # the exit status; None: killed after the grace period
    ended: str              # "finished", "stopped" (stop held), "time limit", "failed"
    elapsed: float          # the command's seconds until it exited
    stdout: str = ""
    stderr: str = ""
    started: float = 0.0    # time.perf_counter() at the command's start


def parse_rows(text: str, seen: float, known: int = 0) -> list[Row]:
    """The complete rows of a ``progress.csv``'s text after the first ``known``; a last line
    without its newline (being written) is left for the next reading."""
    lines = text.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines = lines[:-1]
    rows = []
    for record in list(csv.DictReader(lines))[known:]:
        mean = record.get("mean_return", "")
        rows.append(Row(int(record["update"]), int(record["timesteps"]), float(record["time"]),
                        float(mean) if mean not in ("", None) else None, seen))
    return rows


def loop_start(rows: Sequence[Row]) -> float:
    """Seconds from the command's start to its training loop's: each row was read no earlier
    than written, so the smallest ``seen - time`` is the tightest bound."""
    return min(r.seen - r.time for r in rows)


def wall(row: Row, rows: Sequence[Row]) -> float:
    """Seconds from the command's start to the end of ``row``'s update."""
    return loop_start(rows) + row.time


def startup(rows: Sequence[Row]) -> float | None:
    """Seconds from the command's start to the end of its first update (imports, envs, model,
    the first rollout and update, compiling included)."""
    return wall(rows[0], rows) if rows else None


def steady_rate(rows: Sequence[Row], skip: int) -> float | None:
    """Env-steps/s after the first ``skip`` (>= 1) updates, to the last row; None without a
    row past them."""
    if skip < 1 or len(rows) <= skip:
        return None
    first, last = rows[skip - 1], rows[-1]
    return (last.steps - first.steps) / (last.time - first.time) if last.time > first.time else None


def first_reach(rows: Sequence[Row], threshold: float) -> Row | None:
    """The first row whose mean of the last 10 training episodes is >= ``threshold``."""
    return next((r for r in rows if r.mean_return is not None and r.mean_return >= threshold), None)


def reached(threshold: float) -> Callable[[Sequence[Row]], bool]:
    """A ``stop`` for ``watch``: once the mean of the last 10 episodes is >= ``threshold``."""
    return lambda rows: first_reach(rows, threshold) is not None


def measured_for(seconds: float, skip: int) -> Callable[[Sequence[Row]], bool]:
    """A ``stop`` for ``watch``: once ``seconds`` of updates after the first ``skip`` are in."""
    return lambda rows: len(rows) > skip and rows[-1].time - rows[skip - 1].time >= seconds


def compile_seconds(stdout: str) -> float | None:
    """The seconds ``main.py`` said it spent compiling (``--compile``), or None."""
    found = COMPILE_LINE.search(stdout)
    return float(found.group(1)) if found else None


def busy_share(samples: Sequence[tuple[float, float]], start: float, end: float) -> float | None:
    """The mean of the (time, GPU busy share) samples taken between ``start`` and ``end``."""
    inside = [share for t, share in samples if start <= t <= end and not math.isnan(share)]
    return sum(inside) / len(inside) if inside else None


def watch(argv: Sequence[str], workdir: str, limit: float,
          stop: Callable[[Sequence[Row]], bool] = lambda rows: False,
          program: str = MAIN) -> Watched:
    """Run ``main.py argv`` (see the module's docstring) until it exits, ``stop(rows)`` holds or
    ``limit`` seconds pass; ``program``: another script taking main.py's flags (tests)."""
    log_dir = os.path.join(workdir, "logs")
    out_path, err_path = os.path.join(workdir, "stdout.log"), os.path.join(workdir, "stderr.log")
    cmd = [sys.executable, program, *argv, "--log-interval", "1",
           "--save-dir", "", "--log-dir", log_dir]
    rows: list[Row] = []
    ended, progress = "finished", None
    with open(out_path, "w") as out, open(err_path, "w") as err:
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=out, stderr=err,
                                env={**os.environ, "PYTHONUNBUFFERED": "1"})
        while proc.poll() is None:
            time.sleep(POLL_S)
            now = time.perf_counter() - start
            if progress is None:
                found = glob.glob(os.path.join(log_dir, "**", "progress.csv"), recursive=True)
                progress = found[0] if found else None
            if progress is not None:
                with open(progress, newline="") as f:
                    rows += parse_rows(f.read(), now, len(rows))
            if rows and stop(rows):
                ended = "stopped"
            elif now >= limit:
                ended = "time limit"
            else:
                continue
            proc.send_signal(signal.SIGTERM)
            break
        try:
            rc: int | None = proc.wait(timeout=GRACE_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            rc = None
        elapsed = time.perf_counter() - start
    if progress is not None:  # the rows written after the last poll
        with open(progress, newline="") as f:
            rows += parse_rows(f.read(), elapsed, len(rows))
    if ended == "finished" and rc != 0:
        ended = "failed"
    with open(out_path) as f_out, open(err_path) as f_err:
        return Watched(rows, rc, ended, elapsed, f_out.read(), f_err.read(), start)


def failure_line(result: Watched) -> str:
    """What a failed run said last on stderr (its one-line error), for the table."""
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    return f"exit {result.rc}: {lines[-1].strip() if lines else 'no message'}"
