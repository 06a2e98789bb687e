"""Ray rollout workers (a2c_ppo_acktr/sampling/ray_actors.py) driven through main.py, on one Ray session."""
import csv
import importlib
import json
import os
import pathlib
import re
import shutil
import signal
import sys
import tempfile
import types

import gymnasium as gym
import numpy as np
import pytest
import torch

os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")  # as workers.import_ray: loopback
ray = pytest.importorskip("ray")

import main  # noqa: E402
from a2c_ppo_acktr.evaluation import FINAL_EVAL_FILE, final_returns  # noqa: E402
from a2c_ppo_acktr.model import make_policy  # noqa: E402
from a2c_ppo_acktr.run import build  # noqa: E402
from a2c_ppo_acktr.run.checkpoint import load_checkpoint, run_paths  # noqa: E402
from a2c_ppo_acktr.sampling import ray_actors as workers  # noqa: E402
from a2c_ppo_acktr.sampling import ray_learner as worker_group  # noqa: E402
from a2c_ppo_acktr.settings.arguments import get_args, get_config  # noqa: E402
from tests.run.test_cli import TINY as CLI_TINY  # noqa: E402
from tests.run.test_cli import assert_saved, signal_run  # noqa: E402
from tests.test_main import monitor_returns  # noqa: E402


class CrashingCartPole(gym.Wrapper):
    """CartPole that raises on its 12th step, once per Ray session: only while the file that the
    environment variable ``CRASH_MARKER`` names (in pytest's temporary directory, set by
    ``ray_session``) is absent, creating it as it raises."""

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


class NoiseFrames(gym.Env):
    """84x84 frames of noise; episodes of 3 to 6 steps, so frame stacks restart often."""

    observation_space = gym.spaces.Box(0, 255, (84, 84, 1), np.uint8)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, render_mode=None):
        self.left = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.left = int(self.np_random.integers(3, 7))
        return self._frame(), {}

    def step(self, action):
        self.left -= 1
        return self._frame(), 1.0, self.left == 0, False, {}

    def _frame(self):
        return self.np_random.integers(0, 256, (84, 84, 1), dtype=np.uint8)


def register_test_envs():
    gym.register("CrashingCartPole-v0", entry_point=CrashingCartPole)
    gym.register("NoiseFrames-v0", entry_point=NoiseFrames)


@pytest.fixture(scope="module", autouse=True)
def ray_session(tmp_path_factory):
    register_test_envs()
    marker = str(tmp_path_factory.mktemp("crashing-cartpole") / "crashed")
    # The workers (other processes) register the test envs too.
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             runtime_env={"worker_process_setup_hook": "tests.sampling.test_workers.register_test_envs",
                          "env_vars": {"PYTHONPATH": workers.ROOT, "CRASH_MARKER": marker}})
    yield
    ray.shutdown()


TINY = ["--env-name", "CartPole-v1", "--num-processes", "2", "--num-steps", "8",
        "--vec-env", "dummy", "--log-interval", "1"]


def files(argv):
    """The run directory (a Path) and checkpoint path of main.main(argv)."""
    paths = run_paths(get_args(argv))
    return pathlib.Path(paths.log_dir), paths.checkpoint


def run(tmp_path, argv, name):
    argv = argv + ["--log-dir", str(tmp_path / name / "logs"),
                   "--save-dir", str(tmp_path / name / "models")]
    assert main.main(argv) == 0
    log_dir, ckpt = files(argv)
    return log_dir, load_checkpoint(ckpt)


@pytest.mark.slow
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


