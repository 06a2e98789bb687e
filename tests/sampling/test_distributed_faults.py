"""Faults under torchrun (a2c_ppo_acktr/sampling/ddp.py, issue #85): a rank whose env raises,
a killed rank, a SIGKILLed torchrun. The ranks' own lines are those starting ``main.py:``;
torchrun's own report of a failed rank (its log lines and its ChildFailedError) follows them."""
import os
import pathlib
import re
import signal
import socket
import subprocess
import sys
import time

import pytest
import torch.distributed as dist

from a2c_ppo_acktr.errors import RankError
from a2c_ppo_acktr.sampling import ddp as ddp_module
from a2c_ppo_acktr.sampling.ddp import DDP
from tests.run.test_cli import ROOT

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc"), reason="reads Linux's /proc")
# OMP_NUM_THREADS set, as the README's command sets it: torchrun then prints no banner
TORCHRUN = (sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2")
ARGV = ["--algo", "a2c", "--num-processes", "2", "--num-steps", "8", "--vec-env", "dummy",
        "--log-interval", "1", "--num-env-steps", "10000000", "--save-interval", "100000"]


class Store:
    """The process group's store, as a dict."""

    def __init__(self, **values):
        self.values = {ddp_module.KEYS + k.replace("_", "/"): v for k, v in values.items()}

    def check(self, keys):
        return all(k in self.values for k in keys)

    def get(self, key):
        return self.values[key].encode()

    def set(self, key, value):
        self.values[key] = value


def rank(r, store, monkeypatch):
    monkeypatch.setattr(ddp_module, "LOST_S", 0.0)
    monkeypatch.setattr(ddp_module, "_ignore_sigterm", lambda: None)
    ddp = DDP.__new__(DDP)
    ddp.rank, ddp.world_size, ddp.store, ddp.failed = r, 3, store, False
    return ddp


def broken():
    raise RuntimeError("[gloo/transport/tcp/pair.cc:537] Read error: Connection reset by peer")


def test_a_broken_collective_names_the_rank_that_said_why(monkeypatch):
    here = f"{socket.gethostname()} {os.getpid()}"
    store = Store(pid_1=here, pid_2=here, failed_2="rank 2 at 96 steps: env 0 (X-v0) failed")
    with pytest.raises(RankError, match=r"^rank 2 at 96 steps: env 0 \(X-v0\) failed$"):
        rank(0, store, monkeypatch)._together(broken)


def test_a_broken_collective_names_a_rank_whose_process_ended(monkeypatch):
    gone = int(open("/proc/sys/kernel/pid_max").read()) + 1  # no process has it
    store = Store(pid_0=f"{socket.gethostname()} {os.getpid()}",
                  pid_2=f"{socket.gethostname()} {gone}", pid_1=f"elsewhere {gone}")
    ddp = rank(1, store, monkeypatch)
    with pytest.raises(RankError) as e:
        ddp._together(broken)
    assert str(e.value) == f"rank 2 (pid {gone}) ended without saying why (killed, or its process crashed)"
    assert ddp.failed and not ddp.speaks  # no barrier at close; the lead says why
    store.values[ddp_module.KEYS + "pid/0"] = f"{socket.gethostname()} {gone}"
    with pytest.raises(RankError, match=r"^rank 0 \(pid \d+\), rank 2 \(pid \d+\) ended without"):
        ddp._together(broken)
    assert ddp.speaks  # the lead is gone: rank 1 says why
    store.values.clear()  # nothing known: the collective's own error
    with pytest.raises(RankError, match="^the ranks lost touch: RuntimeError: .*Connection reset"):
        ddp._together(broken)


def test_a_failing_rank_tells_the_others_and_names_itself(monkeypatch):
    store = Store()
    monkeypatch.setattr(dist, "is_initialized", lambda: False)
    ddp = rank(1, store, monkeypatch)
    line = ddp.stopping("env 0 (X-v0) failed in step: ValueError: bad", 1216)
    assert line == "rank 1 at 1,216 steps: env 0 (X-v0) failed in step: ValueError: bad"
    assert store.values[ddp_module.KEYS + "failed/1"] == line and ddp.failed
    assert ddp.stopping(None, 8, KeyError("k")) is None  # traced back here; the others told
    assert store.values[ddp_module.KEYS + "failed/1"] == (
        "rank 1 at 8 steps: KeyError: 'k' (traced back by rank 1)")
    told = RankError("rank 2 at 8 steps: ...")  # another rank's failure: as it is, not told again
    assert rank(0, store, monkeypatch).stopping(str(told), 8, told) == str(told)
    assert ddp_module.KEYS + "failed/0" not in store.values


def torchrun(tmp_path, argv, **popen):
    """main.py under torchrun, 2 ranks, in a session of its own; stderr to tmp_path/err."""
    err = open(tmp_path / "err", "w")
    return subprocess.Popen([*TORCHRUN, "main.py", *argv, "--log-dir", str(tmp_path / "logs"),
                             "--save-dir", str(tmp_path / "models")],
                            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=err, start_new_session=True,
                            env={**os.environ, "OMP_NUM_THREADS": "1", "TMPDIR": str(tmp_path)},
                            **popen)


def wait_for(condition, seconds=240):
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


def rows(tmp_path, env_id):
    progress = tmp_path / "logs" / "a2c" / f"{env_id}_seed1" / "progress.csv"
    return len(progress.read_text().splitlines()) - 1 if progress.exists() else 0


def ranks(launcher):
    """{rank: pid} of torchrun's children."""
    found = {}
    for pid in pathlib.Path(f"/proc/{launcher.pid}/task/{launcher.pid}/children").read_text().split():
        env = pathlib.Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        found[int(next(v for v in env if v.startswith(b"RANK=")).split(b"=")[1])] = int(pid)
    return found


def alive(pid):
    try:
        return pathlib.Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] != "Z"
    except OSError:
        return False


