"""scripts/bench/ceiling.py, run as a user runs it: the parts of each case are timed on its real
envs and losses (without the SB3 runs, minutes each)."""
import math
import os
import subprocess
import sys

import pytest

SCRIPT = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "scripts",
                      "bench", "ceiling.py")


@pytest.mark.slow
def test_ceiling_parts_are_timed():
    proc = subprocess.run([sys.executable, SCRIPT, "--cases", "a", "b", "--rounds", "1",
                           "--no-sb3", "--seconds", "0.05"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    rows = {line.split()[0]: line.split() for line in proc.stdout.splitlines()[1:]}
    assert set(rows) == {"a", "b"}
    for _, env_us, act_us, update_us, ceiling, sb3, versus, _target in rows.values():
        assert all(math.isfinite(float(x)) and float(x) > 0
                   for x in (env_us, act_us, update_us, ceiling))
        assert (sb3, versus) == ("-", "-")
