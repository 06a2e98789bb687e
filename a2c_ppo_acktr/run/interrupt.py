"""Ctrl-C and SIGTERM as requests to stop: the training loop finishes its update, saves, exits."""
import signal
import sys
import threading

from a2c_ppo_acktr.errors import program


class StopRequest:
    """Context manager: inside it, SIGINT and SIGTERM set ``signum`` instead of ending the process
    (KeyboardInterrupt would lose the updates since the last save, with a traceback). A second
    signal stops at once, without saving (exit status 128 + signal)."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self) -> None:
        self.signum = None
        self._previous = {}

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():  # the only one that may
            self._previous = {s: signal.signal(s, self._handle) for s in self.SIGNALS}
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

    @property
    def requested(self) -> bool:
        return self.signum is not None

    @property
    def exit_status(self) -> int:
        """128 + the signal, as a shell reports a process the signal ended (130, 143)."""
        return 128 + (self.signum or signal.SIGINT)