def ours(tmp_path):
    """The ranks' lines of stderr (not torchrun's, nor the env's traceback)."""
    err = (tmp_path / "err").read_text()
    assert "[rank" not in err and "distributed_c10d" not in err and "*****" not in err, err
    return [line for line in err.splitlines() if line.startswith("main.py:")], err


@pytest.mark.slow
def test_one_ranks_env_raising_stops_every_rank_at_once_in_one_line(tmp_path):
    """Env 0 of rank 1 raises at its 20th step: rank 1 prints the env's traceback, rank 0 the
    line naming the rank, its steps and the env, and both end within 30 s of the failure (they
    hung in their collectives until gloo's 30-minute timeout before)."""
    proc = torchrun(tmp_path, ARGV + ["--env-name", "tests.fault_envs:RaiseInStep-v0",
                                      "--env-kwargs", "at=20", "only=3"])
    try:
        wait_for(lambda: "simulated failure" in (tmp_path / "err").read_text())
        failed = time.monotonic()
        status = proc.wait(timeout=60)
        assert time.monotonic() - failed < 30
    finally:
        proc.kill()
    assert status != 0
    lines, err = ours(tmp_path)
    assert len(lines) == 1, err
    assert re.fullmatch(r"main\.py: error: rank 1 at [\d,]+ steps: env 0 \(RaiseInStep-v0\) failed "
                        r"in step: RuntimeError: simulated failure in step \(its traceback above\); "
                        r"stopped, keeping the last saved checkpoint .*", lines[0]), err
    assert err.count('raise RuntimeError("simulated failure in step")') == 1, err  # its traceback


@pytest.mark.slow
def test_a_non_finite_loss_on_one_rank_stops_every_rank(tmp_path):
    """Rank 1's env returns an infinite reward: its loss alone is not finite. It stopped alone
    before, and the ranks hung."""
    proc = torchrun(tmp_path, ARGV + ["--env-name", "tests.fault_envs:NanReward-v0",
                                      "--env-kwargs", "at=20", "only=3"])
    try:
        assert proc.wait(timeout=240) == 1
    finally:
        proc.kill()
    lines, err = ours(tmp_path)
    assert re.fullmatch(r"main\.py: error: rank 1 at [\d,]+ steps: non-finite loss at update \d+ "
                        r"\(value_loss \S+, .*\); stopped, keeping the last saved checkpoint .*",
                        lines[-1]), err
    assert len([line for line in lines if ": error: " in line]) == 1, err


@pytest.mark.slow
@pytest.mark.parametrize("victim", [1, 0])
def test_a_killed_rank_gives_one_line_on_the_others(tmp_path, victim):
    """Rank 0 says why; if it is the one killed, rank 1 does. Before: gloo's error in two
    tracebacks of each rank left."""
    proc = torchrun(tmp_path, ARGV + ["--env-name", "CartPole-v1"])
    try:
        wait_for(lambda: rows(tmp_path, "CartPole-v1") >= 3)
        killed = ranks(proc)[victim]
        os.kill(killed, signal.SIGKILL)
        proc.wait(timeout=60)
    finally:
        proc.kill()
    lines, err = ours(tmp_path)
    said = (f"main.py: error: rank {victim} (pid {killed}) ended without saying why (killed, or "
            "its process crashed); stopped")
    assert lines == [said + (
        f", keeping the last saved checkpoint {tmp_path}/models/a2c/CartPole-v1_seed1.pt (32 "
        "steps): --resume continues it, --overwrite starts the run again" if victim else
        " (the checkpoint is rank 0's last save, if any)")], err


@pytest.mark.slow
def test_the_ranks_of_a_sigkilled_torchrun_stop_and_rank_0_saves(tmp_path):
    """They get SIGTERM as torchrun ends (Linux's parent-death signal): they stop after the
    same update, rank 0 saves. MuJoCo's warning on HalfCheetah's model is said once, by rank 0."""
    proc = torchrun(tmp_path, ARGV + ["--env-name", "HalfCheetah-v5"])
    try:
        wait_for(lambda: rows(tmp_path, "HalfCheetah-v5") >= 2)
        pids = ranks(proc)
        proc.kill()
        wait_for(lambda: not any(alive(pid) for pid in pids.values()), 60)
    finally:
        proc.kill()
    lines, err = ours(tmp_path)
    assert len(err.splitlines()) == 3, err
    assert err.startswith("mujoco: warning: compiler attribute 'settotalmass' is deprecated"), err
    assert lines[0] == "main.py: SIGTERM: stopping after this update; again to stop now", err
    assert re.fullmatch(r"interrupted at [\d,]+ steps; saved \S+; --resume to continue",
                        err.splitlines()[2]), err
    assert (tmp_path / "models" / "a2c" / "HalfCheetah-v5_seed1.pt").exists()
