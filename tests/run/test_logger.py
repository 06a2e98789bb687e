"""The scalar CSV log (append on resume) and the live progress line (TTY only)."""
import csv
import io
import os

import pytest

from a2c_ppo_acktr.errors import LogError
from a2c_ppo_acktr.run.logger import (
    ProgressLine,
    ScalarLogger,
    format_report,
    progress_row,
    scalars,
)


def test_scalar_log_appends_on_resume(tmp_path):
    log = ScalarLogger(str(tmp_path), tensorboard=False)
    log.log({"timesteps": 1, "fps": 10.0}, 1)
    log.close()
    log = ScalarLogger(str(tmp_path), tensorboard=False, append=True)
    log.log({"timesteps": 2}, 2)
    log.close()
    with open(tmp_path / "progress.csv") as f:
        rows = list(csv.DictReader(f))
    assert [r["timesteps"] for r in rows] == ["1", "2"] and rows[1]["fps"] == ""


def test_a_new_column_widens_the_log(tmp_path):
    """A run resumed by a version that logs one more column: the column is added, nothing lost."""
    log = ScalarLogger(str(tmp_path), tensorboard=False)
    log.log({"timesteps": 1, "fps": 10.0}, 1)
    log.close()
    log = ScalarLogger(str(tmp_path), tensorboard=False, append=True)
    log.log({"timesteps": 2, "fps": 11.0, "kl_clip_scale": 0.5}, 2)
    log.log({"timesteps": 3, "fps": 12.0, "kl_clip_scale": 0.25}, 3)
    log.close()
    with open(tmp_path / "progress.csv") as f:
        rows = list(csv.DictReader(f))
    assert list(rows[0]) == ["timesteps", "fps", "kl_clip_scale"]
    assert [(r["timesteps"], r["fps"], r["kl_clip_scale"]) for r in rows] == [
        ("1", "10.0", ""), ("2", "11.0", "0.5"), ("3", "12.0", "0.25")]
    assert not (tmp_path / "progress.csv.tmp").exists()


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


def test_report_shows_each_algorithms_own_statistics():
    """PPO's approx KL and clip fraction, ACKTR's K-FAC trust-region factor; A2C neither."""
    losses = {"value_loss": 0.5, "action_loss": -0.1, "entropy": 1.2}

    def report(stats):
        row = progress_row(3, 640, 100, [1.0, 3.0], {**losses, **stats}, 0.25, 9.0)
        return row, format_report(row, 2)
    row, text = report({"kl_clip_scale": 0.25})
    assert row["kl_clip_scale"] == 0.25 and "kl-clip scale 0.250" in text and "approx kl" not in text
    row, text = report({"approx_kl": 0.01, "clip_fraction": 0.1})
    assert "kl_clip_scale" not in row and "approx kl 0.0100" in text and "kl-clip" not in text
    _, text = report({})
    assert "approx kl" not in text and "kl-clip" not in text
    assert " entropy 1.2000, value loss 0.5000, action loss -0.1000" in text


def test_every_statistic_is_a_column_in_the_order_given():
    """A statistic the logger has never heard of reaches progress.csv and TensorBoard."""
    row = progress_row(3, 640, 100, [], {**{"value_loss": 0.5}, "my_bonus": 2.0}, 0.25, 9.0,
                       timeouts=0)
    assert list(row) == ["update", "timesteps", "fps", "mean_return", "median_return",
                         "min_return", "max_return", "value_loss", "my_bonus", "lr", "time",
                         "timeouts"]
    assert scalars(row)["my_bonus"] == 2.0


def test_a_full_disk_is_said_once_and_close_does_not_raise_it_again(tmp_path):
    """Issue #85: the row that a full disk kept from progress.csv was flushed again by close, whose
    traceback followed the run's one line."""
    os.symlink("/dev/full", tmp_path / "progress.csv")  # every write: No space left on device
    log = ScalarLogger(str(tmp_path), tensorboard=False)
    with pytest.raises(LogError, match="progress.csv: No space left on device"):
        log.log({"timesteps": 1}, 1)
    log.close()
