"""The processes of a learner's own Ray end with it, even a SIGKILLed one
(a2c_ppo_acktr/sampling/reaper.py): here a process that would outlive the learner stands in
for Ray's agents."""
import os
import signal
import subprocess
import sys
import time

import pytest

from a2c_ppo_acktr.sampling.reaper import Reaper, descendants, start_time

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc"), reason="reads Linux's /proc")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SLEEPER = [sys.executable, "-c", "import time; time.sleep(120)"]


def ended_within(pid, seconds):
    deadline = time.monotonic() + seconds
    while start_time(pid) is not None and time.monotonic() < deadline:
        time.sleep(0.05)
    return start_time(pid) is None


LEARNER = f"""import signal, subprocess, sys, time
from a2c_ppo_acktr.sampling.reaper import Reaper
signal.signal(signal.SIGINT, signal.SIG_IGN)  # as main.py, which saves on Ctrl-C
reaper = Reaper()
agent = subprocess.Popen({SLEEPER!r}, start_new_session=True)  # as Ray's agents: no fate shared
reaper.watch([agent.pid])
print(agent.pid, reaper.proc.pid, flush=True)
time.sleep(120)
"""


@pytest.mark.slow
def test_what_it_watches_ends_with_a_sigkilled_learner():
    learner = subprocess.Popen([sys.executable, "-c", LEARNER], stdout=subprocess.PIPE, text=True,
                               env={**os.environ, "PYTHONPATH": ROOT}, start_new_session=True)
    try:
        assert learner.stdout is not None
        agent, reaper = map(int, learner.stdout.readline().split())
        os.killpg(learner.pid, signal.SIGINT)  # Ctrl-C reaches the group: the reaper stays
        time.sleep(1)
        assert start_time(reaper) is not None and start_time(agent) is not None
        learner.kill()
        assert ended_within(agent, 15) and ended_within(reaper, 15)
    finally:
        learner.kill()


@pytest.mark.slow
def test_close_ends_what_is_left_and_the_reaper():
    reaper = Reaper()
    assert reaper.proc is not None
    agent = subprocess.Popen(SLEEPER, start_new_session=True)
    try:
        assert agent.pid in descendants(os.getpid())
        reaper.watch([agent.pid, reaper.proc.pid, 2 ** 31 - 1])  # itself, and no such pid: skipped
        proc = reaper.proc
        reaper.close()
        assert agent.wait(timeout=15) == -signal.SIGTERM
        assert proc.returncode == 0
    finally:
        agent.kill()
