"""scripts/bench/startup.py, run as a user runs it, cut to one pair: each side's time to its first
env step, the floors, SB3 / ours and where ours' imports go; bad input gets one line."""
import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "scripts", "bench", "startup.py")


def startup(*args: str, tmp_path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True,
                          timeout=600, cwd=ROOT, env={**os.environ, "TMPDIR": str(tmp_path)})


@pytest.mark.slow
def test_one_pair_reaches_the_first_env_step_on_each_side(tmp_path):
    proc = startup("--cases", "b", "--pairs", "1", "--importtime", tmp_path=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout
    times = {side: float(t) for side, t in re.findall(r"^  (\w+) +([\d.]+)s \(", out, re.M)}
    assert set(times) == {"ours", "sb3", "python", "torch", "dynamo"}
    assert all(t > 0 for t in times.values())
    assert times["ours"] > times["python"] and times["sb3"] > times["python"]
    assert re.search(r"SB3 / ours: [\d.]+x", out)
    assert re.search(r"^ +[\d.]+ +torch$", out, re.M)  # the import time's largest share
    assert re.search(r"of ours \([\d.]+s\), modules a plain run never uses: [\d.]+s", out)


def test_bad_input_gets_one_line(tmp_path):
    proc = startup("--pairs", "0", tmp_path=tmp_path)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.splitlines()[-1] == "startup.py: error: --pairs must be at least 1; got 0"
