"""Ray rollout workers (a2c_ppo_acktr/workers.py) driven through main.py, on one Ray session."""
import csv
import os
import signal
import sys
import tempfile
import threading

import gymnasium as gym
import pytest
import torch

os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")  # as workers.import_ray: loopback
ray = pytest.importorskip("ray")

import main  # noqa: E402
from a2c_ppo_acktr import workers  # noqa: E402
from a2c_ppo_acktr.utils import load_checkpoint  # noqa: E402
from tests.test_main import monitor_returns  # noqa: E402


CRASH_MARKER = os.path.join(tempfile.mkdtemp(prefix="crashing-cartpole-"), "crashed")


class CrashingCartPole(gym.Wrapper):
    """CartPole that raises on its 12th step, once per test session (``CRASH_MARKER``)."""

    def __init__(self, render_mode=None):
        super().__init__(gym.make("CartPole-v1", render_mode=render_mode))
        self.steps = 0

    def step(self, action):
        self.steps += 1
        marker = os.environ["CRASH_MARKER"]
        if self.steps == 12 and not os.path.exists(marker):
            open(marker, "w").close()
            raise RuntimeError("simulated env crash")
        return self.env.step(action)


def register_test_envs():
    gym.register("CrashingCartPole-v0", entry_point=CrashingCartPole)


@pytest.fixture(scope="module", autouse=True)
def ray_session():
    register_test_envs()
    # The workers (other processes) register the test envs too.
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             runtime_env={"worker_process_setup_hook": "tests.test_workers.register_test_envs",
                          "env_vars": {"PYTHONPATH": workers.ROOT, "CRASH_MARKER": CRASH_MARKER}})
    yield
    ray.shutdown()


TINY = ["--env-name", "CartPole-v1", "--num-processes", "2", "--num-steps", "8",
        "--vec-env", "dummy", "--log-interval", "1"]


def run(tmp_path, argv, name):
    log_dir, save_dir = tmp_path / name / "logs", tmp_path / name / "models"
    assert main.main(argv + ["--log-dir", str(log_dir), "--save-dir", str(save_dir)]) == 0
    algo = argv[argv.index("--algo") + 1]
    return log_dir, load_checkpoint(str(save_dir / algo / "CartPole-v1.pt"))


def test_one_worker_trains_exactly_as_the_local_loop(tmp_path):
    """Worker 0 seeds its sampling RNG as main.py does; A2C's update draws no random numbers. So
    one worker must give the local run's weights (up to float rounding of the merged statistics)."""
    argv = TINY + ["--algo", "a2c", "--num-env-steps", "96", "--use-proper-time-limits"]
    local_logs, local = run(tmp_path, argv, "local")
    ray_logs, remote = run(tmp_path, argv + ["--num-workers", "1"], "ray")
    for key, value in local["actor_critic"].items():
        torch.testing.assert_close(remote["actor_critic"][key], value, rtol=1e-5, atol=1e-6)
    for name in ("mean", "var"):
        torch.testing.assert_close(remote["obs_rms"]["ob_rms"][name], local["obs_rms"]["ob_rms"][name])
    assert remote["obs_rms"]["ob_rms"]["count"] == pytest.approx(local["obs_rms"]["ob_rms"]["count"])
    assert monitor_returns(str(ray_logs)) == monitor_returns(str(local_logs))


def test_two_recurrent_ppo_workers_fill_one_storage(tmp_path):
    """2 workers x 2 envs: one 4-column rollout per update, 4 monitor files, statistics of all."""
    argv = TINY + ["--algo", "ppo", "--recurrent-policy", "--num-mini-batch", "2",
                   "--num-env-steps", "192", "--num-workers", "2", "--use-gae"]
    log_dir, ckpt = run(tmp_path, argv, "two")
    assert ckpt["env_steps"] == 192
    assert sorted(os.listdir(log_dir)) >= ["0.monitor.csv", "1.monitor.csv", "2.monitor.csv",
                                           "3.monitor.csv"]
    # Every observation of all 4 envs: the 4 first ones and 192 steps' worth, plus the prior.
    assert ckpt["obs_rms"]["ob_rms"]["count"] == pytest.approx(1e-4 + 4 + 192)
    with open(log_dir / "progress.csv") as f:
        assert [int(r["timesteps"]) for r in csv.DictReader(f)] == [32 * (i + 1) for i in range(6)]


def test_killed_worker_is_restarted_and_the_run_completes(tmp_path, capsys, monkeypatch):
    """SIGKILL a worker process during the run: Ray restarts it, its share of the update is
    re-sampled, the run finishes, and stdout and workers.log say what happened."""
    collect = workers.WorkerGroup.collect
    calls = []

    def collect_and_kill(self, *args, **kwargs):
        calls.append(self.pids[1])
        if len(calls) == 3:  # kill it while it samples, or just before
            threading.Timer(0.01, os.kill, (self.pids[1], signal.SIGKILL)).start()
        return collect(self, *args, **kwargs)

    monkeypatch.setattr(workers.WorkerGroup, "collect", collect_and_kill)
    argv = TINY + ["--algo", "a2c", "--num-env-steps", "160", "--num-workers", "2"]
    log_dir, ckpt = run(tmp_path, argv, "fault")
    assert ckpt["env_steps"] == 160
    assert calls[3] != calls[2]  # a new process from then on
    out = capsys.readouterr().out
    assert "worker 1 failed" in out and "restarted by Ray" in out
    log = (log_dir / "workers.log").read_text()
    assert f"restarted by Ray as pid {calls[3]}" in log, log


def test_worker_whose_env_crashes_is_restarted(tmp_path, capsys):
    env_id = "CrashingCartPole-v0"
    argv = TINY + ["--algo", "a2c", "--num-env-steps", "96", "--num-workers", "1",
                   "--env-name", env_id]
    log_dir = tmp_path / "logs"
    assert main.main(argv + ["--log-dir", str(log_dir), "--save-dir", str(tmp_path / "m")]) == 0
    log = (log_dir / "workers.log").read_text()
    # Steps 9-16 of each env hold its 12th: update 1 is re-sampled by a fresh process.
    assert log.count("RuntimeError: simulated env crash") == 1, log
    assert "update 1: worker 0 failed" in log and "restarted by Ray" in log, log


def test_num_workers_without_ray_is_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray -> ImportError
    with pytest.raises(SystemExit) as exc:
        main.main(TINY + ["--num-workers", "2", "--log-dir", str(tmp_path / "l"),
                          "--save-dir", str(tmp_path / "s")])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "pip install -r requirements-ray.txt" in err, err