@pytest.mark.slow
def test_two_recurrent_ppo_workers_fill_one_storage(tmp_path):
    """2 workers x 2 envs: one 4-column rollout per update, 4 monitor files, statistics of all."""
    argv = TINY + ["--algo", "ppo", "--recurrent-policy", "--num-mini-batch", "2",
                   "--num-env-steps", "192", "--num-workers", "2", "--use-gae", "--eval-interval", "1"]
    log_dir, ckpt = run(tmp_path, argv, "two")
    assert ckpt["env_steps"] == 192
    assert sorted(os.listdir(log_dir)) >= ["0.monitor.csv", "1.monitor.csv", "2.monitor.csv",
                                           "3.monitor.csv"]
    # Every observation of all 4 envs: the 4 first ones and 192 steps' worth, plus the prior.
    assert ckpt["obs_rms"]["ob_rms"]["count"] == pytest.approx(1e-4 + 4 + 192)
    with open(log_dir / "progress.csv") as f:
        assert [int(r["timesteps"]) for r in csv.DictReader(f)] == [32 * (i + 1) for i in range(6)]
    # Evaluation in its own actor: each update from the first with 2 finished training episodes
    # on, in order, the last one waited for.
    with open(log_dir / "eval" / "eval.csv") as f:
        rows = list(csv.DictReader(f))
    updates = [int(r["update"]) for r in rows]
    assert updates == list(range(updates[0], 6)) and updates[0] <= 3, updates
    assert all(int(r["episodes"]) == 10 for r in rows)
    assert len(monitor_returns(str(log_dir / "eval"))) >= 10  # the last evaluation's


@pytest.mark.slow
def test_final_evaluation_plays_in_the_evaluator_actor(tmp_path, monkeypatch):
    """With workers, --final-eval-episodes plays where they run (the Evaluator actor), not in
    this process; its returns are those of the final policy and statistics played here."""
    def in_this_process(*args, **kwargs):
        raise AssertionError("the final evaluation played in the learner's process")
    monkeypatch.setattr(build, "final_evaluation", in_this_process)
    argv = TINY + ["--algo", "a2c", "--num-env-steps", "96", "--num-workers", "1",
                   "--final-eval-episodes", "3"]
    log_dir, ckpt = run(tmp_path, argv, "final")
    with open(log_dir / FINAL_EVAL_FILE) as f:
        result = json.load(f)
    assert result["timesteps"] == 96 and result["episodes"] == 3
    policy = make_policy((4,), gym.spaces.Discrete(2), {})
    policy.load_state_dict(ckpt["actor_critic"])
    assert result["returns"] == final_returns(policy, ckpt["obs_rms"], 3, "CartPole-v1", 1, "cpu")


@pytest.mark.slow
def test_local_run_resumes_on_workers(tmp_path):
    """Checkpoints are the same with and without workers: a local run goes on with --resume on
    2 workers, its step count, progress log and monitor files continued."""
    dirs = ["--log-dir", str(tmp_path / "logs"), "--save-dir", str(tmp_path / "models")]
    argv = TINY + ["--algo", "a2c"] + dirs
    assert main.main(argv + ["--num-env-steps", "64"]) == 0
    assert main.main(argv + ["--num-env-steps", "128", "--resume", "--num-workers", "2"]) == 0
    log_dir, ckpt = files(argv)
    assert load_checkpoint(ckpt)["env_steps"] == 128
    with open(log_dir / "progress.csv") as f:
        assert [int(r["timesteps"]) for r in csv.DictReader(f)] == [16, 32, 48, 64, 96, 128]
    with open(log_dir / "0.monitor.csv") as f:
        assert sum(line.startswith("#") for line in f) == 1  # appended to, not rewritten


@pytest.mark.slow
def test_async_workers_sample_one_update_behind(tmp_path):
    """--async-rollouts: the rollout of update j comes from the weights of update j - 1 (0 for the
    first); --check-rollouts: every rollout the learner stacked matched the worker's checksum."""
    argv = TINY + ["--algo", "a2c", "--num-env-steps", "160", "--num-workers", "2",
                   "--async-rollouts", "--check-rollouts"]
    log_dir, ckpt = run(tmp_path, argv, "async")
    assert ckpt["env_steps"] == 160
    with open(log_dir / "progress.csv") as f:
        assert [int(r["policy_lag"]) for r in csv.DictReader(f)] == [0, 1, 1, 1, 1]


