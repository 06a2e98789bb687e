"""--save-history: permanent checkpoints beside the latest, played by enjoy.py and evaluated into
a curve (a2c_ppo_acktr/analysis/history.py, scripts/plot.py --history)."""
import os
import subprocess
import sys

import pytest
import torch

import enjoy
import main
from a2c_ppo_acktr.analysis.history import evaluate_history, history_curve
from a2c_ppo_acktr.run.checkpoint import CheckpointError, history, load_checkpoint
from tests.scripts.test_plot import SCRIPT
from tests.test_main import SHORT, expect_exit_2, run

A2C = SHORT + ["--algo", "a2c"]  # 10 updates of 16 steps


def history_dir(paths):
    return paths.checkpoint[:-len(".pt")] + "_history"


def test_copies_every_n_updates_hold_the_policy_of_that_step(tmp_path):
    paths = run(tmp_path, A2C + ["--save-history", "3"], "long")
    kept = history(history_dir(paths))
    assert [steps for steps, _ in kept] == [48, 96, 144]  # after updates 3, 6 and 9 of 16 steps
    # The copy after 96 steps is the checkpoint a run of 96 steps ends with (same seed).
    short = run(tmp_path, [a if a != "160" else "96" for a in A2C], "short")
    copy, final = load_checkpoint(kept[1][1]), load_checkpoint(short.checkpoint)
    assert copy["env_steps"] == final["env_steps"] == 96
    for key, value in final["actor_critic"].items():
        assert torch.equal(copy["actor_critic"][key], value), key
    assert load_checkpoint(paths.checkpoint)["env_steps"] == 160  # the latest, as without


@pytest.mark.slow
def test_history_belongs_to_its_run(tmp_path, capsys):
    argv = A2C + ["--save-history", "5", "--log-dir", str(tmp_path / "logs"),
                  "--save-dir", str(tmp_path / "models")]
    assert main.main(argv) == 0
    paths_dir = str(tmp_path / "models" / "a2c" / "CartPole-v1_seed1_history")
    assert [s for s, _ in history(paths_dir)] == [80, 160]
    expect_exit_2(capsys, argv, "--overwrite")  # the same run again is refused ...
    os.remove(str(tmp_path / "models" / "a2c" / "CartPole-v1_seed1.pt"))
    expect_exit_2(capsys, argv, "--overwrite")  # ... also when only its history is left
    assert main.main([a if a != "5" else "4" for a in argv] + ["--overwrite"]) == 0
    assert [s for s, _ in history(paths_dir)] == [64, 128]  # the old run's copies are gone
    expect_exit_2(capsys, A2C + ["--save-history", "2", "--save-dir", ""], "--save-history")


@pytest.mark.slow
def test_enjoy_and_plot_play_the_history(tmp_path, capsys):
    paths = run(tmp_path, A2C + ["--save-history", "5"])
    directory = history_dir(paths)
    assert enjoy.main(["--load-dir", os.path.join(directory, "80.pt"), "--episodes", "2"]) == 0
    assert "80 steps" in capsys.readouterr().out
    points = evaluate_history(directory, num_episodes=3)
    assert [s for s, _ in points] == [80, 160] and all(len(r) == 3 for _, r in points)
    assert evaluate_history(directory, num_episodes=3) == points  # the same seeds every time
    out = str(tmp_path / "history.png")
    proc = plot("--history", f"a2c={directory}", "--episodes", "3", "--out", out)
    assert proc.returncode == 0 and os.path.getsize(out) > 0, proc.stderr
    assert "80 steps, deterministic return" in proc.stdout and "160 steps" in proc.stdout
    proc = plot("--history", f"a2c={directory}", "--episodes", "1", "--out-dir", str(tmp_path / "d"))
    written = str(tmp_path / "d" / "policy_history.png")
    assert proc.returncode == 0 and proc.stdout.splitlines()[-1] == written, proc.stderr
    assert os.path.getsize(written) > 0
    with pytest.raises(CheckpointError, match="no policy history"):
        evaluate_history(str(tmp_path / "nowhere"))
    proc = plot("--history", f"a2c={tmp_path}", "--out", out)  # no <steps>.pt there
    assert proc.returncode == 2 and proc.stderr.startswith("plot.py: error: ")
    assert len(proc.stderr.splitlines()) == 1


def plot(*argv):
    """``python scripts/plot.py ARGV``, as a user runs it."""
    return subprocess.run([sys.executable, str(SCRIPT), *argv], capture_output=True, text=True,
                          timeout=120)


@pytest.mark.parametrize("band, lo, hi", [("minmax", [1, 2], [3, 2]), ("std", [1, 2], [3, 2]),
                                          ("none", [2, 2], [2, 2])])
def test_history_curve_band_spans_the_episodes(band, lo, hi):
    steps, mean, low, high = history_curve([(10, [1.0, 3.0]), (20, [2.0, 2.0])], band)
    assert steps.tolist() == [10, 20] and mean.tolist() == [2, 2]
    assert low.tolist() == lo and high.tolist() == hi
