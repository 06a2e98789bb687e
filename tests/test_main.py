"""End to end: main.py trains, is deterministic on CPU, saves loadable checkpoints, and learns."""
import csv
import glob
import os
import pathlib
import threading
import time

import numpy as np
import pytest
import torch

import main
from a2c_ppo_acktr import speed
from a2c_ppo_acktr.analysis.episodes import load_run, read_monitor_file
from a2c_ppo_acktr.analysis.history import evaluate_checkpoint
from a2c_ppo_acktr.envs import VecPyTorch, make_vec_envs
from a2c_ppo_acktr.model import Policy
from a2c_ppo_acktr.run import start
from a2c_ppo_acktr.run.checkpoint import load_checkpoint, run_paths
from a2c_ppo_acktr.settings.arguments import get_args

# The README's CartPole command (the learning test uses it as written there).
CARTPOLE_PPO = ["--algo", "ppo", "--env-name", "CartPole-v1", "--num-processes", "8",
                "--num-steps", "32", "--num-mini-batch", "1", "--ppo-epoch", "20", "--use-gae",
                "--gae-lambda", "0.8", "--entropy-coef", "0", "--lr", "1e-3",
                "--use-linear-lr-decay", "--use-proper-time-limits", "--num-env-steps", "100000"]


def run(tmp_path, extra, name="run"):
    """main.main(extra) with its own log and save dirs -> its ``RunPaths``."""
    argv = extra + ["--log-dir", str(tmp_path / name / "logs"),
                    "--save-dir", str(tmp_path / name / "models")]
    assert main.main(argv) == 0
    return run_paths(get_args(argv))


def monitor_returns(log_dir):
    """Episode returns of all of a run's monitor files, in order of finishing time."""
    return list(load_run(log_dir)[1])


SHORT = ["--env-name", "CartPole-v1", "--num-processes", "2", "--num-steps", "8",
         "--num-env-steps", "160", "--log-interval", "5", "--vec-env", "dummy"]


@pytest.mark.slow
@pytest.mark.parametrize("algo", ["a2c", "ppo"])
def test_same_seed_same_run(tmp_path, algo):
    extra = SHORT + ["--algo", algo, "--num-mini-batch", "2", "--use-gae", "--use-proper-time-limits"]
    a = load_checkpoint(run(tmp_path, extra, "a").checkpoint)
    b = load_checkpoint(run(tmp_path, extra, "b").checkpoint)
    for key in a["actor_critic"]:
        assert torch.equal(a["actor_critic"][key], b["actor_critic"][key]), key


@pytest.mark.slow
def test_the_speed_seam_learns_as_the_plain_core(tmp_path, monkeypatch):
    """A run with every mechanism of the speed seam (speed.speed_up) ends with the plain core's
    weights, bit for bit."""
    extra = SHORT + ["--algo", "ppo", "--num-mini-batch", "2", "--use-gae", "--use-proper-time-limits",
                     "--env-name", "Pendulum-v1"]  # Box actions, time-limit truncations
    monkeypatch.setattr(speed, "ENABLED", set(speed.MECHANISMS))
    a = load_checkpoint(run(tmp_path, extra, "a").checkpoint)
    monkeypatch.setattr(speed, "ENABLED", set())
    b = load_checkpoint(run(tmp_path, extra, "b").checkpoint)
    for key in a["actor_critic"]:
        assert torch.equal(a["actor_critic"][key], b["actor_critic"][key]), key
    states = [ckpt["agent"]["optimizer"]["state"] for ckpt in (a, b)]  # what --resume steps on
    assert states[0].keys() == states[1].keys()
    for i in states[0]:
        for key, value in states[0][i].items():
            assert torch.equal(value, states[1][i][key]), (i, key)