@pytest.mark.slow
def test_killed_worker_is_restarted_and_the_run_completes(tmp_path, capsys, monkeypatch):
    """SIGKILL a worker process during the run: Ray restarts it, its share of the update is
    re-sampled, the run finishes, and stdout and workers.log say what happened."""
    collect = worker_group.WorkerGroup.collect
    calls = []

    def collect_and_kill(self, *args, **kwargs):
        calls.append(self.pids[1])
        if len(calls) == 3:
            # Just before it samples: a kill on a timer, to land while it samples, came after its
            # 8 steps on a loaded machine, and the failure showed only in the next update.
            os.kill(self.pids[1], signal.SIGKILL)
        return collect(self, *args, **kwargs)

    monkeypatch.setattr(worker_group.WorkerGroup, "collect", collect_and_kill)
    argv = TINY + ["--algo", "a2c", "--num-env-steps", "160", "--num-workers", "2"]
    log_dir, ckpt = run(tmp_path, argv, "fault")
    assert ckpt["env_steps"] == 160
    assert calls[3] != calls[2]  # a new process from then on
    out = capsys.readouterr().out
    assert "worker 1 failed" in out and "restarted by Ray" in out
    log = (log_dir / "workers.log").read_text()
    assert f"restarted by Ray as pid {calls[3]}" in log, log


@pytest.mark.slow
def test_interrupt_saves_and_closes_the_workers(tmp_path, capsys, monkeypatch):
    """SIGINT during update 2: the update finishes, the checkpoint is saved, the workers are
    closed, one line, exit status 130."""
    from a2c_ppo_acktr.algo import A2C_ACKTR

    update, close, updates, closed = A2C_ACKTR.update, worker_group.WorkerGroup.close, [], []

    def update_then_ctrl_c(self, rollouts):
        updates.append(1)
        if len(updates) == 3:
            os.kill(os.getpid(), signal.SIGINT)
        return update(self, rollouts)

    monkeypatch.setattr(A2C_ACKTR, "update", update_then_ctrl_c)
    monkeypatch.setattr(worker_group.WorkerGroup, "close", lambda self: closed.append(close(self)))
    argv = TINY + ["--algo", "a2c", "--num-env-steps", "3200", "--num-workers", "2",
                   "--log-dir", str(tmp_path / "logs"), "--save-dir", str(tmp_path / "models")]
    assert main.main(argv) == 130
    path = files(argv)[1]
    assert capsys.readouterr().err.endswith(
        ": SIGINT: stopping after this update; again to stop now\n"
        f"interrupted at 96 steps; saved {path}; --resume to continue\n")
    assert load_checkpoint(path)["env_steps"] == 96 and closed == [None]


@pytest.mark.slow
def test_sigterm_to_the_process_group_saves_and_stops_ray(tmp_path):
    """Ray's head processes run in main.py's process group; they leave a scheduler's SIGTERM to
    it, which saves, then shuts Ray down: no process of the group is left."""
    argv = CLI_TINY + ["--num-env-steps", "10000000", "--save-interval", "100000",
                       "--num-workers", "2"]
    status, err = signal_run(tmp_path, argv, signal.SIGTERM, group=True, updates=2)
    assert status == 143, err
    ours = [line for line in err.splitlines(keepends=True) if " -- " not in line]  # not Ray's log
    assert_saved("".join(ours), 32)


@pytest.mark.slow
def test_worker_whose_env_crashes_is_restarted(tmp_path, capsys):
    env_id = "CrashingCartPole-v0"
    argv = TINY + ["--algo", "a2c", "--num-env-steps", "96", "--num-workers", "1",
                   "--env-name", env_id]
    argv += ["--log-dir", str(tmp_path / "logs"), "--save-dir", str(tmp_path / "m")]
    assert main.main(argv) == 0
    log = (files(argv)[0] / "workers.log").read_text()
    # Steps 9-16 of each env hold its 12th: update 1 is re-sampled by a fresh process.
    assert log.count("RuntimeError: simulated env crash") == 1, log
    assert "update 1: worker 0 failed" in log and "restarted by Ray" in log, log


