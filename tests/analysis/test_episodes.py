"""analysis/episodes.py: a run's episodes read back from its monitor files (ours and SB3's), its
ranks merged by wall time; a --log-dir found to hold one run or several."""
import json
import os
from pathlib import Path

import numpy as np
import pytest

from a2c_ppo_acktr.analysis import episodes
from a2c_ppo_acktr.errors import LogError


def write_monitor(path, rows, t_start=1000.0, env_id="CartPole-v1"):
    """Write a monitor file exactly as SB3's Monitor does: rows = [(r, l, t), ...]."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as f:
        f.write("#" + json.dumps({"t_start": t_start, "env_id": env_id}) + "\n")
        f.write("r,l,t\n")
        for r, l, t in rows:
            f.write(f"{r},{l},{t}\n")
    return path


def make_run(d, returns, length=10, env_id="CartPole-v1"):
    """One-env run whose i-th episode ends at step (i+1)*length with return returns[i]."""
    rows = [(r, length, float(i + 1)) for i, r in enumerate(returns)]
    write_monitor(Path(d) / "0.monitor.csv", rows, env_id=env_id)
    return str(d)


def test_load_run_merges_ranks_by_wall_time(tmp_path):
    # rank 0 starts at t_start=100, rank 1 at t_start=101.
    # absolute end times: r0: 100.5, 102.0, 104.0 ; r1: 101.2, 103.5
    write_monitor(tmp_path / "0.monitor.csv",
                  [(1.0, 5, 0.5), (2.0, 7, 2.0), (3.0, 4, 4.0)], t_start=100.0)
    write_monitor(tmp_path / "1.monitor.csv",
                  [(10.0, 3, 0.2), (20.0, 6, 2.5)], t_start=101.0)
    steps, returns, env_id = episodes.load_run(str(tmp_path))
    assert env_id == "CartPole-v1"
    np.testing.assert_array_equal(returns, [1.0, 10.0, 2.0, 20.0, 3.0])
    np.testing.assert_array_equal(steps, np.cumsum([5, 3, 7, 6, 4]))
    assert steps[-1] == 25


def test_load_run_matches_sb3_monitor(tmp_path):
    gym = pytest.importorskip("gymnasium")
    monitor_mod = pytest.importorskip("stable_baselines3.common.monitor")
    all_r, all_l = [], []
    for rank in range(2):
        env = monitor_mod.Monitor(gym.make("CartPole-v1"), str(tmp_path / str(rank)))
        env.reset(seed=rank)
        env.action_space.seed(rank)
        for _ in range(3):
            done = False
            while not done:
                _, _, term, trunc, _ = env.step(env.action_space.sample())
                done = term or trunc
            env.reset()
        all_r += env.get_episode_rewards()
        all_l += env.get_episode_lengths()
        env.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["0.monitor.csv", "1.monitor.csv"]
    steps, returns, env_id = episodes.load_run(str(tmp_path))
    assert env_id == "CartPole-v1"
    assert len(returns) == 6
    np.testing.assert_allclose(sorted(returns), sorted(all_r), rtol=1e-5)
    assert steps[-1] == sum(all_l)
    lengths = episodes.load_episodes(str(tmp_path))[2]
    assert sorted(lengths) == sorted(all_l) and list(np.cumsum(lengths)) == list(steps)
    assert np.all(np.diff(steps) > 0)


def test_a_log_dir_finds_the_one_run_main_put_under_it(tmp_path):
    """main.py writes a run to <log-dir>/<algo>/<env>_seed<seed>/; naming <log-dir> is enough,
    its eval/ files are not training episodes, and two runs under it must be named apart."""
    base = tmp_path / "logs"
    run = make_run(base / "ppo" / "CartPole-v1_seed1", [1.0, 2.0])
    write_monitor(base / "ppo" / "CartPole-v1_seed1" / "eval" / "0.monitor.csv", [(99.0, 1, 1.0)])
    assert episodes.monitor_files(str(base)) == [os.path.join(run, "0.monitor.csv")]
    np.testing.assert_array_equal(episodes.load_run(str(base))[1], [1.0, 2.0])
    make_run(base / "ppo" / "CartPole-v1_seed2", [3.0])
    with pytest.raises(LogError, match="several runs"):
        episodes.monitor_files(str(base))
