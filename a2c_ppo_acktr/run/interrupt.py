"""Ctrl-C and SIGTERM as requests to stop: the training loop finishes its update, saves, exits;
while the run starts, it is undone instead (``Interrupted``). A parent of training runs passes
them on (``Children``)."""
import errno
import multiprocessing
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import Any, Optional

from a2c_ppo_acktr.envs.processes import die_with_parent
from a2c_ppo_acktr.errors import program, say

# SIGHUP: the terminal closed (ssh dropped); the run saves and stops as on SIGTERM (129).
SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
# The same signal again within this many seconds is the same request delivered twice: by a
# scheduler (or Ctrl-C) to the whole group and by the parent that passes it on (``Children``).
REPEAT_S = 1.0


TRAINING = "stopped before training, nothing saved"
# Set by ``Children`` for the processes it starts: its pid. Such a process (main.py) is sent
# SIGTERM when its parent ends, however the parent ends (SIGKILL too): no run outlives it.
PARENT = "A2C_PPO_ACKTR_PARENT_PID"  # what a signal while main.py starts leaves


def while_starting(signum: int, outcome: str = TRAINING) -> str:
    return f"{signal.Signals(signum).name} while starting: {outcome}"


def exit_on_signals(outcome: str = TRAINING) -> None:
    """Until a ``StopRequest`` takes over (main.py's slow imports), or ``default_signals``: a
    signal ends the process at once with one line ending in ``outcome``; nothing is on disk yet.
    Signals the caller blocked until now (while this module was imported) are unblocked: one
    that came meanwhile is handled here."""
    def stop(signum, frame):
        say(f"{program()}: {while_starting(signum, outcome)}")
        os._exit(128 + signum)  # no traceback from whichever import was running
    for s in SIGNALS:
        signal.signal(s, stop)
    if os.environ.get(PARENT) == str(os.getppid()):  # a run of Children: it ends with its parent
        die_with_parent(signal.SIGTERM)  # SIGTERM: it saves, as on a signal its parent passed on
    signal.pthread_sigmask(signal.SIG_UNBLOCK, SIGNALS)


def default_signals() -> None:
    """Python's own handling back, after ``exit_on_signals``: Ctrl-C raises KeyboardInterrupt
    (for the caller to catch), SIGTERM and SIGHUP end the process."""
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGHUP, signal.SIG_DFL)


# After a second signal, the most a script's process may take to clean up (None: no limit, as
# in a process that goes on after catching the SystemExit, a test's). main.py sets it.
HARD_EXIT_S: float | None = None


def _say(line: str) -> None:
    """One line on stderr, from a signal handler: never an error of its own (stderr closed)."""
    try:
        say(f"{program()}: {line}")
    except (OSError, ValueError):
        pass


def _exit_soon(status: int) -> None:
    """Unless the process has ended within ``HARD_EXIT_S`` (its clean-up stuck on a hung env),
    kill its child processes and end it with ``status``."""
    limit = HARD_EXIT_S
    if limit is None:
        return

    def hard_exit() -> None:
        time.sleep(limit)
        for child in multiprocessing.active_children():
            child.kill()
        os._exit(status)
    threading.Thread(target=hard_exit, name="hard-exit", daemon=True).start()


class _Outliving:
    """A text stream (stdout, stderr) whose reader may go away: the first write or flush that
    fails because it has (a closed pipe, ``main.py ... | head``; a closed terminal, EIO) points
    the stream's descriptor at /dev/null and says ``note`` (if any) on stderr; the process goes
    on, its output discarded. Everything else is the stream's own."""

    def __init__(self, stream: Any, note: Optional[str]) -> None:
        self._stream, self._note = stream, note

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except OSError as e:
            self._gone(e)
            return len(text)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except OSError as e:
            self._gone(e)

    def _gone(self, error: OSError) -> None:
        if error.errno not in (errno.EPIPE, errno.EIO):
            raise error
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, self._stream.fileno())  # what the stream still holds goes there too
        os.close(null)
        if self._note:
            _say(self._note)
            self._note = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def outlive_readers(stdout_note: str) -> None:
    """stdout and stderr as ``_Outliving`` streams: a reader that goes away never ends the
    process with a traceback; ``stdout_note`` says what then happens, once."""
    sys.stderr = _Outliving(sys.stderr, None)
    sys.stdout = _Outliving(sys.stdout, stdout_note)


class Interrupted(Exception):
    """A signal came while the run was starting: what was built is undone; ``str()`` says so."""

    def __init__(self, signum: int) -> None:
        super().__init__(while_starting(signum))
        self.exit_status = 128 + signum


