"""scripts/bench/breakdown.py: the timer's exclusive accounting, the pipelined groups' overlap,
and short runs (a speed case, a recipe) as a user runs them whose parts add up to their wall
time."""
import os
import subprocess
import sys
import threading
import time

import pytest
from breakdown import Overlap, Timer

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "scripts", "bench", "breakdown.py")


def test_a_part_excludes_the_timed_parts_it_calls_per_thread():
    timer = Timer()
    inner = timer.wrap(lambda: time.sleep(0.05), "env")

    def outer_body():
        time.sleep(0.02)
        inner()
    outer = timer.wrap(outer_body, "normalize")
    start = time.perf_counter()
    outer()
    inclusive = time.perf_counter() - start
    worker = threading.Thread(target=inner, name="sampler")
    worker.start()
    worker.join()
    s = timer.seconds
    assert s["MainThread", "env"] >= 0.05 and s["MainThread", "normalize"] >= 0.02
    # normalize's own time only: with the env's, the two make the outer call's time once
    assert abs(s["MainThread", "normalize"] + s["MainThread", "env"] - inclusive) < 0.005
    assert s["sampler", "env"] >= 0.05 and ("sampler", "normalize") not in s


def _table(stdout):
    lines = stdout.splitlines()
    rows = {line.split()[0]: line.split()[1:] for line in lines[2:] if not line.startswith("overlap")}
    return lines, rows


@pytest.mark.slow
def test_a_short_run_is_broken_down_into_parts_that_add_up():
    proc = subprocess.run([sys.executable, SCRIPT, "--case", "a", "--total", "2048"],
                          capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines, rows = _table(proc.stdout)
    assert lines[0].startswith("2,048 env steps in ") and "env-steps/s" in lines[0]
    assert {"env", "normalize", "act", "storage", "update", "start-up", "rest"} <= set(rows)
    shares = [float(row[-1].rstrip("%")) for row in rows.values()]
    assert all(float(row[0]) >= 0 for row in rows.values())
    assert abs(sum(shares) - 100) < 1.0, shares  # the parts and the rest make the wall time


class _SteppingEnv:
    """Groups whose step takes STEP seconds from ``send``, as threads stepping in the background."""

    STEP = 0.1

    def __init__(self):
        self.done_at = {}

    def send(self, actions, group=0):
        self.done_at[group] = time.perf_counter() + self.STEP

    def recv(self, group=0):
        time.sleep(max(0.0, self.done_at.pop(group) - time.perf_counter()))
        return group


@pytest.mark.slow
def test_overlap_is_the_share_of_the_stepping_not_waited_for():
    overlap = Overlap()
    overlap.wrap(_SteppingEnv)
    env = _SteppingEnv()
    for _ in range(4):  # step then wait at once: nothing overlaps
        env.send(None, 0)
        env.recv(0)
    assert overlap.span > 0.35 and overlap.waited / overlap.span > 0.9
    overlap.span = overlap.waited = 0.0
    for _ in range(4):  # half of each 0.1 s step spent acting elsewhere (a sleep may run over)
        env.send(None, 0)
        time.sleep(0.05)
        env.recv(0)
    share = 1 - overlap.waited / overlap.span
    assert 0.4 < share < 0.8, share


@pytest.mark.slow
def test_a_recipe_runs_as_main_py_runs_it():
    proc = subprocess.run([sys.executable, SCRIPT, "--recipe", "original", "--env", "CartPole-v1",
                           "--total", "2048"], capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines, rows = _table(proc.stdout)
    assert lines[0].startswith("2,048 env steps in ")
    # the recipe logs every update (its --log-interval 1): a progress row each 256 steps
    assert float(rows["log"][0]) > 0 and {"env", "act", "update"} <= set(rows)
    assert abs(sum(float(row[-1].rstrip("%")) for row in rows.values()) - 100) < 1.0


@pytest.mark.slow
def test_bad_choices_get_one_line_and_nothing_runs(tmp_path):
    for argv, says in ((["--recipe", "fast", "--env", "CartPole-v1", "--total", "100"],
                        "recipe 'fast' is the many-env PPO recipe for atari envs"),
                       (["--recipe", "tuned", "--env", "CartPole-v1"], "--recipe needs --env and --total"),
                       (["--case", "a", "--recipe", "tuned", "--env", "CartPole-v1", "--total", "8"],
                        "give one of the two"),
                       (["--case", "a", "--total", "-5"], "--total must be a positive number")):
        proc = subprocess.run([sys.executable, SCRIPT, *argv], capture_output=True, text=True,
                              timeout=120, cwd=tmp_path)
        assert proc.returncode == 2 and proc.stdout == "", (argv, proc.stdout)
        assert proc.stderr.count("\n") == 1 and says in proc.stderr, (argv, proc.stderr)
        assert list(tmp_path.iterdir()) == []
