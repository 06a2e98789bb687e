"""Helper processes (ShmemVecEnv's workers, Ray's, the runs that ``run/interrupt.Children``
starts) that end with their parent, leave Ctrl-C and SIGTERM to it, and fit in its descriptors.
"""
import contextlib
import errno
import os
import signal
import threading
from collections.abc import Iterator


def check_descriptors(needed: int, what: str) -> None:
    """``OSError(EMFILE)`` (``errors.failure_line``'s one line) where ``ulimit -n`` leaves fewer
    than ``needed`` descriptors for ``what``: found before it starts, as a process started at the
    limit (a worker, multiprocessing's forkserver) prints its own traceback. Linux only."""
    import resource
    try:
        used = len(os.listdir("/proc/self/fd"))
    except OSError:  # not Linux: the start finds out
        return
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    if soft != resource.RLIM_INFINITY and used + needed > soft:
        raise OSError(errno.EMFILE, f"{used} open, and {what} need about {needed} more")


def die_with_parent(signum: int = signal.SIGKILL) -> None:
    """This process gets ``signum`` when its parent ends, however the parent ends (SIGKILL too),
    so that no helper process outlives what it helps (Linux; elsewhere nothing changes). Called
    first thing in the child (a worker, a run that ``interrupt.Children`` started)."""
    try:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        parent = os.getppid()
        libc.prctl(1, signum, 0, 0, 0)  # PR_SET_PDEATHSIG
        if os.getppid() != parent:  # the parent ended before that took effect
            os.kill(os.getpid(), signum)
    except (OSError, AttributeError):
        pass


@contextlib.contextmanager
def signals_stay_here() -> Iterator[None]:
    """Processes started inside ignore SIGINT, SIGTERM and SIGHUP: Ctrl-C, a scheduler's SIGTERM
    and a closed terminal's SIGHUP reach the whole process group, and only this process is to
    act on them (it saves, then closes its helpers). An ignored signal is inherited across exec,
    a handler is not. Signals sent meanwhile are blocked here and handled after; this process's
    handlers are put back, also over any that a library installed meanwhile (Ray's driver
    aborts on SIGTERM). From the main thread only: elsewhere nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    signals = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, signals)
    handlers = {s: signal.signal(s, signal.SIG_IGN) for s in signals}
    try:
        yield
    finally:
        for s, handler in handlers.items():
            signal.signal(s, handler)
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
