"""A user's env that fails (issue #72 item 1): its own traceback once, then one line naming the
env id, its index, the method and, where known, the fix; an observation outside the space is
refused on every backend that runs a user's env."""
import os
import re
import select
import signal
import subprocess
import sys
import time

import gymnasium as gym
import numpy as np
import pytest

import main
import tests.fault_envs  # noqa: F401  (registers the ids)
from a2c_ppo_acktr.envs import DummyVecEnv, NativeVecEnv, ShmemVecEnv, ThreadVecEnv, make_env
from a2c_ppo_acktr.envs import watch as watch_module
from a2c_ppo_acktr.envs.watch import EnvTimeout, watch
from a2c_ppo_acktr.errors import EnvError

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def fns(env_id, n=2):
    return [make_env(f"tests.fault_envs:{env_id}", 0, i, None, False) for i in range(n)]


def failure(backend, env_id, steps=6):
    """The EnvError that ``steps`` steps of two ``env_id`` envs on ``backend`` raise."""
    venv = backend(fns(env_id))
    try:
        venv.reset()
        with pytest.raises(EnvError) as err:
            for _ in range(steps):
                venv.step(np.zeros(2, np.int64))
    finally:
        venv.close()
    assert "\n" not in str(err.value)
    return err.value


CASES = [  # env id, what the line says, where the traceback ends (None: no traceback)
    ("RaiseInStep-v0", "env 0 (RaiseInStep-v0) failed in step: RuntimeError: simulated failure",
     "RuntimeError: simulated failure in step\n"),
    ("OldApi-v0", "failed in step: ValueError: not enough values to unpack (expected 5, got 4); "
     "it returned 4 values, the old gym API", "got 4)\n"),
    ("NoneReward-v0", "env 0 (NoneReward-v0) returned from step the reward None: a reward must "
     "be a number", None),
    ("WrongShape-v0", "env 0 (WrongShape-v0) returned from step an observation of shape (1,) "
     "float32, outside its observation space Box(-1.0, 1.0, (3,), float32): return shape (3,) "
     "float32 observations", None),
]


@pytest.mark.parametrize("env_id, line, end", CASES, ids=[c[0] for c in CASES])
def test_a_failing_env_is_one_line_with_its_own_traceback(env_id, line, end):
    error = failure(DummyVecEnv, env_id)
    assert line in str(error)
    if end is None:
        assert error.details == ""
    else:  # the env's frames only, from its step down
        assert error.details.startswith("Traceback") and error.details.endswith(end)
        assert error.details.count("Traceback") == 1 and "vec_env.py" not in error.details
        assert "fault_envs.py" in error.details or env_id != "RaiseInStep-v0"
        assert str(error).endswith("(its traceback above)")


def test_a_none_reward_under_the_monitor_says_what_it_is(tmp_path):
    venv = DummyVecEnv([make_env("tests.fault_envs:NoneReward-v0", 0, 0, str(tmp_path), False)])
    venv.reset()
    with pytest.raises(EnvError, match="TypeError: .*NoneType'; it returned None where a number "
                                       r"belongs \(a reward must be a number\)"):
        for _ in range(4):
            venv.step(np.zeros(1, np.int64))


def test_a_dtype_numpy_would_cast_and_a_failing_reset_are_refused():
    with pytest.raises(EnvError, match=r"returned from reset an observation of shape \(3,\) "
                                       r"float32, outside its observation space Box\(0, 255, "
                                       r"\(3,\), uint8\)"):  # floats for a uint8 space
        DummyVecEnv(fns("WrongDtype-v0")).reset()
    with pytest.raises(EnvError, match=r"env 0 \(RaiseInReset-v0\) failed in reset: ValueError"):
        DummyVecEnv(fns("RaiseInReset-v0")).reset()
    with pytest.raises(EnvError, match=r"env 1 \(tests.toy_envs:Broken-v0\) failed to build: "
                                       "RuntimeError: simulated constructor failure"):
        DummyVecEnv([lambda: gym.make("WrongShape-v0"),
                     make_env("tests.toy_envs:Broken-v0", 0, 1, None, False)])


@pytest.mark.parametrize("backend", [
    DummyVecEnv, pytest.param(lambda f: ShmemVecEnv(f, num_workers=2), marks=pytest.mark.slow)],
    ids=["dummy", "shmem"])