@pytest.mark.slow
def test_scalar_log_and_checkpoint_contents(tmp_path):
    paths = run(tmp_path, SHORT + ["--algo", "ppo", "--num-mini-batch", "2"])
    with open(os.path.join(paths.log_dir, "progress.csv")) as f:
        rows = list(csv.DictReader(f))
    assert rows and {"timesteps", "fps", "mean_return", "value_loss", "approx_kl",
                     "clip_fraction", "entropy"} <= set(rows[0])
    assert int(rows[-1]["timesteps"]) == 160
    ckpt = load_checkpoint(paths.checkpoint)
    assert ckpt["env_steps"] == 160 and ckpt["obs_rms"] is not None


def test_saved_policy_acts_identically_after_load(tmp_path):
    ckpt = load_checkpoint(run(tmp_path, SHORT + ["--algo", "a2c", "--recurrent-policy"]).checkpoint)
    envs = make_vec_envs("CartPole-v1", 0, 1, None, None, "cpu", True, vec_env="dummy")
    original = Policy(envs.observation_space.shape, envs.action_space, base_kwargs={"recurrent": True})
    original.load_state_dict(ckpt["actor_critic"])
    path = str(tmp_path / "copy.pt")
    torch.save(original.state_dict(), path)
    copy = Policy(envs.observation_space.shape, envs.action_space, base_kwargs={"recurrent": True})
    copy.load_state_dict(torch.load(path, weights_only=True))
    obs = torch.randn(5, *envs.observation_space.shape)
    hxs = torch.randn(5, original.recurrent_hidden_state_size)
    masks = torch.ones(5, 1)
    for deterministic in (True, False):
        torch.manual_seed(3)
        out_a = original.act(obs, hxs, masks, deterministic)
        torch.manual_seed(3)
        out_b = copy.act(obs, hxs, masks, deterministic)
        for x, y in zip(out_a, out_b):
            assert torch.equal(x, y)
    envs.close()


def test_bad_arguments_exit_with_one_line(tmp_path, capsys):
    for bad, needle in [(["--algo", "dqn"], "--algo 'dqn'"),
                        (["--num-processes", "0"], "--num-processes"),
                        (["--algo", "ppo", "--num-processes", "3", "--num-steps", "5",
                          "--num-mini-batch", "16"],
                         "(3 * 5 = 15) must be at least --num-mini-batch"),
                        (["--algo", "ppo", "--recurrent-policy", "--num-processes", "3",
                          "--num-mini-batch", "4"], "envs (3) must be at least --num-mini-batch"),
                        (["--vec-env", "thread"], "--vec-env 'thread'"),
                        (["--action-mean-gain", "0"],
                         "--action-mean-gain must be positive and finite, got 0"),
                        # issue #52: a traceback, or a run that failed at its first update
                        (["--entropy-coef", "nan"], "--entropy-coef must be 0 or positive, and "
                         "finite, got nan"),
                        (["--lr", "inf"], "--lr must be positive and finite, got inf"),
                        (["--seed", "4294967296"], "--seed must be an integer from 0 to 2**32"),
                        (["--num-env-steps", "1e30"], "--num-env-steps must be a positive "
                         "integer below 2**63, got 1e+30"),
                        (["--num-env-steps", "inf"], "expected a whole number, got 'inf'"),
                        (["--use-linear-lr-decay", "--num-steps", "0"],
                         "--num-steps must be a positive integer"),
                        (["--log-dir", ""], "--log-dir is empty: give a path"),
                        (["--action-mean-gain", "0.01", "--init", "default"],
                         "--action-mean-gain 0.01 sets a gain of the orthogonal init")]:
        with pytest.raises(SystemExit) as exc:
            main.main(["--log-dir", str(tmp_path / "l"), "--save-dir", str(tmp_path / "s")] + bad)
        assert exc.value.code == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and needle in err, err
    assert not (tmp_path / "l").exists() and not (tmp_path / "s").exists()


@pytest.mark.slow
@pytest.mark.parametrize("extra", [[], ["--value-norm", "--recompute-advantages"]],
                         ids=["original", "DI-engine's value and advantages"])
