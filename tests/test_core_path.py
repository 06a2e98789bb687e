"""The core a reader opens (docs/design.md, "The core path") stays within issue #71's budget, and
reads plain: no speed mechanism inside it (those are applied from speed/)."""
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAX_FILES, MAX_LINES = 8, 1800


def core_path() -> list[Path]:
    """The files docs/design.md's core-path table lists."""
    text = (ROOT / "docs" / "design.md").read_text()
    section = text.split("## The core path", 1)[1].split("\n## ", 1)[0]
    return [ROOT / name for name in re.findall(r"^\| `([\w/.]+\.py)` \|", section, re.M)]


def test_the_core_path_is_at_most_8_files_and_1800_lines():
    files = core_path()
    lines = {f.relative_to(ROOT).as_posix(): len(f.read_text().splitlines()) for f in files}
    assert "main.py" in lines and "a2c_ppo_acktr/algo/ppo.py" in lines
    assert len(files) <= MAX_FILES and sum(lines.values()) <= MAX_LINES, lines


def test_the_core_paths_table_gives_each_files_lines():
    section = (ROOT / "docs" / "design.md").read_text().split("## The core path", 1)[1]
    shown = dict(re.findall(r"^\| `([\w/.]+\.py)` \| (\d+) \|", section.split("\n## ", 1)[0], re.M))
    lines = {name: str(len((ROOT / name).read_text().splitlines())) for name in shown}
    assert shown == lines
    total = re.search(r"\*\*(\d+) files\*\* \| \*\*([\d,]+)\*\*", section).groups()
    assert total == (str(len(lines)), f"{sum(map(int, lines.values())):,}")


def test_the_core_path_holds_no_speed_mechanism():
    """What the speed seam applies is not written into the core (issue #71 item 3)."""
    for f in core_path():
        text = f.read_text()
        for mechanism in ("FlatParams", "layers import", "algo.optim", ".numpy()", "_foreach_"):
            assert mechanism not in text, (f.name, mechanism)
