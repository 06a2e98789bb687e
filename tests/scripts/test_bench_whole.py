"""scripts/bench/whole.py, run as a user runs it, cut to one pair of short runs: a line for the
pair, the case's summary, and nothing left behind; bad input gets one line."""
import getpass
import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "scripts", "bench", "whole.py")


def whole(*args: str, tmp_path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True,
                          timeout=600, cwd=ROOT, env={**os.environ, "TMPDIR": str(tmp_path)})


@pytest.mark.slow
def test_a_pair_prints_its_times_and_the_case_its_summary(tmp_path):
    proc = whole("--cases", "b", "--pairs", "1", "--warmup", "0", "--total", "640",
                 tmp_path=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    pair, summary = proc.stdout.splitlines()
    ours, sb3, ratio = map(float, re.fullmatch(
        r"b  pair 1: ours ([\d.]+) s, SB3 ([\d.]+) s, SB3 / ours ([\d.]+)x", pair).groups())
    assert ours > 0 and sb3 > 0
    assert ratio == pytest.approx(sb3 / ours, abs=0.1)  # each printed rounded
    fields = re.fullmatch(
        r"b  A2C CartPole-v1, 640 steps: ours ([\d.]+) s, SB3 ([\d.]+) s; SB3 / ours wall "
        r"([\d.]+)x \(([\d.]+)-([\d.]+), 1 pairs\); ours / SB3 CPU time ([\d.]+); peak MiB ours "
        r"(\d+), SB3 (\d+)", summary)
    assert fields, summary
    median_ours, median_sb3, median, low, high, cpu, peak_ours, peak_sb3 = map(
        float, fields.groups())
    assert (median_ours, median_sb3) == (ours, sb3)  # one pair: its own times
    assert median == low == high == ratio
    assert cpu > 0 and peak_ours > 100 and peak_sb3 > 100  # torch alone takes more
    # The runs' directories are gone (SB3's optimizer leaves torch's compiler cache, torch's).
    assert [p.name for p in tmp_path.iterdir()] in ([], ["torchinductor_" + getpass.getuser()])


@pytest.mark.parametrize("args, error", [
    (["--pairs", "0"], "--pairs must be at least 1; got 0"),
    (["--warmup", "-1"], "--warmup must be at least 0; got -1"),
    (["--total", "0"], "--total must be at least 1; got 0"),
    (["--cases", "e"], "argument --cases: invalid choice: 'e'"),
])
def test_bad_input_gets_one_line(args, error, tmp_path):
    proc = whole(*args, tmp_path=tmp_path)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.splitlines()[-1].startswith(f"whole.py: error: {error}")
