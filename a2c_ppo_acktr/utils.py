"""Small helpers shared by the modules: layer init, env ids as file names, atomic saves, helper
processes and signals."""
import contextlib
import errno
import glob
import json
import os
import secrets
import signal
import threading
from collections.abc import Callable, Iterator
from typing import IO, Any, TypeVar

import gymnasium as gym
import torch
import torch.nn as nn

from a2c_ppo_acktr.errors import CheckpointError

M = TypeVar("M", nn.Linear, nn.Conv2d)


def init(module: M, gain: float = 1.0) -> M:
    """Orthogonal weights with ``gain`` and zero biases, as the original initialises every layer."""
    nn.init.orthogonal_(module.weight, gain=gain)
    if module.bias is not None:
        nn.init.constant_(module.bias, 0)
    return module


def env_file_name(env_name: str) -> str:
    """The env id as a file name (checkpoints, expert files, plots): '/' (namespaced ids such as
    ALE/Pong-v5) becomes '_'; of gymnasium's ``module:EnvId`` form only the id counts."""
    return env_name.rpartition(":")[2].replace("/", "_")


def space_shape(space: gym.Space) -> tuple[int, ...]:
    """``space.shape``, which gymnasium types as Optional: None only for spaces of no fixed shape
    (Graph, Sequence), which no env here has (Discrete observations are one-hot Boxes)."""
    assert space.shape is not None, f"{space} has no fixed shape"
    return space.shape


def _temp_prefix(path):
    # Named after the checkpoint, so that start-up removes this run's leftovers only.
    return f".{os.path.basename(path)}.tmp-"


def os_error(error: BaseException) -> OSError | None:
    """The OSError that caused ``error``, itself or down its chain: torch's writer turns a failed
    write (disk full) into a RuntimeError raised while handling it."""
    seen: set[int] = set()
    cause: BaseException | None = error
    while cause is not None and id(cause) not in seen:
        if isinstance(cause, OSError):
            return cause
        seen.add(id(cause))
        cause = cause.__cause__ or cause.__context__
    return None


def save_atomic(state: Any, path: str, save: Callable[[Any, IO[bytes]], object] | None = None) -> None:
    """Write ``state`` (tensors and plain values only) to ``path`` atomically, with ``save(state,
    file)`` (``torch.save``; ``torch.export.save`` for an exported policy).

    The data goes to ``.<name>.tmp-XXXX`` in the same directory, which is then renamed over
    ``path``, so a crash mid-write leaves the previous checkpoint intact. The file gets the mode
    the umask gives a new file, as ``open`` would. An OSError (disk full, no permission), also
    one a library wrapped in its own error, is a ``CheckpointError``.
    """
    directory = os.path.dirname(os.path.abspath(path))
    tmp = None
    try:
        os.makedirs(directory, exist_ok=True)
        name = os.path.join(directory, _temp_prefix(path) + secrets.token_hex(4))
        fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)  # the umask applies
        tmp = name
        with os.fdopen(fd, "wb") as f:
            (save or torch.save)(state, f)  # looked up now: tests replace torch.save
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as e:
        if tmp is not None and os.path.exists(tmp):
            os.remove(tmp)
        cause = os_error(e) if isinstance(e, Exception) else None
        if cause is not None:
            raise CheckpointError(f"cannot write {path}: {cause.strerror or cause}") from e
        raise


def save_json(obj: Any, path: str) -> None:
    """``obj`` as indented JSON at ``path``, written atomically (``save_atomic``)."""
    save_atomic(obj, path, save=lambda o, f: f.write(json.dumps(o, indent=1).encode()))


def remove_stale_temporaries(path: str) -> list:
    """Delete the temporary files a killed ``save_checkpoint`` of ``path`` left; -> their paths."""
    pattern = os.path.join(glob.escape(os.path.dirname(os.path.abspath(path))),
                           glob.escape(_temp_prefix(path)) + "*")
    stale = glob.glob(pattern)
    for tmp in stale:
        os.remove(tmp)
    return stale


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
