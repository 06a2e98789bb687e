"""scripts/bench/update.py, run as a user runs it: one case's update timed alone, and the A/B
against another checkout (here the same one, so the ratio is about 1)."""
import os
import re
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(REPO, "scripts", "bench", "update.py")


def _run(*args):
    proc = subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True,
                          timeout=300, env={**os.environ, "PYTHONPATH": REPO})
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


@pytest.mark.slow
def test_a_ppo_update_is_timed_per_gradient_step():
    out = _run("--case", "a", "--updates", "2")
    us, per_step, steps = re.match(r"case a: (\d+) us per update, (\d+) us per gradient step "
                                   r"\((\d+) per update\)", out).groups()
    assert int(steps) == 16 and 0 < int(per_step) * 16 <= int(us) + 16


@pytest.mark.slow
def test_vs_another_tree_prints_each_pair_and_the_median():
    out = _run("--case", "b", "--updates", "20", "--vs", REPO, "--pairs", "2")
    assert len(re.findall(r"^pair \d: this code \d+ us, .* \d+ us, ratio \d+\.\d\d$", out,
                          re.M)) == 2
    ratio = float(re.search(r"median ratio this code / .* (\d+\.\d\d) \(", out).group(1))
    assert 0.2 < ratio < 5


@pytest.mark.slow
def test_a_recipe_update_is_timed_as_main_builds_it():
    """Hopper's tuned recipe: 10 epochs x 32 minibatches, each step timed with the speed seam."""
    out = _run("--recipe", "tuned", "--env", "Hopper-v5", "--updates", "1")
    us, per_step, steps = re.match(r"Hopper-v5 --recipe tuned: (\d+) us per update, (\d+) us per "
                                   r"gradient step \((\d+) per update\); first update \d+\.\d s",
                                   out).groups()
    assert int(steps) == 320 and 0 < int(per_step) * 320 <= int(us) + 320


@pytest.mark.slow
def test_recipe_without_env_is_one_line():
    proc = subprocess.run([sys.executable, SCRIPT, "--recipe", "tuned"], capture_output=True,
                          text=True, timeout=120, env={**os.environ, "PYTHONPATH": REPO})
    assert proc.returncode == 2 and proc.stderr.strip().splitlines()[-1] == (
        "update.py: error: --recipe and --env go together, without --vs; --compile needs them")