class FakeActor:
    """A restartable actor's processes (pids 100, 101, ..) as Ray 2.60 handles them on a loaded
    machine: ``ray.kill`` returns before the process is gone, which still runs the call sent next
    and then dies; the call after that fails with ActorUnavailableError."""

    def __init__(self, pid):
        self.current, self.killed, self.ran_since_kill = pid, False, False
        self.started = None  # the pid of the process that built envs last

    def call(self, method):
        if self.killed:
            if self.ran_since_kill:
                self.die()
                return ray.exceptions.ActorUnavailableError(
                    "The actor is temporarily unavailable: IOError: The actor was restarted.", None)
            self.ran_since_kill = True
        if method == "exit":
            self.die()
            return ray.exceptions.ActorDiedError()
        if method == "start":
            self.started = self.current
        return self.current

    def die(self):
        """The process ends; Ray restarts the actor in a new one."""
        self.current, self.killed, self.ran_since_kill = self.current + 1, False, False

    def __getattr__(self, method):  # actor.<method>.remote(...) -> its result (or error)
        return types.SimpleNamespace(remote=lambda *args: self.call(method))


class FakeRay:
    exceptions = ray.exceptions

    @staticmethod
    def get(result, timeout=None):
        if isinstance(result, Exception):
            raise result
        return result

    @staticmethod
    def kill(actor, no_restart=True):
        actor.killed = True


@pytest.mark.parametrize("how", ["raised", "process died"])
def test_restart_starts_envs_in_the_process_that_lives_on(tmp_path, how):
    """``_restart`` builds the envs in the process that lives on, and reports that one, also where
    a kill would land late: for a worker that raised (an env crashed) and for one whose process
    died (SIGKILL) and that Ray has already restarted."""
    actor = FakeActor(pid=100)
    if how == "raised":
        error = ray.exceptions.RayTaskError("sample", "Traceback", RuntimeError("simulated env "
                                            "crash")).as_instanceof_cause()
    else:  # the process died in sample; Ray has already restarted the actor
        actor.die()
        error = ray.exceptions.ActorUnavailableError("The actor is temporarily unavailable", None)
    group = worker_group.WorkerGroup.__new__(worker_group.WorkerGroup)
    group.ray, group.workers, group.pids, group.seed_base = FakeRay, [actor], [100], 0
    group.log_dir, group.version, group.failures = str(tmp_path), 1, worker_group.Failures()
    group.events = open(tmp_path / "workers.log", "w")
    group._restart(0, error, attempt=1)
    group.events.close()
    assert actor.started == group.pids[0] == actor.current != 100


def test_frame_stacks_travel_as_new_frames_and_are_rebuilt_exactly():
    """A worker (here in this process) sends the first stack and one new frame per step; the
    learner's rebuild equals the worker's observations, checksums included; corruption shows."""
    cfg = get_config(["--env-name", "NoiseFrames-v0", "--num-processes", "3", "--num-steps", "16",
                      "--num-workers", "1", "--check-rollouts", "--vec-env", "dummy"])
    worker = workers.RolloutWorker(0, cfg.workers)
    worker.start(seed=0, torch_seed=0, log_dir=None, monitor_append=False)
    snapshot = {"weights": worker.policy.state_dict(), "obs_rms": None, "version": 0}
    for _ in range(2):
        first = worker.rollouts.obs[0].clone()
        rollout = worker.sample(snapshot)
        seen = torch.cat([first[None], worker.rollouts.obs[1:]])  # (17, 3, 4, 84, 84)
        assert "obs" not in rollout and rollout["frames"].shape == (16, 3, 1, 84, 84)
        assert (rollout["masks"][1:] == 0).sum() >= 6  # stacks restarted within the rollout
        assert torch.equal(workers.unpack_frames(rollout), seen)
        rollout["obs"] = workers.unpack_frames(rollout)
        assert workers.checksums(rollout) == rollout["checksums"]
    rollout["frames"][5, 1, 0, 10, 10] ^= 1
    rollout["obs"] = workers.unpack_frames(rollout)
    assert workers.checksums(rollout)["obs"] != rollout["checksums"]["obs"]
    worker.envs.close()


