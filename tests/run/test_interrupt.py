"""run/interrupt.py: SIGINT / SIGTERM become a request to stop; a second one stops at once; a parent
passes them on to its children."""
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from a2c_ppo_acktr.run import interrupt
from a2c_ppo_acktr.run.interrupt import SIGNALS, Children, StopRequest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# Runs a script as ``python <script> ...`` would, sending it SIGINT at its first import of
# gymnasium (the imports take seconds; a Ctrl-C then was a KeyboardInterrupt traceback).
SIGINT_AT_GYMNASIUM = (
    "import builtins, os, runpy, signal, sys\n"
    "real = builtins.__import__\n"
    "def sigint_at_gymnasium(name, *args, **kwargs):\n"
    "    if name == 'gymnasium' and 'gymnasium' not in sys.modules:\n"
    "        builtins.__import__ = real\n"
    "        os.kill(os.getpid(), signal.SIGINT)\n"
    "    return real(name, *args, **kwargs)\n"
    "builtins.__import__ = sigint_at_gymnasium\n"
    "sys.argv = sys.argv[1:]\n"
    "runpy.run_path(sys.argv[0], run_name='__main__')\n")


@pytest.mark.slow
@pytest.mark.parametrize("script, outcome", [("enjoy.py", "nothing played"),
                                             ("gail_experts/generate.py", "nothing written")])
def test_a_signal_while_a_script_imports_ends_it_in_one_line(tmp_path, script, outcome):
    argv = [script, "--env-name", "CartPole-v1", "--load-dir", str(tmp_path)]
    proc = subprocess.run([sys.executable, "-c", SIGINT_AT_GYMNASIUM, *argv], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 130, proc.stderr
    name = os.path.basename(script)
    assert proc.stderr == f"{name}: SIGINT while starting: {outcome}\n"


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
    first, second = capsys.readouterr().err.splitlines()  # the first acknowledged at once
    assert first.endswith(": SIGINT: stopping; again to stop now")
    assert second.endswith(": SIGTERM again: stopped without saving")


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


def test_the_same_signal_again_at_once_is_the_same_request(monkeypatch):
    """A scheduler's SIGTERM to the group and the parent's copy of it arrive together: one
    request. The same signal later, or another one, stops at once."""
    with StopRequest() as stop:
        os.kill(os.getpid(), signal.SIGTERM)
        os.kill(os.getpid(), signal.SIGTERM)  # within REPEAT_S: the same request
        assert stop.requested and stop.signum == signal.SIGTERM
        monkeypatch.setattr(interrupt, "REPEAT_S", 0.0)
        with pytest.raises(SystemExit) as exc:
            os.kill(os.getpid(), signal.SIGTERM)
    assert exc.value.code == 128 + signal.SIGTERM


def test_a_second_signal_keeps_its_status_where_a_library_changed_its_exit():
    """Ray's waits turn the SystemExit of a second Ctrl-C into SystemExit(1): the run still
    exits 130 (issue #85)."""
    with pytest.raises(SystemExit) as exc:
        with StopRequest():
            os.kill(os.getpid(), signal.SIGINT)
            try:  # in ray.wait
                os.kill(os.getpid(), signal.SIGTERM)
            except SystemExit:
                raise SystemExit(1) from None  # what ray._raylet makes of it
    assert exc.value.code == 128 + signal.SIGTERM


def test_a_handler_set_inside_is_not_put_back_over():
    """A torchrun rank that stops on a failure ignores torchrun's SIGTERM from then on
    (sampling/ddp.py): leaving the StopRequest keeps it ignored."""
    previous = signal.getsignal(signal.SIGTERM)
    before = signal.getsignal(signal.SIGINT)  # whatever an earlier test in this process left
    try:
        with StopRequest():
            assert signal.getsignal(signal.SIGINT) is not before
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
        assert signal.getsignal(signal.SIGTERM) == signal.SIG_IGN
        assert signal.getsignal(signal.SIGINT) is before  # the others put back
    finally:
        signal.signal(signal.SIGTERM, previous)


CHILD = """import pathlib, signal, sys, time
signal.signal(signal.SIGTERM, lambda *_: sys.exit(7))
pathlib.Path(sys.argv[1]).touch()
time.sleep(60)
"""


def test_children_get_the_parents_signal_and_no_more_start(tmp_path):
    ready = tmp_path / "ready"
    previous = {s: signal.getsignal(s) for s in SIGNALS}
    status = []
    with Children() as children:
        thread = threading.Thread(
            target=lambda: status.append(children.call([sys.executable, "-c", CHILD, str(ready)])))
        thread.start()
        deadline = time.monotonic() + 60
        while not ready.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        os.kill(os.getpid(), signal.SIGTERM)  # to this process alone, as `kill` or `timeout` send it
        thread.join(30)
        assert status == [7] and children.signum == signal.SIGTERM
        assert children.call([sys.executable, "-c", "raise SystemExit(3)"]) is None  # not started
    assert {s: signal.getsignal(s) for s in SIGNALS} == previous
