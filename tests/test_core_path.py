"""The core a reader opens from ``train()`` to ``optimizer.step()`` stays within issue #71's
budget (at most 8 files, 1,800 lines), and reads plain: no speed mechanism inside it (those are
applied from speed/). The files are listed here, not read from docs/design.md: a document's
figures are never pinned."""
from pathlib import Path

import pytest

pytestmark = pytest.mark.research  # the research tier: what a change to the core needs

ROOT = Path(__file__).resolve().parents[1]
MAX_FILES, MAX_LINES = 8, 1800
CORE_PATH = ["main.py", "a2c_ppo_acktr/rollout.py", "a2c_ppo_acktr/model.py",
             "a2c_ppo_acktr/distributions.py", "a2c_ppo_acktr/storage.py",
             "a2c_ppo_acktr/algo/agent.py", "a2c_ppo_acktr/algo/ppo.py"]


def test_the_core_path_is_at_most_8_files_and_1800_lines():
    lines = {name: len((ROOT / name).read_text().splitlines()) for name in CORE_PATH}
    assert len(lines) <= MAX_FILES and sum(lines.values()) <= MAX_LINES, lines


def test_the_core_path_holds_no_speed_mechanism():
    """What the speed seam applies is not written into the core (issue #71 item 3)."""
    for name in CORE_PATH:
        text = (ROOT / name).read_text()
        for mechanism in ("FlatParams", "layers import", "algo.optim", ".numpy()", "_foreach_"):
            assert mechanism not in text, (name, mechanism)
