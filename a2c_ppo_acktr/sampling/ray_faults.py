"""What the learner makes of its Ray workers' faults (``ray_learner.WorkerGroup``).

A worker whose process dies or whose env raises is restarted with fresh envs and re-samples its
share of the update. The run stops instead, in one line (an ``EnvError``: the env's own traceback
first, where it raised), when

- the same failure (ids and numbers aside) comes ``REPEATS`` times within ``WINDOW`` updates:
  an env that keeps failing is not helped by fresh envs, and each restart costs a new process
  (restarted on every other update, a run went on at a tenth of its speed and ended "done");
- one worker fails more than ``MAX_FAILURES`` times in a row for one update;
- an env ran past ``--env-timeout`` (the worker's own watch stopped it, ``envs/watch.py``):
  fresh envs would hang again.

A worker whose rollout has not come back after ``watch.WARN_AFTER_S`` gets the in-process
watch's warning, once per update (``Waiting``).
"""
import re
import time
from collections import deque
from typing import Any, Optional

from a2c_ppo_acktr.envs import watch
from a2c_ppo_acktr.errors import EnvError, first_line

MAX_FAILURES = 3  # restarts of one worker for one update
REPEATS, WINDOW = 3, 100  # the same failure this many times within this many updates stops
ABOVE = " (its traceback above)"  # how an EnvError with its traceback ends (envs/vec_env.py)


def describe(error: BaseException) -> str:
    """A worker's failure in one line: for an exception raised in the worker (``RayTaskError``),
    the exception; for a process that died, Ray's last line about it."""
    cause = getattr(error, "cause", None)
    if isinstance(cause, BaseException):
        line = first_line(cause).removesuffix(ABOVE)  # the traceback is the worker's
        return (line if isinstance(cause, EnvError) else f"{type(cause).__name__}: {line}")[:300]
    lines = str(error).strip().splitlines()
    return f"{type(error).__name__}: {lines[-1] if lines else ''}"[:300]


def signature(what: str) -> str:
    """``what`` without what differs between two instances of one failure: ids, pids, numbers."""
    return re.sub(r"\b[0-9a-f]{16,}\b|\d+", "#", what)


class Failures:
    """The failures seen so far: each update's failure either restarts the worker (None) or
    stops the run (``verdict``'s ``EnvError``)."""

    def __init__(self) -> None:
        self._seen: dict[str, deque[int]] = {}  # signature -> the updates it came in

    def verdict(self, worker: int, error: BaseException, attempt: int,
                update: int) -> Optional[EnvError]:
        """None to restart ``worker``, whose ``attempt``-th failure for ``update`` is
        ``error``; else the error that stops the run."""
        cause = getattr(error, "cause", None)
        details = getattr(cause, "details", "")
        what = describe(error) + (ABOVE if details else "")  # printed above it: open_run
        if isinstance(cause, watch.EnvTimeout):
            return EnvError(f"Ray rollout worker {worker}: {cause}", details)
        updates = self._seen.setdefault(signature(what), deque())
        updates.append(update)
        while updates[0] <= update - WINDOW:
            updates.popleft()
        if len(updates) >= REPEATS:
            span = update - updates[0] + 1
            return EnvError(f"Ray rollout worker {worker}: {what}: the same failure "
                            f"{len(updates)} times within {span} update{'s' * (span > 1)}, "
                            "each time in fresh envs", details)
        if attempt > MAX_FAILURES:
            return EnvError(f"Ray rollout worker {worker} failed {attempt} times in a row for "
                            f"update {update}: {what}", details)
        return None


class Waiting:
    """The rollouts one update waits for: a worker's that has not come back after
    ``watch.WARN_AFTER_S`` is said once, as the in-process watch says a hung env."""

    def __init__(self, env_id: str, envs_per_worker: int, timeout: Optional[float]) -> None:
        self.env_id, self.P, self.timeout = env_id, envs_per_worker, timeout
        self.since = time.monotonic()
        self.warned: set[int] = set()

    def check(self, workers: Any) -> None:
        """Warn about each of ``workers`` (indices) still sampling past the limit, once."""
        waited = time.monotonic() - self.since
        if waited < watch.WARN_AFTER_S:
            return
        for w in sorted(set(workers) - self.warned):
            self.warned.add(w)
            envs = watch.describe_envs([(w * self.P, (w + 1) * self.P)])
            watch.warn(watch.hung_line(f"Ray rollout worker {w} ({envs}) of {self.env_id}",
                                       "sample", waited, self.timeout))
