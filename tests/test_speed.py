"""speed.keep_freed_memory: malloc keeps what an update frees (page faults counted by the kernel)."""
import os
import subprocess
import sys

import pytest

from a2c_ppo_acktr import speed

# A fresh process frees 40 MB of 1 MB arrays and allocates them again, 4 times; prints the page
# faults of the last 3 rounds. glibc's default hands the freed heap back, each round faults it
# in again (~10k pages); with the thresholds fixed the pages stay.
ROUNDS = """
import resource, sys
import numpy as np
from a2c_ppo_acktr.speed import keep_freed_memory
print(keep_freed_memory() if sys.argv[1] == "keep" else False)
for r in range(4):
    if r == 1:
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    arrays = [np.ones(1 << 20, np.uint8) for _ in range(40)]
    del arrays
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def _faults(mode: str, env: dict) -> tuple[str, int]:
    out = subprocess.run([sys.executable, "-c", ROUNDS, mode], env=env, capture_output=True,
                         text=True, check=True).stdout.split()
    return out[0], int(out[1])


def _env(**extra: str) -> dict:
    return {k: v for k, v in os.environ.items() if k not in speed.MALLOC_ENV} | extra


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc")
def test_keep_freed_memory_ends_refaulting_the_heap():
    applied, kept = _faults("keep", _env())
    assert applied == "True"
    _, default = _faults("default", _env())
    assert default > 5_000  # 3 rounds of 40 MB handed back and faulted in again
    assert kept < default / 10


@pytest.mark.slow
def test_users_malloc_settings_win():
    env = _env(MALLOC_TRIM_THRESHOLD_="131072")
    applied, _ = _faults("keep", env)
    assert applied == "False"


def test_main_keeps_freed_memory_before_building(tmp_path, monkeypatch):
    import main
    from a2c_ppo_acktr.run import start
    calls = []
    monkeypatch.setattr(start, "keep_freed_memory", lambda: calls.append(os.listdir(tmp_path)))
    argv = ["--env-name", "CartPole-v1", "--num-processes", "2", "--num-steps", "8",
            "--num-env-steps", "16", "--vec-env", "dummy", "--log-dir", str(tmp_path / "logs"),
            "--save-dir", str(tmp_path / "models")]
    assert main.main(argv) == 0
    assert calls == [[]]  # once, before the run's directories
