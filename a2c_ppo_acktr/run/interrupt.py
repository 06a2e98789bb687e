"""Ctrl-C and SIGTERM as requests to stop: the training loop finishes its update, saves, exits;
while the run starts, it is undone instead (``Interrupted``)."""
import os
import signal
import sys
import threading
from collections.abc import Callable
from typing import Any

from a2c_ppo_acktr.errors import program

SIGNALS = (signal.SIGINT, signal.SIGTERM)


def while_starting(signum: int) -> str:
    return f"{signal.Signals(signum).name} while starting: stopped before training, nothing saved"


def exit_on_signals() -> None:
    """Until a ``StopRequest`` takes over (main.py's slow imports): a signal ends the process
    at once with one line; nothing is on disk yet."""
    def stop(signum, frame):
        print(f"{program()}: {while_starting(signum)}", file=sys.stderr, flush=True)
        os._exit(128 + signum)  # no traceback from whichever import was running
    for s in SIGNALS:
        signal.signal(s, stop)


class Interrupted(Exception):
    """A signal came while the run was starting: what was built is undone; ``str()`` says so."""

    def __init__(self, signum: int) -> None:
        super().__init__(while_starting(signum))
        self.exit_status = 128 + signum


class StopRequest:
    """Context manager: inside it, SIGINT and SIGTERM set ``signum`` instead of ending the process
    (KeyboardInterrupt would lose the updates since the last save, with a traceback). A second
    signal stops at once, without saving (exit status 128 + signal)."""

    def __init__(self) -> None:
        self.signum: int | None = None
        # signal -> the handler it had before (what signal.signal returns)
        self._previous: dict[int, Callable[..., Any] | int | None] = {}

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():  # the only one that may
            self._previous = {s: signal.signal(s, self._handle) for s in SIGNALS}
        return self

    def __exit__(self, *exc):
        for s, handler in self._previous.items():
            signal.signal(s, handler)
        self._previous = {}

    def _handle(self, signum, frame):
        if self.signum is not None:
            print(f"{program()}: {signal.Signals(signum).name} again: stopped without saving",
                  file=sys.stderr)
            raise SystemExit(128 + signum)
        self.signum = signum

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
