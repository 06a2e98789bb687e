"""The scalar CSV log (append on resume) and the live progress line (TTY only)."""
import csv
import io

import pytest

from a2c_ppo_acktr.run.logger import ProgressLine, ScalarLogger


def test_scalar_log_appends_on_resume(tmp_path):
    log = ScalarLogger(str(tmp_path), tensorboard=False)
    log.log({"timesteps": 1, "fps": 10.0}, 1)
    log.close()
    log = ScalarLogger(str(tmp_path), tensorboard=False, append=True)
    log.log({"timesteps": 2}, 2)
    with pytest.raises(KeyError):
        log.log({"timesteps": 3, "new_column": 1.0}, 3)
    log.close()
    with open(tmp_path / "progress.csv") as f:
        rows = list(csv.DictReader(f))
    assert [r["timesteps"] for r in rows] == ["1", "2"] and rows[1]["fps"] == ""


class FakeTTY(io.StringIO):
    def isatty(self):
        return True


def test_progress_line_only_on_a_terminal():
    tty = FakeTTY()
    line = ProgressLine(1000, stream=tty)
    line.update(250, 50.0, 12.5)
    assert "250/1,000 steps" in tty.getvalue() and "ETA 00:00:15" in tty.getvalue()
    assert tty.getvalue().startswith("\r") and "\n" not in tty.getvalue()
    line.clear()
    plain = io.StringIO()
    ProgressLine(1000, stream=plain).update(250, 50.0, 12.5)
    assert plain.getvalue() == ""
