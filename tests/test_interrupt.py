"""run/interrupt.py: SIGINT / SIGTERM become a request to stop; a second one stops at once."""
import os
import signal
import threading

import pytest

from a2c_ppo_acktr.run.interrupt import SIGNALS, StopRequest


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_first_signal_is_a_request_and_the_handlers_come_back(signum):
    previous = {s: signal.getsignal(s) for s in SIGNALS}
    with StopRequest() as stop:
        assert not stop.requested
        os.kill(os.getpid(), signum)  # delivered to this (the main) thread before kill returns
        assert stop.requested and stop.signum == signum
        assert stop.exit_status == 128 + signum  # 130, 143: as a shell reports the signal
    assert {s: signal.getsignal(s) for s in SIGNALS} == previous


def test_second_signal_stops_at_once_with_one_line(capsys):
    previous = signal.getsignal(signal.SIGTERM)
    with StopRequest() as stop:
        os.kill(os.getpid(), signal.SIGINT)
        with pytest.raises(SystemExit) as exc:
            os.kill(os.getpid(), signal.SIGTERM)
        assert stop.signum == signal.SIGINT  # the request stays the first signal's
    assert exc.value.code == 128 + signal.SIGTERM
    assert signal.getsignal(signal.SIGTERM) is previous
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and err.endswith(": SIGTERM again: stopped without saving\n")


def test_outside_the_main_thread_nothing_is_installed():
    """Only the main thread may set handlers: elsewhere the request exists, never set."""
    previous = {s: signal.getsignal(s) for s in SIGNALS}
    seen = []

    def run():
        with StopRequest() as stop:
            seen.append(({s: signal.getsignal(s) for s in SIGNALS}, stop.requested))

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    assert seen == [(previous, False)]
    assert StopRequest().exit_status == 128 + signal.SIGINT  # no signal: as Ctrl-C's