def test_ppo_solves_cartpole(tmp_path, extra):
    """The README's command: mean of the last 20 episodes >= 475 within 100k env steps; also with
    the values in units of the returns' std, recomputed each epoch."""
    paths = run(tmp_path, CARTPOLE_PPO + ["--seed", "1", "--log-interval", "50"] + extra)
    returns = monitor_returns(paths.log_dir)
    assert np.mean(returns[-20:]) >= 475, returns[-20:]


A2C_TINY = ["--algo", "a2c", "--env-name", "CartPole-v1", "--num-processes", "2", "--num-steps",
            "8", "--vec-env", "dummy", "--save-interval", "1", "--log-interval", "1"]


def dirs(tmp_path):
    return ["--log-dir", str(tmp_path / "logs"), "--save-dir", str(tmp_path / "models")]


def a2c_paths(tmp_path, env="CartPole-v1"):
    """Where an A2C_TINY run with ``dirs(tmp_path)`` keeps its files."""
    return run_paths(get_args([a if a != "CartPole-v1" else env for a in A2C_TINY]
                              + dirs(tmp_path)))


def expect_exit_2(capsys, argv, needle, entry=None):
    """``entry(argv)`` (main.main by default) exits with status 2 and one line naming ``needle``."""
    with pytest.raises(SystemExit) as exc:
        (entry or main.main)(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and needle in err, err
    return err


@pytest.mark.slow
def test_resume_after_interrupt(tmp_path):
    """Kill a run mid-way, resume it: steps, logs and monitor files continue where they stopped."""
    import subprocess
    import sys
    import time

    argv = A2C_TINY + ["--num-env-steps", "200000"] + dirs(tmp_path)
    proc = subprocess.Popen([sys.executable, os.path.join(main.__file__)] + argv,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    paths = a2c_paths(tmp_path)
    progress = pathlib.Path(paths.log_dir, "progress.csv")
    deadline = time.time() + 60
    while time.time() < deadline and (not progress.exists() or len(progress.read_text().splitlines()) < 30):
        time.sleep(0.1)
    proc.kill()
    proc.wait()
    ckpt_path = paths.checkpoint
    stopped_at = load_checkpoint(ckpt_path)["env_steps"]
    rows_before = len(progress.read_text().splitlines()) - 1
    episodes_before = len(monitor_returns(paths.log_dir))
    assert 0 < stopped_at < 200000 and rows_before >= 29

    total = stopped_at + 320
    resumed_argv = A2C_TINY + ["--num-env-steps", str(total), "--resume"] + dirs(tmp_path)
    assert main.main(resumed_argv) == 0

    assert load_checkpoint(ckpt_path)["env_steps"] == total
    with open(progress) as f:
        steps = [int(r["timesteps"]) for r in csv.DictReader(f)]
    assert len(steps) == rows_before + 20
    assert steps == sorted(steps) and len(set(steps)) == len(steps) and steps[-1] == total
    assert steps[rows_before] == stopped_at + 16  # the first update after the checkpoint
    with open(os.path.join(paths.log_dir, "0.monitor.csv")) as f:
        lines = f.read().splitlines()
    assert sum(line.startswith("#") for line in lines) == 1  # appended, not rewritten
    assert len(monitor_returns(paths.log_dir)) > episodes_before


@pytest.mark.slow
def test_resume_after_a_kill_past_the_checkpoint_logs_each_step_once(tmp_path, capsys):
    """A run killed after its last save has logged updates and episodes its checkpoint does not
    hold; --resume drops them, so the resumed logs count every step once."""
    import shutil

    from a2c_ppo_acktr.run.checkpoint import history_path

    argv = A2C_TINY + ["--num-env-steps", "640", "--save-history", "10"] + dirs(tmp_path)
    assert main.main(argv) == 0  # 40 updates of 16 steps
    paths = a2c_paths(tmp_path)
    # As if killed after update 20's save: that checkpoint is the latest, the logs go on to 640.
    shutil.copy(history_path(paths.checkpoint, 320), paths.checkpoint)
    saved_at = load_checkpoint(paths.checkpoint)["saved_at"]
    monitors = sorted(glob.glob(os.path.join(paths.log_dir, "*.monitor.csv")))
    before = [read_monitor_file(p) for p in monitors]
    late = sum(int((t > saved_at).sum()) for _, _, _, t in before)
    assert late > 0 and [int(r["timesteps"]) for r in progress_rows(paths.log_dir)][-1] == 640
    capsys.readouterr()

    resumed_at = time.time()
    assert main.main(A2C_TINY + ["--num-env-steps", "800", "--resume"] + dirs(tmp_path)) == 0

    assert f"dropped {late + 20} log rows" in capsys.readouterr().out
    assert [int(r["timesteps"]) for r in progress_rows(paths.log_dir)] == list(range(16, 801, 16))
    for path, (_, r_old, _, t_old) in zip(monitors, before):
        _, r, _, t = read_monitor_file(path)
        kept = t_old <= saved_at
        assert list(r[:kept.sum()]) == list(r_old[kept])  # the episodes before the save, as were
        assert not ((t > saved_at) & (t < resumed_at)).any()  # none of the lost stretch


def test_existing_run_is_not_overwritten(tmp_path, capsys):
    argv = A2C_TINY + ["--num-env-steps", "32"] + dirs(tmp_path)
    assert main.main(argv) == 0
    ckpt_path = pathlib.Path(a2c_paths(tmp_path).checkpoint)
    before = ckpt_path.read_bytes()
    expect_exit_2(capsys, argv, "--resume")
    assert ckpt_path.read_bytes() == before
    assert main.main(argv + ["--overwrite"]) == 0


def test_resume_refuses_bad_checkpoints(tmp_path, capsys):
    argv = A2C_TINY + ["--num-env-steps", "32"] + dirs(tmp_path)
    expect_exit_2(capsys, argv + ["--resume"], "no checkpoint")
    assert main.main(argv) == 0
    cartpole, acrobot = a2c_paths(tmp_path).checkpoint, a2c_paths(tmp_path, "Acrobot-v1").checkpoint
    # A CartPole checkpoint where an Acrobot one is expected.
    with open(acrobot, "wb") as f, open(cartpole, "rb") as g:
        f.write(g.read())
    acrobot_argv = [a if a != "CartPole-v1" else "Acrobot-v1" for a in argv]
    expect_exit_2(capsys, acrobot_argv + ["--resume"],
                  "--env-name 'Acrobot-v1' differs from the run's saved 'CartPole-v1'")
    # Same env name, other action space.
    ckpt = load_checkpoint(cartpole)
    ckpt["action_space"] = "Discrete(3)"
    torch.save(ckpt, cartpole)
    expect_exit_2(capsys, argv + ["--resume", "--num-env-steps", "64"], "action_space")
    with open(cartpole, "wb") as f:
        f.write(b"not a checkpoint")
    expect_exit_2(capsys, argv + ["--resume"], "cannot read checkpoint")


def test_unknown_env_id_suggests_close_matches(tmp_path, capsys):
    argv = ["--env-name", "CartPole-v9", "--num-processes", "2", "--num-steps", "8"] + dirs(tmp_path)
    expect_exit_2(capsys, argv, "CartPole-v1")


@pytest.mark.parametrize("mode", [[], ["--async-rollouts"]])
def test_nan_loss_stops_and_keeps_last_good_checkpoint(tmp_path, capsys, monkeypatch, mode):
    from a2c_ppo_acktr.algo import A2C_ACKTR

    update = A2C_ACKTR.update
    calls = []

    def failing_update(self, rollouts):
        calls.append(1)
        nan = {"value_loss": float("nan"), "action_loss": 0.0, "entropy": 0.0}
        return nan if len(calls) == 3 else update(self, rollouts)

    monkeypatch.setattr(A2C_ACKTR, "update", failing_update)
    assert main.main(A2C_TINY + ["--num-env-steps", "160"] + mode + dirs(tmp_path)) == 1
    assert "non-finite loss" in capsys.readouterr().err
    ckpt = load_checkpoint(a2c_paths(tmp_path).checkpoint)
    assert ckpt["env_steps"] == 32  # saved after the 2 good updates, not after the bad one
    assert all(torch.isfinite(v).all() for v in ckpt["actor_critic"].values())
    assert not sampler_threads()


@pytest.mark.slow
@pytest.mark.parametrize("flags", [["--hidden-size", "1e7"],
                                   ["--num-steps", "1e13", "--num-env-steps", "1e14"]],
                         ids=["network", "storage"])
def test_sizes_beyond_memory_are_one_line(tmp_path, capsys, flags):
    """Issue #52: sizes in range that no machine holds (above 2**47 bytes, so that even an
    overcommitting kernel refuses them) were torch's allocator's traceback."""
    expect_exit_2(capsys, A2C_TINY + flags + dirs(tmp_path), "does not fit in this machine's memory")
    assert os.listdir(tmp_path) == []


def test_resuming_a_finished_run_says_nothing_is_left_and_builds_nothing(tmp_path, capsys,
                                                                         monkeypatch):
    argv = A2C_TINY + ["--num-env-steps", "32"] + dirs(tmp_path)
    assert main.main(argv) == 0
    capsys.readouterr()

    def no_build(*args, **kwargs):
        raise AssertionError("the run was built")

    monkeypatch.setattr(start, "build", no_build)
    assert main.main(argv + ["--resume"]) == 0
    assert capsys.readouterr().out == (
        f"nothing to train: {a2c_paths(tmp_path).checkpoint} already holds 32 steps, "
        "--num-env-steps 32; a larger --num-env-steps continues the run\n")


def test_failure_before_the_first_save_leaves_a_run_that_starts_again(tmp_path, capsys,
                                                                      monkeypatch):
    """Issue #52: a non-finite loss at update 0 (--entropy-coef nan did it) left config.json and
    monitor files but no checkpoint: neither a new run nor --resume could start."""
    from a2c_ppo_acktr.algo import A2C_ACKTR

    monkeypatch.setattr(A2C_ACKTR, "update", lambda self, rollouts: {"value_loss": float("nan")})
    argv = A2C_TINY + ["--num-env-steps", "32"] + dirs(tmp_path)
    assert main.main(argv) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.endswith(
        "stopped, nothing saved yet, so the run's files are removed: it can start again"), err
    assert os.listdir(tmp_path) == []
    monkeypatch.undo()
    assert main.main(argv) == 0


def sampler_threads():
    return [t for t in threading.enumerate() if t.name == "sampler" and t.is_alive()]


def progress_rows(log_dir):
    with open(os.path.join(log_dir, "progress.csv")) as f:
        return list(csv.DictReader(f))


def monitor_lengths(log_dir):
    return [int(n) for path in sorted(glob.glob(os.path.join(log_dir, "*.monitor.csv")))
            for n in read_monitor_file(path)[2]]


ASYNC_PPO = ["--algo", "ppo", "--env-name", "CartPole-v1", "--num-processes", "2", "--num-steps",
             "16", "--num-mini-batch", "2", "--num-env-steps", "320", "--log-interval", "1",
             "--vec-env", "dummy", "--use-gae", "--use-proper-time-limits", "--async-rollouts"]


@pytest.mark.slow
@pytest.mark.parametrize("extra", [[], ["--recurrent-policy"]])
def test_async_rollouts_train_log_and_stop(tmp_path, extra):
    paths = run(tmp_path, ASYNC_PPO + extra)
    rows = progress_rows(paths.log_dir)
    assert [int(r["timesteps"]) for r in rows] == list(range(32, 321, 32))
    # rollout 0 by the initial weights, every later one by the weights from one update before
    assert [int(r["policy_lag"]) for r in rows] == [0] + [1] * 9
    assert all(r["mean_return"] != "nan" for r in rows[1:])  # episode stats reach the log
    ckpt = load_checkpoint(paths.checkpoint)
    assert ckpt["env_steps"] == 320 and ckpt["obs_rms"]["ob_rms"]["count"] > 320
    assert all(torch.isfinite(v).all() for v in ckpt["actor_critic"].values())
    assert sum(monitor_lengths(paths.log_dir)) <= 320  # no rollout beyond the last update
    assert not sampler_threads()


@pytest.mark.slow
def test_async_real_time_drone_never_pauses_nor_times_out(tmp_path, monkeypatch):
    """The update lasts longer than the time-out tolerance; the sampler keeps stepping."""
    from a2c_ppo_acktr.algo import PPO
    from a2c_ppo_acktr.realtime import BENCHMARK_KEYS, RealTimeEnv

    update, wait = PPO.update, RealTimeEnv.wait
    waits = []

    def slow_update(self, rollouts):
        time.sleep(0.3)  # > 0.02 s * (1 + timeout factor 5): idle envs would time out
        return update(self, rollouts)

    def counted_wait(self):
        waits.append(threading.current_thread().name)
        wait(self)

    monkeypatch.setattr(PPO, "update", slow_update)
    monkeypatch.setattr(RealTimeEnv, "wait", counted_wait)
    log_dir = run(tmp_path, [
        "--algo", "ppo", "--env-name", "RealTimeDrone-v0", "--num-processes", "2",
        "--num-steps", "32", "--num-mini-batch", "2", "--num-env-steps", "192",
        "--log-interval", "1", "--vec-env", "dummy", "--async-rollouts", "--env-kwargs",
        "time_step_duration=0.02", "start_obs_capture=0.02", "time_step_timeout_factor=5"]).log_dir
    rows = progress_rows(log_dir)
    assert [int(r["timeouts"]) for r in rows] == [0, 0, 0]
    # the envs held still only before the first step (set-up), never during the run
    assert [int(r["sampler_stalls"]) for r in rows] == [0, 0, 0]
    assert waits == ["MainThread", "MainThread"]
    assert [int(r["policy_lag"]) for r in rows] == [0, 1, 1]
    assert set(BENCHMARK_KEYS) <= set(rows[0])
    assert float(rows[-1]["time_step_duration_mean"]) == pytest.approx(0.02, abs=0.004)


@pytest.mark.slow
def test_env_kwargs_reach_env_checkpoint_evaluation_and_enjoy(tmp_path, capsys):
    import enjoy
    from a2c_ppo_acktr.realtime import BENCHMARK_KEYS

    kwargs = ["time_step_duration=0.01", "start_obs_capture=0.01", "ep_max_length=5",
              "time_step_timeout_factor=10"]
    paths = run(tmp_path, [
        "--algo", "a2c", "--env-name", "RealTimeDrone-v0", "--num-processes", "2",
        "--num-steps", "10", "--num-env-steps", "40", "--log-interval", "1",
        "--eval-interval", "1", "--vec-env", "dummy", "--env-kwargs", *kwargs])
    assert set(monitor_lengths(paths.log_dir)) == {5}   # training envs
    assert set(monitor_lengths(paths.eval_dir)) == {5}  # evaluation envs
    rows = progress_rows(paths.log_dir)
    assert set(BENCHMARK_KEYS) <= set(rows[0]) and [r["timeouts"] for r in rows] == ["0", "0"]
    assert float(rows[-1]["time_step_duration_mean"]) == pytest.approx(0.01, abs=0.003)
    assert "real-time time-outs 0, time step " in capsys.readouterr().out  # the log block
    path = paths.checkpoint
    assert load_checkpoint(path)["env_kwargs"] == {
        "time_step_duration": 0.01, "start_obs_capture": 0.01, "ep_max_length": 5,
        "time_step_timeout_factor": 10}
    assert enjoy.main(["--load-dir", path, "--episodes", "2", "--no-render"]) == 0
    assert capsys.readouterr().out.count("length 5") == 2  # enjoy.py rebuilt the same env


@pytest.mark.slow
def test_bad_env_kwargs_exit_2_naming_the_key(tmp_path, capsys):
    argv = A2C_TINY + ["--num-env-steps", "32"] + dirs(tmp_path)
    expect_exit_2(capsys, argv + ["--env-kwargs", "max_episode_steps=20", "foo=1"], "'foo'")
    drone = [a if a != "CartPole-v1" else "RealTimeDrone-v0" for a in argv]
    expect_exit_2(capsys, drone + ["--env-kwargs", "ep_max_lenght=5"], "'ep_max_lenght'")
    expect_exit_2(capsys, argv + ["--env-kwargs", "ep_max_length"], "KEY=VALUE")
    expect_exit_2(capsys, argv + ["--env-kwargs", "a=1", "a=2"], "'a' twice")
    expect_exit_2(capsys, argv + ["--scale-actions"], "this env's are Discrete(2)")
    assert not os.path.exists(tmp_path / "models")
    # a good one: gym.make's own max_episode_steps cuts CartPole's episodes
    assert main.main(argv + ["--env-kwargs", "max_episode_steps=3"]) == 0
    assert set(monitor_lengths(a2c_paths(tmp_path).log_dir)) <= {1, 2, 3}


def test_env_kwargs_values_are_parsed():
    from a2c_ppo_acktr.settings.checks import parse_env_kwargs

    assert parse_env_kwargs(["a=0.02", "b=200", "c=true", "d=False", "e=None", "f=text",
                             "g=1e-3", "h=[1, 2]"]) == {
        "a": 0.02, "b": 200, "c": True, "d": False, "e": None, "f": "text", "g": 0.001,
        "h": [1, 2]}


def run_script(argv, setup, report):
    """``python main.py argv`` in a fresh interpreter that runs ``setup`` first and prints
    ``report`` (an expression) at exit; -> the printed line, split."""
    import subprocess
    import sys

    probe = (f"import atexit, gc, runpy, sys\n{setup}\n"
             f"atexit.register(lambda: print('probe', {report}))\n"
             f"sys.argv = {['main.py'] + argv!r}\n"
             f"runpy.run_path({main.__file__!r}, run_name='__main__')\n")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout.splitlines()[-1].split()[1:]


@pytest.mark.slow
def test_the_script_keeps_its_imports_out_of_the_collectors_sight(tmp_path):
    """``python main.py`` collects no garbage while importing and freezes what the imports left
    (torch's and gymnasium's objects, hundreds of thousands), then trains with the collector on."""
    argv = ["--algo", "a2c"] + SHORT + dirs(tmp_path)
    # Counts the full collections that walked the imports' objects: those before the freeze.
    setup = ("walked = []\n"
             "gc.callbacks.append(lambda phase, info: walked.append(1) if phase == 'start'"
             " and info['generation'] == 2 and not gc.get_freeze_count() else None)")
    enabled, frozen, walked = run_script(argv, setup, "gc.isenabled(), gc.get_freeze_count(), "
                                                      "len(walked)")
    assert enabled == "True" and int(frozen) > 100_000 and walked == "0"
    assert load_checkpoint(run_paths(get_args(argv)).checkpoint)["env_steps"] == 160


@pytest.mark.slow
def test_scale_actions_reaches_every_env_the_run_and_its_checkpoint_build(tmp_path, monkeypatch):
    """--scale-actions: training's envs, the evaluations' and the checkpoint's deterministic
    games (scripts/benchmark.py's) all map the policy's actions onto the Box."""
    built = []
    init = VecPyTorch.__init__

    def recording_init(self, venv, device, scale_actions=False):
        built.append(scale_actions)
        init(self, venv, device, scale_actions)

    monkeypatch.setattr(VecPyTorch, "__init__", recording_init)
    # an evaluation at update 13, once the first games (200 steps) have ended
    paths = run(tmp_path, [a if a != "CartPole-v1" else "Pendulum-v1" for a in A2C_TINY]
                + ["--num-env-steps", "448", "--eval-interval", "13", "--scale-actions"])
    assert load_checkpoint(paths.checkpoint)["scale_actions"] is True
    assert len(evaluate_checkpoint(paths.checkpoint, num_episodes=1)) == 1
    assert len(built) >= 3 and all(built), built  # training, an evaluation, the checkpoint's
