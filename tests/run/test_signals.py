"""Every signal, every row (issue #72 item 4): SIGHUP saves as SIGTERM does (129); a closed
stdout never tracebacks, the run goes on; the runs of ``Children`` (benchmark.py's) end with
their parent, however it ends; every entry point's Ctrl-C is one line."""
import os
import pathlib
import signal
import subprocess
import sys
import time

import plot
import pytest

import main
from a2c_ppo_acktr.algo import A2C_ACKTR
from a2c_ppo_acktr.deploy import export
from a2c_ppo_acktr.run.checkpoint import load_checkpoint

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TINY = ["--algo", "a2c", "--env-name", "CartPole-v1", "--num-processes", "2", "--num-steps", "8",
        "--vec-env", "dummy", "--log-interval", "1"]


def dirs(tmp_path):
    return ["--log-dir", str(tmp_path / "logs"), "--save-dir", str(tmp_path / "models")]


def test_sighup_saves_and_stops_as_sigterm_does(tmp_path, capsys, monkeypatch):
    update, calls = A2C_ACKTR.update, []

    def update_then_hangup(self, rollouts):
        calls.append(1)
        if len(calls) == 3:
            os.kill(os.getpid(), signal.SIGHUP)  # the terminal closed (ssh dropped)
        return update(self, rollouts)

    monkeypatch.setattr(A2C_ACKTR, "update", update_then_hangup)
    assert main.main(TINY + ["--num-env-steps", "3200"] + dirs(tmp_path)) == 129
    path = tmp_path / "models" / "a2c" / "CartPole-v1_seed1.pt"
    assert capsys.readouterr().err.endswith(
        ": SIGHUP: stopping after this update; again to stop now\n"
        f"interrupted at 48 steps; saved {path}; --resume to continue\n")
    assert load_checkpoint(str(path))["env_steps"] == 48


@pytest.mark.slow
def test_a_closed_stdout_never_tracebacks_the_run_goes_on(tmp_path):
    proc = subprocess.Popen([sys.executable, "main.py", *TINY, "--num-env-steps", "800",
                             *dirs(tmp_path)], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    proc.stdout.readline()  # as `| head -1` does: read a line, then close the pipe
    proc.stdout.close()
    assert proc.wait(timeout=120) == 0
    err = proc.stderr.read()
    assert err == "main.py: stdout closed: the run goes on, saving as before; its reports are " \
                  "in progress.csv\n"
    path = tmp_path / "models" / "a2c" / "CartPole-v1_seed1.pt"
    assert load_checkpoint(str(path))["env_steps"] == 800


PARENT = """import sys
from a2c_ppo_acktr.run.interrupt import Children
Children().call(sys.argv[1:])
"""


@pytest.mark.slow
def test_a_run_of_children_ends_with_its_parent_even_killed(tmp_path):
    """benchmark.py's runs: its SIGKILL reaches them as a SIGTERM (they save and stop)."""
    argv = [sys.executable, "main.py", *TINY, "--num-env-steps", "10000000", "--save-interval",
            "100000", *dirs(tmp_path)]
    parent = subprocess.Popen([sys.executable, "-c", PARENT, *argv], cwd=ROOT,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    progress = pathlib.Path(tmp_path, "logs", "a2c", "CartPole-v1_seed1", "progress.csv")
    deadline = time.monotonic() + 120
    while not progress.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    lock = progress.parent / "run.lock"
    child = int(lock.read_text())  # the training process, as its lock says
    parent.kill()
    parent.wait()
    deadline = time.monotonic() + 30
    while os.path.exists(f"/proc/{child}") and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not os.path.exists(f"/proc/{child}")
    assert "SIGTERM: stopping after this update" in parent.stderr.read()
    assert load_checkpoint(str(tmp_path / "models" / "a2c" / "CartPole-v1_seed1.pt"))


def ctrl_c(*args, **kwargs):
    raise KeyboardInterrupt


def test_export_and_plot_history_say_ctrl_c_in_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(export, "export_policy", ctrl_c)
    assert export.main([str(tmp_path / "a.pt")]) == 130
    assert capsys.readouterr().err == f"{export.PROG}: interrupted: nothing written\n"
    monkeypatch.setattr(plot, "evaluate_history", ctrl_c)
    assert plot.main(["--history", f"h={tmp_path}", "--out", str(tmp_path / "p.png")]) == 130
    assert capsys.readouterr().err == "plot.py: interrupted: nothing written\n"
