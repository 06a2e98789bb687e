"""rundir: what --resume keeps of the logs a run wrote after its last checkpoint."""
import csv
import dataclasses
import json
import os

import pytest
from stable_baselines3.common.monitor import Monitor

from a2c_ppo_acktr.analysis.episodes import read_monitor_file
from a2c_ppo_acktr.errors import ConfigError
from a2c_ppo_acktr.run.checkpoint import run_paths
from a2c_ppo_acktr.run.rundir import check_run, drop_rows_after
from a2c_ppo_acktr.settings.arguments import get_config


def write_monitor(path, t_start, rows, tail=""):
    with open(path, "w") as f:
        f.write("#" + json.dumps({"t_start": t_start, "env_id": "CartPole-v1"}) + "\n")
        f.write("r,l,t\n")
        f.writelines(f"{r},{n},{t}\n" for r, n, t in rows)
        f.write(tail)


def write_progress(path, steps):
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["update", "timesteps", "mean_return"])
        w.writerows([i, s, 1.5] for i, s in enumerate(steps))


def test_rows_after_the_checkpoint_are_dropped(tmp_path):
    write_monitor(tmp_path / "0.monitor.csv", 1000.0,
                  [(10.0, 10, 2.5), (12.0, 12, 5.9), (9.0, 9, 6.1), (30.0, 30, 9.0)],
                  tail="11.0,11,12.")  # a row cut by the kill mid-write
    write_monitor(tmp_path / "1.monitor.csv", 1001.0, [(8.0, 8, 4.0), (20.0, 20, 5.5)])
    write_progress(tmp_path / "progress.csv", [16, 32, 48, 64])
    os.makedirs(tmp_path / "eval")
    write_progress(tmp_path / "eval" / "eval.csv", [32, 64])
    (tmp_path / "notes.csv").write_text("timesteps\n999\n")  # not a run file: untouched

    dropped = drop_rows_after(str(tmp_path), {"env_steps": 32, "saved_at": 1006.0})

    _, r0, _, t0 = read_monitor_file(str(tmp_path / "0.monitor.csv"))
    _, r1, _, t1 = read_monitor_file(str(tmp_path / "1.monitor.csv"))
    assert list(r0) == [10.0, 12.0] and list(r1) == [8.0]
    assert max(t0.max(), t1.max()) <= 1006.0
    with open(tmp_path / "progress.csv") as f:
        assert [int(row["timesteps"]) for row in csv.DictReader(f)] == [16, 32]
    with open(tmp_path / "eval" / "eval.csv") as f:
        assert [int(row["timesteps"]) for row in csv.DictReader(f)] == [32]
    assert (tmp_path / "notes.csv").read_text() == "timesteps\n999\n"
    assert dropped == 3 + 1 + 2 + 1
    assert drop_rows_after(str(tmp_path), {"env_steps": 32, "saved_at": 1006.0}) == 0


def test_trimmed_monitor_file_is_continued_by_monitor(tmp_path):
    """SB3's Monitor appends to the trimmed file as to any other: one header, rows in order."""
    import gymnasium as gym

    path = tmp_path / "0.monitor.csv"
    write_monitor(path, 1000.0, [(10.0, 10, 2.5), (30.0, 30, 9.0)], tail="1.0,")
    drop_rows_after(str(tmp_path), {"env_steps": 0, "saved_at": 1005.0})
    env = Monitor(gym.make("CartPole-v1"), str(tmp_path / "0"), override_existing=False)
    env.reset(seed=0)
    done = False
    while not done:
        _, _, term, trunc, _ = env.step(env.action_space.sample())
        done = term or trunc
    env.close()
    lines = path.read_text().splitlines()
    assert sum(line.startswith("#") for line in lines) == 1
    _, r, _, _ = read_monitor_file(str(path))
    assert len(r) == 2 and r[0] == 10.0


def test_checkpoint_without_a_save_time_keeps_the_episodes(tmp_path):
    """Checkpoints of earlier versions have no ``saved_at``: episodes stay, steps still apply."""
    write_monitor(tmp_path / "0.monitor.csv", 1000.0, [(10.0, 10, 2.5), (30.0, 30, 9.0)])
    write_progress(tmp_path / "progress.csv", [16, 32])
    assert drop_rows_after(str(tmp_path), {"env_steps": 16}) == 1
    assert len(read_monitor_file(str(tmp_path / "0.monitor.csv"))[1]) == 2


def test_a_run_with_logs_but_no_checkpoint_is_refused_naming_the_one_way_on(tmp_path):
    """Issue #52: the refusal offered --resume, which then found no checkpoint."""
    run = get_config(["--env-name", "CartPole-v1", "--log-dir", str(tmp_path), "--save-dir", ""]).run
    paths = run_paths(run)
    os.makedirs(paths.log_dir)
    write_monitor(os.path.join(paths.log_dir, "0.monitor.csv"), 1000.0, [(10.0, 10, 2.5)])
    with pytest.raises(ConfigError, match="saved no checkpoint to --resume: pass --overwrite to "
                                          "replace it") as e:
        check_run(run, paths)
    assert "pass --resume" not in str(e.value)
    check_run(dataclasses.replace(run, overwrite=True), paths)
    run = dataclasses.replace(run, resume=True, save_dir=str(tmp_path / "models"))
    with pytest.raises(ConfigError, match="holds the logs of a run that saved none: --overwrite "
                                          "instead of --resume starts it again"):
        check_run(run, run_paths(run))