@pytest.mark.slow
def test_command_line_run_starts_a_loopback_ray(tmp_path):
    """main.py as a user runs it: its own local Ray, on 127.0.0.1 only, shut down at the end."""
    import subprocess

    argv = TINY + ["--algo", "a2c", "--num-env-steps", "32", "--num-workers", "1",
                   "--log-dir", str(tmp_path / "logs"), "--save-dir", str(tmp_path / "models")]
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    subprocess.run([sys.executable, "main.py"] + argv, cwd=workers.ROOT, env=env, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=300)
    assert "this node's Ray address 127.0.0.1" in (files(argv)[0] / "workers.log").read_text()


def test_num_workers_without_ray_is_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray -> ImportError
    with pytest.raises(SystemExit) as exc:
        main.main(TINY + ["--num-workers", "2", "--log-dir", str(tmp_path / "l"),
                          "--save-dir", str(tmp_path / "s")])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "pip install -r requirements-ray.txt" in err, err


@pytest.mark.slow
def test_env_kwargs_reach_the_workers(tmp_path):
    """--env-kwargs build the workers' envs (CartPole's Sutton-Barto reward: 0 a step, -1 at the
    fall) and are saved with the checkpoint."""
    argv = TINY + ["--algo", "a2c", "--num-env-steps", "320", "--num-workers", "2",
                   "--env-kwargs", "sutton_barto_reward=True"]
    log_dir, ckpt = run(tmp_path, argv, "kwargs")
    assert ckpt["env_kwargs"] == {"sutton_barto_reward": True}
    returns = monitor_returns(str(log_dir))
    assert returns and all(r == -1.0 for r in returns)


@pytest.mark.slow
def test_real_time_workers_report_benchmarks(tmp_path):
    """The drone on a worker: its timing statistics come back with each rollout and reach
    progress.csv (time-outs are counted there too; how many depends on the machine's load)."""
    argv = ["--env-name", "RealTimeDrone-v0", "--algo", "ppo", "--num-processes", "2",
            "--num-steps", "8", "--num-mini-batch", "1", "--num-env-steps", "48",
            "--vec-env", "dummy", "--num-workers", "1", "--log-interval", "1",
            "--log-dir", str(tmp_path / "logs"), "--save-dir", str(tmp_path / "models")]
    assert main.main(argv) == 0
    with open(files(argv)[0] / "progress.csv") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 3
    assert all(int(r["timeouts"]) >= 0 for r in rows)
    # The drone's default time step is 50 ms; the statistics are the worker's envs', not NaN.
    # The 50 ms period measured on the real clock; a loaded machine stretches late steps, so
    # the bound above only rules out a figure that is not a period at all.
    assert all(0.045 < float(r["time_step_duration_mean"]) < 0.25 for r in rows), rows
    assert all(float(r["inference_time_mean"]) >= 0 for r in rows), rows