class _Handling:
    """Context manager: inside it, SIGINT and SIGTERM go to ``self._handle`` (from the main
    thread, the only one that may set handlers; elsewhere nothing changes); ``signum``: the first
    signal, or None."""

    def __init__(self) -> None:
        self.signum: int | None = None
        # signal -> the handler it had before (what signal.signal returns)
        self._previous: dict[int, Callable[..., Any] | int | None] = {}

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():
            self._previous = {s: signal.signal(s, self._handle) for s in SIGNALS}
        return self

    def __exit__(self, *exc):
        for s, handler in self._previous.items():
            if signal.getsignal(s) == self._handle:  # not one set since (a failing torchrun
                signal.signal(s, handler)  # rank ignores torchrun's SIGTERM: sampling/ddp.py)
        self._previous = {}

    def _handle(self, signum, frame) -> None:
        raise NotImplementedError


class StopRequest(_Handling):
    """Inside it, SIGINT, SIGTERM and SIGHUP set ``signum`` instead of ending the process
    (KeyboardInterrupt would lose the updates since the last save, with a traceback), and say so
    at once in one line (``acknowledgement``). A second signal stops at once, without saving
    (exit status 128 + signal), unless it is the first one again within ``REPEAT_S``; whatever
    then hangs (an env stuck in a worker) does not keep a script past ``HARD_EXIT_S``."""

    def __init__(self) -> None:
        super().__init__()
        self._at = 0.0  # time.monotonic() of the request
        self.forced: int | None = None  # the exit status of a second signal
        self.acknowledgement = "stopping; again to stop now"  # the run says "after this update"

    def _handle(self, signum, frame):
        if self.signum is not None and signum == self.signum and time.monotonic() - self._at < REPEAT_S:
            return
        name = signal.Signals(signum).name
        if self.signum is not None:
            _say(f"{name} again: stopped without saving")
            _exit_soon(128 + signum)
            self.forced = 128 + signum
            raise SystemExit(128 + signum)
        self.signum, self._at = signum, time.monotonic()
        if os.environ.get("RANK", "0") == "0":  # under torchrun, rank 0 speaks for all
            _say(f"{name}: {self.acknowledgement}")

    def __exit__(self, kind, error, tb):
        super().__exit__(kind, error, tb)
        if self.forced is not None and isinstance(error, SystemExit) and error.code != self.forced:
            # Ray's waits turn the SystemExit of a second signal into SystemExit(1)
            raise SystemExit(self.forced) from None

    def check(self, requested: bool | None = None) -> None:
        """Raise ``Interrupted`` if a stop was requested (``requested``: of any rank, if given)."""
        if self.requested if requested is None else requested:
            raise Interrupted(self.signum or signal.SIGTERM)

    @property
    def requested(self) -> bool:
        return self.signum is not None

    @property
    def exit_status(self) -> int:
        """128 + the signal, as a shell reports a process the signal ended (130, 143)."""
        return 128 + (self.signum or signal.SIGINT)


class Children(_Handling):
    """For a parent whose children are training runs (scripts/benchmark.py): inside it, SIGINT
    or SIGTERM sent to the parent alone (``kill``, ``timeout``, a scheduler that signals one
    process) reaches each running child too, which saves and stops as it would if the signal had
    gone to the whole group; children not yet started are not started."""

    def __init__(self) -> None:
        super().__init__()
        self._running: set[subprocess.Popen] = set()
        self._lock = threading.Lock()

    def _handle(self, signum, frame):
        self.signum = self.signum or signum
        for proc in list(self._running):  # a second signal too: the children stop unsaved
            proc.send_signal(signum)

    def start(self, argv: list[str], **popen_kwargs: Any) -> subprocess.Popen | None:
        """``subprocess.Popen`` from any thread, the child held until ``end``; None if a signal
        came before it started."""
        with self._lock:
            if self.signum is not None:
                return None
            env = {**(popen_kwargs.pop("env", None) or os.environ), PARENT: str(os.getpid())}
            proc = subprocess.Popen(argv, env=env, **popen_kwargs)
            self._running.add(proc)
        if self.signum is not None:  # came while it started, maybe before the set held it
            proc.send_signal(self.signum)
        return proc

    def end(self, proc: subprocess.Popen, kill: bool = False) -> int:
        """Wait for a child of ``start`` (``kill``: SIGKILL it first); its exit status."""
        if kill:
            proc.kill()
        try:
            return proc.wait()
        finally:
            with self._lock:
                self._running.discard(proc)

    def call(self, argv: list[str], **popen_kwargs: Any) -> int | None:
        """``subprocess.call`` from any thread: the child's exit status, None if a signal came
        before it started."""
        proc = self.start(argv, **popen_kwargs)
        return None if proc is None else self.end(proc)
