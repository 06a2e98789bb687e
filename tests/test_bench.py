"""scripts/bench_ceiling.py: the timed parts run the case's real envs and losses."""
import math
import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "scripts"))
from bench_ceiling import CASES, time_parts  # noqa: E402


@pytest.mark.parametrize("case", ["a", "b"])
def test_ceiling_parts_are_timed(case, one_thread):
    env_us, act_us, update_us = time_parts(CASES[case], seconds=0.05)
    for part in (env_us, act_us, update_us):
        assert math.isfinite(part) and part > 0
