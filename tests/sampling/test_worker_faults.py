"""Faults of Ray rollout workers (issue #85): an env that keeps failing, a hung env and
--env-timeout, a SIGKILLed learner, Ctrl-C twice, and what Ray itself says (nothing)."""
import os
import signal
import subprocess
import sys
import time

import pytest

os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")  # as workers.import_ray: loopback
ray = pytest.importorskip("ray")

import main  # noqa: E402
from a2c_ppo_acktr.envs import watch  # noqa: E402
from tests.run.test_cli import ROOT, group_alive  # noqa: E402
from tests.sampling.test_distributed_faults import rows, wait_for  # noqa: E402

FAULTY = ["--algo", "a2c", "--num-processes", "2", "--num-steps", "8", "--vec-env", "dummy",
          "--log-interval", "1", "--num-workers", "1"]


@pytest.fixture(scope="module")
def ray_session():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": {"PYTHONPATH": ROOT}})  # the workers import tests.fault_envs
    yield
    ray.shutdown()


def dirs(tmp_path):
    return ["--log-dir", str(tmp_path / "logs"), "--save-dir", str(tmp_path / "models")]


@pytest.mark.slow
def test_an_env_that_keeps_failing_stops_the_run_in_one_line(ray_session, tmp_path, capsys):
    """Each fresh worker's env 0 raises at its 20th step: updates 2, 4 and 6 fail alike. It was
    restarted 22 times at a tenth of the speed and ended "done" (exit 0); now the third failure
    stops the run (exit 1), after the env's traceback."""
    argv = FAULTY + ["--env-name", "tests.fault_envs:RaiseInStep-v0", "--env-kwargs", "at=20",
                     "--num-env-steps", "3200"] + dirs(tmp_path)
    assert main.main(argv) == 1
    out, err = capsys.readouterr()
    assert err.count("Traceback") == 1, err  # the env's, sent by the worker
    last = err.splitlines()[-1]
    assert last.endswith(": error: Ray rollout worker 0: env 0 (RaiseInStep-v0) failed in step: "
                         "RuntimeError: simulated failure in step (its traceback above): the same "
                         "failure 3 times within 5 updates, each time in fresh envs; stopped, "
                         "keeping the last saved checkpoint "
                         f"{tmp_path}/models/a2c/RaiseInStep-v0_seed1.pt (16 steps): --resume "
                         "continues it, --overwrite starts the run again"), err
    assert out.count("restarted by Ray") == 2, out
    log = (tmp_path / "logs" / "a2c" / "RaiseInStep-v0_seed1" / "workers.log").read_text()
    assert log.count("restarted by Ray") == 2 and "update 6: worker 0 failed" in log, log


@pytest.mark.slow
def test_a_hung_env_is_warned_and_env_timeout_stops_it(ray_session, tmp_path, capsys,
                                                        monkeypatch):
    """The learner warns as the in-process watch does (after 60 s; 1 s here); --env-timeout
    reaches the workers' envs and stops the run (it did nothing with --num-workers before)."""
    monkeypatch.setattr(watch, "WARN_AFTER_S", 1.0)
    argv = FAULTY + ["--env-name", "tests.fault_envs:Hangs-v0", "--env-kwargs", "at=20",
                     "--env-timeout", "5", "--num-env-steps", "3200"] + dirs(tmp_path)
    assert main.main(argv) == 1
    err = capsys.readouterr().err.splitlines()
    assert ("warning: Ray rollout worker 0 (envs 0..1) of tests.fault_envs:Hangs-v0: sample has "
            "not returned for 1 s; Ctrl-C stops the run (--env-timeout stops it at 5 s)"
            in err[-2]), err
    assert err[-1].endswith(": error: Ray rollout worker 0: env 0 of tests.fault_envs:Hangs-v0: "
                            "step did not return within --env-timeout 5 s; stopped, keeping the "
                            "last saved checkpoint "
                            f"{tmp_path}/models/a2c/Hangs-v0_seed1.pt (16 steps): --resume "
                            "continues it, --overwrite starts the run again"), err


def learner(tmp_path, argv):
    """main.py with workers on its own Ray, as a user starts it; stderr to tmp_path/err."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    return subprocess.Popen([sys.executable, "main.py", *FAULTY, *argv, *dirs(tmp_path)],
                            cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                            stderr=open(tmp_path / "err", "w"), start_new_session=True)


@pytest.mark.slow
def test_a_sigkilled_learner_leaves_no_ray_process_and_ray_says_nothing(tmp_path):
    """Ray's dashboard and runtime-env agents outlived a SIGKILLed learner by 60 s; now its
    whole process group is gone within seconds. Ray's start-up lines and its token note, and
    MuJoCo's warning on HalfCheetah's model (in the workers), are not shown."""
    proc = learner(tmp_path, ["--env-name", "HalfCheetah-v5", "--num-env-steps", "10000000"])
    try:
        wait_for(lambda: rows(tmp_path, "HalfCheetah-v5") >= 2)
        proc.kill()
        proc.wait()
        deadline = time.monotonic() + 15
        while group_alive(proc.pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not group_alive(proc.pid)
    finally:
        if group_alive(proc.pid):
            os.killpg(proc.pid, signal.SIGKILL)
    assert (tmp_path / "err").read_text() == ""


@pytest.mark.slow
def test_ctrl_c_twice_with_a_hung_env_exits_130(tmp_path):
    """The second Ctrl-C came while the learner waited in ray.wait, which made its exit 1."""
    proc = learner(tmp_path, ["--env-name", "tests.fault_envs:Hangs-v0", "--env-kwargs", "at=20",
                              "--num-env-steps", "3200"])
    try:
        wait_for(lambda: rows(tmp_path, "Hangs-v0") >= 2)  # update 2 hangs at step 20
        time.sleep(1)
        os.killpg(proc.pid, signal.SIGINT)
        time.sleep(1.5)  # not the same request (REPEAT_S)
        os.killpg(proc.pid, signal.SIGINT)
        assert proc.wait(timeout=30) == 130
        wait_for(lambda: not group_alive(proc.pid), 20)
    finally:
        if group_alive(proc.pid):
            os.killpg(proc.pid, signal.SIGKILL)
    assert (tmp_path / "err").read_text() == (
        "main.py: SIGINT: stopping after this update; again to stop now\n"
        "main.py: SIGINT again: stopped without saving\n")
