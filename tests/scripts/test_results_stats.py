"""scripts/results_stats.py: docs/results.md's IQM column and MuJoCo aggregate are what its
per-seed columns give (a row added without them fails here: run the script)."""
import re

import pytest

import results_stats


def test_docs_results_is_up_to_date():
    assert results_stats.main(["--check"]) == 0


@pytest.mark.parametrize("cell, mujoco, scores", [
    ("7917 / 5741 / 7769; 8649 / 6341 / 8608", True, [7917, 5741, 7769]),
    ("17.4 (19.1) / 15.1 (18.4)", False, [17.4, 15.1]),
    ("19.1 / 17.5 / 16.4; 13.9 / 19.4 / 16.4", False, [19.1, 17.5, 16.4, 13.9, 19.4, 16.4]),
    ("144.8; run again: 169.5", False, [144.8]),  # the same seed again: not another seed
    ("-20.5", False, [-20.5]),
])
def test_per_seed_cells(cell, mujoco, scores):
    assert results_stats.per_seed(cell, mujoco) == scores


@pytest.mark.parametrize("cell, n", [
    ("1, 2, 3", 3), ("**4-9**", 6), ("**4, 5, 6**", 3), ("1 (`ale`)", 1),
    ("1, 2, 3; 4, 5, 6 after the check (`auto` = `ale-pipelined`)", 6),
    ("1, 2, 3 (a 2-core Xeon, `ale`)", 3),
])
def test_seed_counts(cell, n):
    assert results_stats.seed_count(cell) == n


def test_a_new_row_gets_its_column(tmp_path):
    page = tmp_path / "results.md"
    with open(results_stats.RESULTS) as f:
        text = f.read()
    new_row = ("| Hopper-v5 | tuned | **10, 11** | 1,000,000 | 2,000 ± 100 (2,100) | | "
               "1900 / 2100; 2000 / 2200 | 9.0 min | | (9) |")
    at = text.index("| Humanoid-v5 | original |")
    page.write_text(text[:at] + new_row + "\n" + text[at:])
    assert results_stats.main(["--check", "--file", str(page)]) == 1
    assert results_stats.main(["--file", str(page)]) == 0
    assert "| 2,000 ± 100 (2,100) | 2000 [1900, 2100] | 1900 / 2100;" in page.read_text()
    assert results_stats.main(["--check", "--file", str(page)]) == 0


def test_an_algorithm_gets_its_aggregate_line_once_it_has_rows(tmp_path):
    page = tmp_path / "results.md"
    with open(results_stats.RESULTS) as f:
        text = f.read()
    rows = "".join(f"| {env} | acktr | 1, 2 | 1,000,000 | 0 ± 0 (0) | | {a} / {b}; 0 / 0 | 1 min | | (1) |\n"
                   for env, a, b in (("Hopper-v5", 1000, 3000), ("Walker2d-v5", 2000, 2000)))
    # as before ACKTR had rows: neither its rows nor its line
    text = re.sub(r"\| [A-Za-z0-9-]+ \| acktr \|[^\n]*\n|\| ACKTR \(acktr\), all seeds \|[^\n]*\n", "",
                  text)
    at = text.index("| Humanoid-v5 | original |")
    page.write_text(text[:at] + rows + text[at:])
    assert results_stats.main(["--file", str(page)]) == 0
    line = next(l for l in page.read_text().splitlines() if l.startswith("| ACKTR (acktr), all seeds"))
    assert line.split("|")[2:4] == [" Hopper, Walker2d ", " 4 "], line
    # a second row of an env (other seeds) joins its stratum
    more = "| Hopper-v5 | acktr | **4, 5** | 1,000,000 | 0 ± 0 (0) | | 1000 / 3000; 0 / 0 | 1 min | | (1) |\n"
    text = page.read_text()
    at = text.index("| Humanoid-v5 | original |")
    page.write_text(text[:at] + more + text[at:])
    assert results_stats.main(["--file", str(page)]) == 0
    line = next(l for l in page.read_text().splitlines() if l.startswith("| ACKTR (acktr), all seeds"))
    assert line.split("|")[2:4] == [" Hopper, Walker2d ", " 6 "], line
