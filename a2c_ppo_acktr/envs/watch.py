"""A watch on the vector-env calls that do not return: a user's env whose ``step`` or ``reset``
hangs (issue #72). One daemon thread per process looks every second at the calls in progress of
the vector envs registered with ``watch``: after ``WARN_AFTER_S`` it prints one line naming the
envs still stepping; after ``timeout`` seconds (``--env-timeout``), if given, it stops the call
with ``EnvTimeout`` raised in the main thread. Nothing is retried: a hung env is the user's to
fix, and the line says which one.

A backend marks its calls with ``Calling``: ``calling`` is ``(method, since, thread ident)``
while one is in progress, else None (two attribute writes a call: no cost on the hot path).
"""
import signal
import sys
import threading
import time
import weakref
from types import FrameType
from typing import Any, Optional

from a2c_ppo_acktr import errors
from a2c_ppo_acktr.errors import EnvError

WARN_AFTER_S = 60.0  # a step this long is not slow, it is stuck: say so once
POLL_S = 1.0
# The signal that interrupts the main thread's call when --env-timeout runs out: it ends a
# blocking wait (a worker's pipe) as a plain flag could not.
TIMEOUT_SIGNAL = signal.SIGALRM


class EnvTimeout(EnvError):
    """A vector env's call ran past ``--env-timeout``."""


class Calling:
    """Mixin of the backends: ``calling`` (above), and ``describe_pending`` (the envs that have
    not returned yet) for the watch's line."""

    calling: Optional[tuple[str, float, int]] = None

    def _start(self, method: str) -> None:
        self.calling = (method, time.monotonic(), threading.get_ident())

    def _end(self) -> None:
        self.calling = None

    def describe_pending(self, thread: int) -> str:
        """Which of its envs the call in ``thread`` waits for: "env 3", "envs 0..3"."""
        return "its envs"


def describe_envs(blocks: list[tuple[int, int]]) -> str:
    """Blocks ``(lo, hi)`` of env indices as words: "env 3", "envs 0..1, 4"."""
    parts = [f"{lo}..{hi - 1}" if hi - lo > 1 else str(lo) for lo, hi in blocks]
    if not parts:
        return "its envs"
    return ("env " if len(parts) == 1 and blocks[0][1] - blocks[0][0] == 1 else "envs ") + \
        ", ".join(parts)


class _Watched:
    def __init__(self, env: Calling, env_id: str, timeout: Optional[float]) -> None:
        self.env = weakref.ref(env)
        self.env_id, self.timeout = env_id, timeout
        self.warned: Optional[tuple] = None  # the call already warned about
        self.expired: Optional[tuple] = None  # the call stopped by the timeout


_watched: list[_Watched] = []
_lock = threading.Lock()
_thread: Optional[threading.Thread] = None
_expired: Optional[tuple[tuple, str]] = None  # (the call, its line) the main thread is to raise


def warn(line: str) -> None:
    """``line`` as a warning on stderr; never an error of its own."""
    try:
        errors.warn(line)
    except (OSError, ValueError):  # stderr gone: the run goes on
        pass


def hung_line(what: str, method: str, waited: float, timeout: Optional[float]) -> str:
    """The warning on ``what`` (envs, of an env id) whose ``method`` has not returned for
    ``waited`` s; ``timeout``: --env-timeout."""
    stop = "--env-timeout stops it" if timeout is None else f"--env-timeout stops it at {timeout:g} s"
    return f"{what}: {method} has not returned for {waited:.0f} s; Ctrl-C stops the run ({stop})"


def _check(now: float) -> None:
    global _expired
    with _lock:
        entries = list(_watched)
    for w in entries:
        env = w.env()
        if env is None:
            with _lock:
                if w in _watched:
                    _watched.remove(w)
            continue
        call = env.calling
        if call is None:
            continue
        method, since, thread = call
        waited = now - since
        if w.timeout is not None and waited >= w.timeout and w.expired is not call:
            w.expired = call
            line = (f"{env.describe_pending(thread)} of {w.env_id}: {method} did not return "
                    f"within --env-timeout {w.timeout:g} s")
            main = threading.main_thread()
            if main.ident is not None and signal.getsignal(TIMEOUT_SIGNAL) is _on_timeout:
                _expired = (call, line)
                signal.pthread_kill(main.ident, TIMEOUT_SIGNAL)
        elif waited >= WARN_AFTER_S and w.warned is not call:
            w.warned = call
            warn(hung_line(f"{env.describe_pending(thread)} of {w.env_id}", method, waited,
                           w.timeout))


def _run() -> None:
    while True:
        time.sleep(POLL_S)
        try:
            _check(time.monotonic())
        except Exception:  # the watch never takes the run down
            pass


def _on_timeout(signum: int, frame: Optional[FrameType]) -> None:
    """In the main thread: raise the expired call's ``EnvTimeout``, unless it has returned."""
    global _expired
    expired, _expired = _expired, None
    if expired is None:
        return
    call, line = expired
    with _lock:
        live = [w.env() for w in _watched]
    if any(env is not None and env.calling is call for env in live):
        raise EnvTimeout(line)


def watch(env: Any, env_id: str, timeout: Optional[float] = None) -> None:
    """Watch the calls of ``env`` (a ``Calling`` backend) of ``env_id``; ``timeout`` seconds
    (``--env-timeout``; None: never) stop a call with ``EnvTimeout``, which needs the main
    thread to set the handler: elsewhere the watch only warns."""
    global _thread
    if not isinstance(env, Calling):
        return
    if timeout is not None and threading.current_thread() is threading.main_thread():
        signal.signal(TIMEOUT_SIGNAL, _on_timeout)
    with _lock:
        _watched.append(_Watched(env, env_id, timeout))
        if _thread is None or not _thread.is_alive():
            _thread = threading.Thread(target=_run, name="env-watch", daemon=True)
            _thread.start()


def frame_of(thread: int, code: Any) -> Optional[FrameType]:
    """The innermost frame of ``thread`` running ``code`` (a function's ``__code__``), if any."""
    frame: Optional[FrameType] = sys._current_frames().get(thread)
    while frame is not None and frame.f_code is not code:
        frame = frame.f_back
    return frame

