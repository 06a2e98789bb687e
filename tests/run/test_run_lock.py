"""One writer per run (issue #72 item 3): the process training a run holds an OS lock in its log
directory; a second start, --resume or --overwrite of it is refused in one line naming that
process, before anything changes on disk; the lock dies with its process."""
import fcntl
import os
import subprocess
import sys

import pytest

import main
from a2c_ppo_acktr.run.rundir import LOCK_FILE

TINY = ["--algo", "a2c", "--env-name", "CartPole-v1", "--num-processes", "2", "--num-steps", "8",
        "--vec-env", "dummy", "--num-env-steps", "32"]


def snapshot(root):
    return {os.path.join(d, f): os.stat(os.path.join(d, f)).st_mtime_ns
            for d, _, files in os.walk(root) for f in files}


@pytest.mark.parametrize("again", [[], ["--resume"], ["--overwrite"]],
                         ids=["start", "resume", "overwrite"])
def test_a_run_being_trained_is_refused_naming_its_process(tmp_path, capsys, again):
    argv = TINY + ["--log-dir", str(tmp_path / "logs"), "--save-dir", str(tmp_path / "models")]
    assert main.main(argv) == 0
    lock = tmp_path / "logs" / "a2c" / "CartPole-v1_seed1" / LOCK_FILE
    assert lock.read_text() == f"{os.getpid()}\n"  # the lock says who trained it last
    fd = os.open(lock, os.O_RDWR)  # another training process, as the OS sees it
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.pwrite(fd, b"4242\n", 0)
        before = snapshot(tmp_path)
        capsys.readouterr()
        with pytest.raises(SystemExit) as exc:
            main.main(argv + again + ["--num-env-steps", "64"])
        assert exc.value.code == 2
        err = capsys.readouterr().err
        assert len(err.splitlines()) == 1 and f"{lock.parent} is being trained by process " \
            f"4242 (it holds {lock})" in err, err
        assert snapshot(tmp_path) == before
    finally:
        os.close(fd)
    assert main.main(argv + ["--resume", "--num-env-steps", "64"]) == 0  # free again


def test_the_lock_dies_with_its_process_and_a_failed_start_leaves_none(tmp_path, capsys):
    log_dir = tmp_path / "logs" / "a2c" / "CartPole-v1_seed1"
    log_dir.mkdir(parents=True)
    hold = "import fcntl, os, sys; fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT); " \
           "fcntl.flock(fd, fcntl.LOCK_EX); os._exit(9)"  # killed, as far as its lock goes
    subprocess.run([sys.executable, "-c", hold, str(log_dir / LOCK_FILE)], check=False)
    argv = TINY + ["--log-dir", str(tmp_path / "logs"), "--save-dir", str(tmp_path / "models")]
    with pytest.raises(SystemExit):  # an unknown env: the start is undone, its lock file too
        main.main([a if a != "CartPole-v1" else "CartPol-v1" for a in argv])
    assert main.main(argv) == 0


def test_a_failed_start_of_a_new_run_leaves_no_lock_behind(tmp_path, capsys):
    argv = TINY + ["--log-dir", str(tmp_path / "logs"), "--save-dir", str(tmp_path / "models"),
                   "--env-name", "tests.toy_envs:Broken-v0"]
    with pytest.raises(SystemExit):
        main.main(argv)
    assert os.listdir(tmp_path) == []


def test_a_checkpoint_being_written_is_refused_to_a_run_of_another_log_dir(tmp_path, capsys):
    """Two runs of one --save-dir, algo, env and seed but other --log-dir would both write one
    .pt (issue #85 item 3): the second, even with --overwrite, is refused in one line naming the
    first; once it has ended its lock file is gone and the second may start."""
    models = tmp_path / "models"
    first = TINY + ["--log-dir", str(tmp_path / "first"), "--save-dir", str(models)]
    assert main.main(first) == 0
    assert sorted(os.listdir(models / "a2c")) == ["CartPole-v1_seed1.pt"]  # no lock left behind
    lock = models / "a2c" / ".CartPole-v1_seed1.pt.lock"
    fd = os.open(lock, os.O_RDWR | os.O_CREAT)  # the first run again, training, as the OS sees it
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.pwrite(fd, f"4242\n{tmp_path / 'first'}".encode(), 0)
        before = snapshot(tmp_path)
        capsys.readouterr()
        with pytest.raises(SystemExit) as exc:
            main.main(TINY + ["--log-dir", str(tmp_path / "second"), "--save-dir", str(models),
                              "--overwrite"])
        assert exc.value.code == 2
        err = capsys.readouterr().err
        assert len(err.splitlines()) == 1 and "CartPole-v1_seed1.pt is being written by process " \
            f"4242, the run logging to {tmp_path / 'first'}" in err, err
        assert snapshot(tmp_path) == before and not (tmp_path / "second").exists()
    finally:
        os.close(fd)
        os.remove(lock)
    assert main.main(TINY + ["--log-dir", str(tmp_path / "second"), "--save-dir", str(models),
                             "--overwrite"]) == 0