def test_bad_env_kwargs_with_workers_is_one_line(tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        main.main(TINY + ["--algo", "a2c", "--num-workers", "1", "--env-kwargs", "bogus=1",
                          "--log-dir", str(tmp_path / "l"), "--save-dir", str(tmp_path / "s")])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "bogus" in err, err


@pytest.mark.slow
def test_gail_on_workers(tmp_path):
    """GAIL needs nothing of the envs but the learner's normalizer: it runs on workers as locally."""
    from a2c_ppo_acktr.algo.gail import expert_path
    from tests.algo.test_gail import GAIL_SHORT, cartpole_expert
    experts = tmp_path / "experts"
    cartpole_expert(expert_path(str(experts), "CartPole-v1"))
    log_dir, ckpt = run(tmp_path, GAIL_SHORT + ["--algo", "ppo", "--num-workers", "2",
                                                "--gail-experts-dir", str(experts)], "gail")
    with open(log_dir / "progress.csv") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 2  # 128 steps of 2 workers x 2 envs x 16 steps
    assert all(float(r["gail_loss"]) > 0 for r in rows)
    assert ckpt["gail"]["returns"].shape == (4, 1)  # one discounted return per env of both workers


def test_local_modules_are_the_users_own_env_modules(tmp_path, monkeypatch):
    """A ``module:EnvId``'s module goes to the cluster unless it is in this repository or
    installed: a file, or a package's directory."""
    (tmp_path / "usermod.py").write_text("")
    (tmp_path / "userpkg").mkdir()
    (tmp_path / "userpkg" / "__init__.py").write_text("")
    (tmp_path / "userpkg" / "envs.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))
    names = ("usermod", "userpkg", "userpkg.envs")
    try:
        for name in names:
            importlib.import_module(name)
        assert workers.local_modules("usermod:Env-v0") == [str(tmp_path / "usermod.py")]
        assert workers.local_modules("userpkg.envs:Env-v0") == [str(tmp_path / "userpkg")]
        assert workers.local_modules("tests.toy_envs:TextObs-v0") == []  # the repository's
        assert workers.local_modules("gymnasium.envs.classic_control:CartPole-v1") == []  # installed
        assert workers.local_modules("CartPole-v1") == []
    finally:
        for name in names:
            sys.modules.pop(name, None)


@pytest.mark.slow
def test_a_cluster_imports_the_users_env_module(tmp_path):
    """--ray-address: a one-node cluster (``ray start --head``) whose workers import the env
    module of the user's working directory, uploaded beside the repository."""
    import socket
    import subprocess

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    home, cwd = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    cwd.mkdir()
    (cwd / "clustermod.py").write_text(
        "import gymnasium as gym\n"
        "gym.register('ClusterCart-v0', entry_point="
        "'gymnasium.envs.classic_control.cartpole:CartPoleEnv', max_episode_steps=50)\n")
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("RAY_")},
           "HOME": str(home), "RAY_AUTH_MODE": "token", "PYTHONPATH": workers.ROOT}
    ray_cli = [sys.executable, "-m", "ray.scripts.scripts"]
    subprocess.run(ray_cli + ["get-auth-token", "--generate"], env=env, check=True,
                   capture_output=True, timeout=120)
    # --block: the head lives as long as this process group, which the test ends itself (a
    # "ray stop" would end every Ray on the machine). Its own --temp-dir (short: socket paths
    # are limited): the default one's ray_current_cluster would outlive it and send later
    # ray.init() calls to the dead head.
    temp_dir = tempfile.mkdtemp(prefix="ray", dir="/tmp")
    head = subprocess.Popen(ray_cli + ["start", "--head", "--block", f"--port={port}",
                                       "--num-cpus=1", "--include-dashboard=false",
                                       "--disable-usage-stats", f"--temp-dir={temp_dir}"],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    try:
        assert head.stdout is not None
        lines = []
        for line in head.stdout:  # its "ray start --address='IP:PORT'" hint: the head is up
            lines.append(line)
            if (address := re.search(r"--address='([^']+)'", line)):
                break
        assert address, "".join(lines)[-2000:]
        argv = ["--env-name", "clustermod:ClusterCart-v0", "--algo", "a2c", "--num-processes",
                "2", "--num-steps", "8", "--num-env-steps", "32", "--num-workers", "1",
                "--ray-address", address.group(1), "--log-dir", str(tmp_path / "logs"),
                "--save-dir", str(tmp_path / "models")]
        done = subprocess.run([sys.executable, os.path.join(workers.ROOT, "main.py")] + argv,
                              cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-2000:]
        assert "done: 32 steps" in done.stdout
    finally:
        os.killpg(head.pid, signal.SIGTERM)
        head.wait(timeout=120)
        shutil.rmtree(temp_dir, ignore_errors=True)