def test_an_env_writing_to_a_full_disk_is_one_line_without_its_traceback(backend):
    """Issue #85: a full disk is the machine's, not the env's code: no traceback, as built or
    stepped (the Monitor's files as the envs are built: test_limits.py)."""
    error = failure(backend, "FullDisk-v0")
    assert str(error) == "env 0 (FullDisk-v0) failed in step: [Errno 28] No space left on device"
    assert error.details == ""
    fn = make_env("tests.fault_envs:FullDisk-v0", 0, 0, None, False, env_kwargs={"at": 0})
    with pytest.raises(EnvError) as built:
        backend([fn]).close()
    assert str(built.value) == ("env 0 (tests.fault_envs:FullDisk-v0) failed to build: [Errno 28] "
                                "No space left on device") and built.value.details == ""


def test_the_native_backend_refuses_observations_outside_the_space():
    venv = NativeVecEnv("WrongShapeVector-v0", 2, 0)
    with pytest.raises(EnvError, match=r"WrongShapeVector-v0 \(--vec-env native\) returned from "
                                       r"reset observations of shape \(2, 1\) float32 for 2 envs"):
        venv.reset()
    venv.close()


@pytest.mark.slow
def test_shmem_workers_fail_as_the_envs_do_and_a_dead_one_is_one_line():
    for env_id, line, end in CASES:
        error = failure(lambda f: ShmemVecEnv(f, num_workers=2), env_id)
        assert line in str(error) and (end is None or error.details.endswith(end))
    error = failure(lambda f: ShmemVecEnv(f, num_workers=2), "Exits-v0")
    assert str(error) == "the ShmemVecEnv worker process of envs 0..0 died (exit status 3)"


def test_main_prints_the_envs_traceback_once_then_one_line_keeping_the_checkpoint(tmp_path, capsys):
    argv = ["--algo", "a2c", "--env-name", "tests.fault_envs:RaiseInStep-v0", "--env-kwargs",
            "at=20", "--num-processes", "2", "--num-steps", "4", "--num-env-steps", "64",
            "--vec-env", "dummy", "--log-dir", str(tmp_path / "logs"), "--save-dir",
            str(tmp_path / "models")]
    assert main.main(argv) == 1
    err = capsys.readouterr().err
    assert err.count("Traceback") == 1 and err.startswith("Traceback")
    last = err.splitlines()[-1]
    assert ": error: env 0 (RaiseInStep-v0) failed in step: RuntimeError" in last
    assert "keeping the last saved checkpoint" in last and "--resume continues it" in last


