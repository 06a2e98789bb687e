"""The processes of the Ray a learner started end with the learner, even a SIGKILLed one.

Ray ends the processes it starts (GCS, raylet, ...) with the driver that started them, but the
raylet's own children, its dashboard and runtime-env agents, outlive a SIGKILLed driver by 60 s:
each first tries to tell the GCS, dead too, that the raylet died. So a learner that starts its
own Ray (``ray_actors.start_ray``) also starts this file as a script (``Reaper``; it imports
nothing but the standard library, and ignores the signals a terminal or a scheduler sends the
whole group), then writes it the pid and start time of each process of its Ray. When its stdin
closes, because the learner has ended however it ended, it ends those still running: SIGTERM,
then SIGKILL after ``GRACE_S``.
"""
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterable

GRACE_S = 2.0


def start_time(pid: int) -> int | None:
    """When process ``pid`` started (clock ticks since boot), None if it has ended (or no /proc)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rpartition(")")[2].split()
    except OSError:
        return None
    return None if fields[0] in ("Z", "X") else int(fields[19])


def descendants(pid: int) -> list[int]:
    """The processes below ``pid`` (Linux's /proc; elsewhere none)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else []:
        if not entry.isdigit():  # self, thread-self, meminfo, ...
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                parent = int(f.read().rpartition(")")[2].split()[1])
        except (OSError, ValueError, IndexError):  # ended meanwhile
            continue
        children.setdefault(parent, []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        below = children.get(todo.pop(), [])
        found += below
        todo += below
    return found


class Reaper:
    """The learner's side: ``watch`` processes, which end with this one (module docstring)."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen | None = None
        if os.path.isdir("/proc"):
            self.proc = subprocess.Popen([sys.executable, "-I", os.path.abspath(__file__)],
                                         stdin=subprocess.PIPE, text=True)

    def watch(self, pids: Iterable[int]) -> None:
        if self.proc is None or self.proc.stdin is None:
            return
        lines = [f"{pid} {start}\n" for pid in pids if pid != self.proc.pid
                 and (start := start_time(pid)) is not None]
        try:
            self.proc.stdin.write("".join(lines))
            self.proc.stdin.flush()
        except OSError:  # it has ended (a signal to it alone): nothing to watch with
            self.proc = None

    def close(self) -> None:
        """End what is still running of the watched processes, now."""
        if self.proc is None:
            return
        try:
            self.proc.communicate(timeout=2 * GRACE_S + 5)
        except (OSError, subprocess.TimeoutExpired):
            pass
        self.proc = None


def reap(watched: dict[int, int]) -> None:
    """End the processes of ``watched`` (pid -> start time) that still run."""
    for sig, wait in ((signal.SIGTERM, GRACE_S), (signal.SIGKILL, 0.0)):
        alive = [pid for pid, start in watched.items() if start_time(pid) == start]
        for pid in alive:
            try:
                os.kill(pid, sig)
            except OSError:
                pass
        deadline = time.monotonic() + wait
        while alive and time.monotonic() < deadline:
            time.sleep(0.05)
            alive = [pid for pid in alive if start_time(pid) == watched[pid]]
        if not alive:
            return


def main() -> None:
    for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, signal.SIG_IGN)
    watched: dict[int, int] = {}
    for line in sys.stdin:  # until the learner has ended
        pid, start = line.split()
        watched[int(pid)] = int(start)
    reap(watched)


if __name__ == "__main__":
    main()
