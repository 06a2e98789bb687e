"""errors.py: which failures become one line, and what that line says."""
import errno
import resource
import sys

import pytest
import torch

from a2c_ppo_acktr.errors import (
    ConfigError,
    LogError,
    allocation_failure,
    fail,
    failure_line,
    machine_failure,
    memory_limit,
    say,
    warn,
)
from a2c_ppo_acktr.run.interrupt import StopRequest


def test_a_disks_failure_is_one_line_and_other_os_errors_are_not():
    full = OSError(errno.ENOSPC, "No space left on device", "/runs/progress.csv")
    assert failure_line(full) == "/runs/progress.csv: No space left on device"
    assert failure_line(OSError(errno.EDQUOT, "Disk quota exceeded")) == (
        f"[Errno {errno.EDQUOT}] Disk quota exceeded")
    assert failure_line(LogError("cannot write x: No space left on device")) == (
        "cannot write x: No space left on device")
    assert failure_line(OSError(errno.EPIPE, "Broken pipe")) is None  # a bug: traced back
    assert failure_line(ValueError("x")) is None


def test_allocation_failures_say_how_much():
    with pytest.raises(RuntimeError) as e:
        torch.empty(2**50, dtype=torch.uint8)  # 1 PB: refused by any kernel
    assert allocation_failure(e.value) == "1,125,900 GB"
    cuda = RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 79.1 GiB total)")
    assert allocation_failure(cuda) == "2.00 GiB"
    assert allocation_failure(MemoryError()) == "memory"
    assert allocation_failure(RuntimeError("shape mismatch")) is None


def test_an_envs_failure_that_is_the_machines_is_one_line_and_a_bug_is_not():
    read_only = OSError(errno.EROFS, "Read-only file system", "/runs/0.monitor.csv")
    assert machine_failure(read_only) == "/runs/0.monitor.csv: Read-only file system"

    class FatalError(Exception):  # as mujoco's, for an MjData that does not fit
        pass

    assert machine_failure(FatalError("Could not allocate memory")) == (
        "FatalError: Could not allocate memory (this machine's memory, or ulimit -v)")
    assert machine_failure(MemoryError()) == (
        "MemoryError: no memory (this machine's memory, or ulimit -v)")
    assert machine_failure(RuntimeError("simulated failure in step")) is None
    assert machine_failure(ConfigError("x")) is None  # said as it is, by the caller


def test_a_small_allocation_under_a_memory_limit_names_the_limit(monkeypatch):
    """Issue #85: Atari's first rollout storage under ulimit -v 1,100,000 said it could not
    allocate "0.0 GB", larger than "this machine's memory"."""
    small = RuntimeError("DefaultCPUAllocator: can't allocate memory: you tried to allocate "
                         "28224000 bytes. Error code 12 (Cannot allocate memory)")
    assert allocation_failure(small) == "28.2 MB"
    monkeypatch.setattr(resource, "getrlimit", lambda which: (1_100_000 << 10, resource.RLIM_INFINITY))
    assert memory_limit() == "this machine's memory or the 1,100,000 KiB that ulimit -v allows"
    monkeypatch.setattr(resource, "getrlimit", lambda which: (resource.RLIM_INFINITY,) * 2)
    assert memory_limit() == "this machine's memory"


class _Writes:
    """A stream that keeps each write apart, as the pipe torchrun's ranks share sees them."""

    def __init__(self):
        self.writes = []

    def write(self, text):
        self.writes.append(text)
        return len(text)

    def flush(self):
        pass


def test_each_line_is_one_write(monkeypatch):
    """Under torchrun, torchrun's own lines landed inside a rank's between ``print``'s two
    writes (the text, then its end); every line the project prints about itself is one write."""
    import signal
    import sys

    stream = _Writes()
    monkeypatch.setattr(sys, "stderr", stream)
    monkeypatch.setattr(sys, "argv", ["main.py"])
    warn("w")
    with pytest.raises(SystemExit):
        fail("f")
    with StopRequest():
        signal.raise_signal(signal.SIGTERM)
    assert stream.writes == ["main.py: warning: w\n", "main.py: error: f\n",
                             "main.py: SIGTERM: stopping; again to stop now\n"]


def test_without_stderr_the_line_goes_to_stdout(monkeypatch, capsys):
    """A process started with stderr closed has ``sys.stderr`` None: ``print`` writes to stdout
    then, and so does ``say``, rather than failing on the line that explains a failure."""
    monkeypatch.setattr(sys, "stderr", None)
    say("main.py: error: x")
    assert capsys.readouterr().out == "main.py: error: x\n"