@pytest.mark.slow
def test_main_under_shmem_prints_one_traceback_and_one_line(tmp_path):
    argv = ["--algo", "a2c", "--env-name", "tests.fault_envs:OldApi-v0", "--env-kwargs", "at=20",
            "--num-processes", "2", "--num-steps", "4", "--num-env-steps", "64", "--vec-env",
            "shmem", "--log-dir", str(tmp_path / "logs"), "--save-dir", str(tmp_path / "models")]
    proc = subprocess.run([sys.executable, "main.py", *argv], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.count("Traceback") == 1 and proc.stderr.startswith("Traceback")
    assert "env 0 (OldApi-v0) failed in step" in proc.stderr.splitlines()[-1]


@pytest.fixture
def quick_watch(monkeypatch):
    """The watch warns after 0.3 s, looks every 0.1 s; SIGALRM's handler is put back after."""
    monkeypatch.setattr(watch_module, "WARN_AFTER_S", 0.3)
    monkeypatch.setattr(watch_module, "POLL_S", 0.1)
    previous = signal.getsignal(signal.SIGALRM)
    yield
    signal.signal(signal.SIGALRM, previous)


@pytest.mark.parametrize("backend", [DummyVecEnv, pytest.param(
    lambda f: ShmemVecEnv(f, num_workers=2), marks=pytest.mark.slow, id="shmem")],
    ids=["dummy", "shmem"])
def test_a_hung_step_is_said_then_stopped_by_the_timeout(quick_watch, capsys, backend):
    venv = backend(fns("Hangs-v0"))
    watch(venv, "tests.fault_envs:Hangs-v0", timeout=1.5)
    venv.reset()
    started = time.monotonic()
    with pytest.raises(EnvTimeout, match=r"^(env 0|envs 0, 1) of tests.fault_envs:Hangs-v0: step did "
                                         r"not return within --env-timeout 1.5 s$"):
        for _ in range(5):
            venv.step(np.zeros(2, np.int64))
    venv.close()  # a worker stuck in its env is killed
    assert time.monotonic() - started < 1.5 + 5
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and re.search(
        r": warning: (env 0|envs 0, 1) of tests.fault_envs:Hangs-v0: step has not returned for \d+ s; "
        r"Ctrl-C stops the run \(--env-timeout stops it at 1.5 s\)\n$", err), err


@pytest.mark.parametrize("in_threads", [True, False], ids=["in its thread", "in the caller's"])
def test_a_hung_env_of_threads_is_named_then_stopped_by_the_timeout(quick_watch, capsys,
                                                                     in_threads):
    fns = [make_env("tests.fault_envs:Hangs-v0", 0, rank, None, False,
                    env_kwargs={"at": 2, "only": 3}) for rank in range(4)]
    venv = ThreadVecEnv(fns, 2)
    venv.threaded = in_threads  # env 3 steps in the helper thread, or all in this one
    watch(venv, "tests.fault_envs:Hangs-v0", timeout=1.0)
    venv.reset()
    started = time.monotonic()
    with pytest.raises(EnvTimeout, match=r"^env 3 of tests.fault_envs:Hangs-v0: step did not "
                                         r"return within --env-timeout 1 s$"):
        for _ in range(3):
            venv.step(np.zeros(4, np.int64))
    venv.close()  # the hung env's block is left to its thread; the others are closed
    assert time.monotonic() - started < 1.0 + 4
    assert "env 3 of tests.fault_envs:Hangs-v0: step has not returned" in capsys.readouterr().err


@pytest.mark.slow
def test_a_hung_run_acknowledges_ctrl_c_and_a_second_one_ends_it_with_its_workers(tmp_path):
    argv = ["--algo", "a2c", "--env-name", "tests.fault_envs:Hangs-v0", "--env-kwargs", "at=20",
            "--num-processes", "2", "--num-steps", "4", "--num-env-steps", "6400", "--vec-env",
            "shmem", "--log-dir", str(tmp_path / "logs"), "--save-dir", str(tmp_path / "models")]
    proc = subprocess.Popen([sys.executable, "main.py", *argv], cwd=ROOT, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    progress = tmp_path / "logs" / "a2c" / "Hangs-v0_seed1" / "progress.csv"
    deadline = time.monotonic() + 120
    while not progress.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(1.0)  # past update 4: both envs hang in their 20th step
    proc.send_signal(signal.SIGINT)
    assert select.select([proc.stderr], [], [], 2.0)[0], "the first Ctrl-C was not acknowledged"
    assert proc.stderr.readline() == "main.py: SIGINT: stopping after this update; again to stop now\n"
    time.sleep(1.2)  # not the same request again (interrupt.REPEAT_S)
    proc.send_signal(signal.SIGINT)
    started = time.monotonic()
    assert proc.wait(timeout=10) == 130
    assert time.monotonic() - started < 10
    assert proc.stderr.read() == "main.py: SIGINT again: stopped without saving\n"
    deadline = time.monotonic() + 5  # workers, forkserver, resource tracker: none left running
    while running(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not running(proc.pid)


def running(pgid):
    """The processes of group ``pgid`` that are not zombies (Linux: /proc)."""
    alive = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            alive.append(int(pid))
    return alive


def test_env_timeout_stops_a_hung_run_in_one_line_keeping_its_checkpoint(tmp_path, capsys,
                                                                         quick_watch):
    argv = ["--algo", "a2c", "--env-name", "tests.fault_envs:Hangs-v0", "--env-kwargs", "at=20",
            "--num-processes", "2", "--num-steps", "4", "--num-env-steps", "6400", "--vec-env",
            "dummy", "--env-timeout", "1", "--log-dir", str(tmp_path / "logs"), "--save-dir",
            str(tmp_path / "models")]
    assert main.main(argv) == 1
    last = capsys.readouterr().err.splitlines()[-1]
    assert ": error: env 0 of tests.fault_envs:Hangs-v0: step did not return within " \
           "--env-timeout 1 s; stopped, keeping the last saved checkpoint" in last, last


def test_a_float_observation_outside_its_box_is_said_once(capsys, monkeypatch):
    """Issue #85 item 5: an observation outside its Box's bounds passed silently; it is said once
    per process, whichever vec env (training, evaluation) meets it, and the run goes on."""
    from a2c_ppo_acktr.envs import normalize
    monkeypatch.setattr(normalize, "_SAID", set())
    for _ in range(2):
        venv = normalize.VecNormalize(DummyVecEnv(fns("OutOfBounds-v0")))
        venv.reset()
        for _ in range(8):
            venv.step(np.zeros(2, np.int64))
        venv.close()
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1 and lines[0].endswith(
        "warning: env 0 returned an observation outside its observation space Box(-1.0, 1.0, "
        "(3,), float32) (5 at index 0; said once): widen the space's bounds or clip the "
        "observation in the env"), lines
