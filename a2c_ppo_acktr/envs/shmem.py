"""``ShmemVecEnv``: N envs in worker processes (``shmem_worker.py``), talking through one
shared-memory buffer."""
import atexit
import mmap
import multiprocessing as mp
import os
import signal
import tempfile
import time
import weakref
from collections.abc import Callable, Sequence
from multiprocessing import forkserver, reduction

import cloudpickle
import gymnasium as gym
import numpy as np

from a2c_ppo_acktr.envs.processes import check_descriptors, signals_stay_here
from a2c_ppo_acktr.envs.shmem_worker import RemoteError, shared_layout, shared_views, worker
from a2c_ppo_acktr.envs.vec_env import StepResult, num_cpus
from a2c_ppo_acktr.envs.watch import Calling, describe_envs
from a2c_ppo_acktr.errors import EnvError

CLOSE_S = 2.0  # how long close() waits for the workers to close their envs, all together
_open: "weakref.WeakSet[ShmemVecEnv]" = weakref.WeakSet()


@atexit.register  # before multiprocessing's own, which would wait forever for a stuck worker
def _close_all() -> None:
    for venv in list(_open):
        venv.close()



def exit_status(code: int | None) -> str:
    """A process's ``exitcode`` in words: "exit status 3", "killed by SIGKILL"."""
    if code is None:
        return "still running"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit status {code}"


def _mp_context():
    """forkserver where available: fork is unsafe once torch has started threads, and a
    forkserver that has already imported this module (torch, gymnasium) starts workers fast."""
    if "forkserver" not in mp.get_all_start_methods():
        return mp.get_context("spawn")
    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload([__name__])  # no effect once the server runs; harmless then
    with signals_stay_here():  # the forkserver, and the workers it forks, leave them to us
        forkserver.ensure_running()
    return ctx


def _anonymous_file(size):
    """File descriptor of an unnamed file of ``size`` bytes (freed once the last user closes it)."""
    if hasattr(os, "memfd_create"):
        fd = os.memfd_create("a2c_ppo_acktr-shmem")
    else:
        with tempfile.TemporaryFile() as f:
            fd = os.dup(f.fileno())
    os.ftruncate(fd, size)
    return fd


class ShmemVecEnv(Calling):
    """N envs in ``num_workers`` subprocesses, each running a contiguous block of envs.

    Observations, actions, rewards, terminated and truncated live in one shared-memory buffer;
    the pipes carry only one-byte commands and the (usually empty) info lists. A failing env
    raises RuntimeError here, naming its index, and closes the workers. Workers start through a
    forkserver, so a script creating one needs the usual ``if __name__ == "__main__":`` guard.
    """

    def __init__(self, env_fns: Sequence[Callable[[], gym.Env]],
                 num_workers: int | None = None) -> None:
        self.num_envs = n = len(env_fns)
        num_workers = max(1, min(n, num_workers or num_cpus()))
        bounds = np.linspace(0, n, num_workers + 1).round().astype(int)
        self._blocks = list(zip(bounds[:-1].tolist(), bounds[1:].tolist()))
        self._conns, self._procs, self.closed = [], [], False
        # what a worker holds here (its pipe, its sentinel) or takes to start, and the forkserver's
        check_descriptors(4 * num_workers + 4, f"{num_workers} ShmemVecEnv workers")
        ctx = _mp_context()
        try:
            for lo, hi in self._blocks:
                parent_conn, child_conn = ctx.Pipe()  # a socket pair: can pass the buffer's fd
                proc = ctx.Process(target=worker, daemon=True,
                                   args=(child_conn, cloudpickle.dumps(env_fns[lo:hi]), lo))
                proc.start()
                child_conn.close()
                self._conns.append(parent_conn)
                self._procs.append(proc)
        except BaseException:  # e.g. too many open files: the workers started end first, so that
            for proc in self._procs:  # none writes a file (a monitor file) after the caller has
                proc.kill()  # undone the run's start
                proc.join(5.0)
            for conn in self._conns:
                conn.close()
            self.closed = True
            raise
        # Workers build their envs in parallel; then the buffer, sized from the spaces, goes out.
        self.observation_space, self.action_space = [self._recv(w) for w in range(num_workers)][0]
        layout, size = shared_layout(n, self.observation_space, self.action_space)
        fd = _anonymous_file(size)
        try:
            for conn, proc in zip(self._conns, self._procs):
                conn.send(layout)
                reduction.send_handle(conn, fd, proc.pid)
            self._buf = mmap.mmap(fd, size)
        finally:
            os.close(fd)
        self._views = shared_views(self._buf, layout)
        _open.add(self)

    def _recv(self, w):
        """Reply of worker ``w``; on a worker error or death, close everything and raise
        ``EnvError``."""
        try:
            reply = self._conns[w].recv()
        except (EOFError, ConnectionError):
            lo, hi = self._blocks[w]
            self._procs[w].join(1.0)
            self.close()
            raise EnvError(f"the ShmemVecEnv worker process of envs {lo}..{hi - 1} died "
                           f"({exit_status(self._procs[w].exitcode)})") from None
        if isinstance(reply, RemoteError):
            self.close()
            raise EnvError(reply.message, reply.details)
        return reply

    def _check_open(self):
        if self.closed:
            raise RuntimeError("ShmemVecEnv is closed")

    def _broadcast(self, cmd):
        """Send a one-byte command to every worker; return their replies in worker order."""
        self._check_open()
        for conn in self._conns:
            conn.send_bytes(cmd)
        return [self._recv(w) for w in range(len(self._conns))]

    def reset(self) -> np.ndarray:
        """Reset all envs; returns obs (N, *obs_shape)."""
        self._start("reset")
        try:
            self._broadcast(b"r")
        finally:
            self._end()
        return self._views["obs"].copy()

    def step(self, actions: np.ndarray) -> StepResult:
        """Returns obs (N, *obs_shape), rewards (N,) f32, terminated (N,), truncated (N,), infos."""
        self._check_open()
        v = self._views
        v["actions"][:] = np.asarray(actions).reshape(v["actions"].shape)
        infos: list[dict] = []
        self._start("step")
        try:
            replies = self._broadcast(b"s")
        finally:
            self._end()
        for block, (lo, hi) in zip(replies, self._blocks):
            infos.extend(block if block is not None else [{} for _ in range(hi - lo)])
        # Copies: the workers overwrite the buffer on the next step.
        return (v["obs"].copy(), v["rewards"].copy(), v["terminated"].copy(), v["truncated"].copy(),
                infos)

    def pause(self) -> None:
        self._broadcast(b"p")

    def benchmarks(self) -> list[dict | None]:
        return [b for block in self._broadcast(b"b") for b in block]

    def render(self) -> np.ndarray | None:
        self._check_open()
        self._conns[0].send_bytes(b"v")
        return self._recv(0)

    def env_states(self) -> list[dict]:
        """Per env, its state (``state.capture_envs``), read at save time."""
        return [s for block in self._broadcast(b"g") for s in block]

    def load_env_states(self, states: list[dict]) -> None:
        """Put every env back in ``states`` (``env_states``'); ValueError if they do not fit."""
        self._check_open()
        if len(states) != self.num_envs:
            raise ValueError(f"the checkpoint holds {len(states)} envs' states, this run has "
                             f"{self.num_envs}")
        for conn, (lo, hi) in zip(self._conns, self._blocks):
            conn.send_bytes(b"t")
            conn.send(states[lo:hi])
        errors = [e for e in (self._recv(w) for w in range(len(self._conns))) if e is not None]
        if errors:
            raise ValueError(errors[0])

    def describe_pending(self, thread: int) -> str:
        """The envs of the workers that have not replied yet."""
        return describe_envs([block for conn, block in zip(self._conns, self._blocks)
                              if not conn.poll()])

    @property
    def pids(self) -> list[int]:
        """Worker process ids (for resource measurements)."""
        return [p.pid for p in self._procs]

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        for conn in self._conns:
            try:
                conn.send_bytes(b"c")
            except OSError:
                pass  # that worker is already gone
        # Workers ignore SIGTERM (terminate): one that is stuck in its env is killed, so that a
        # hung env never holds the process (and the forkserver, the resource tracker) alive.
        deadline = time.monotonic() + CLOSE_S
        for proc in self._procs:
            proc.join(max(0.0, deadline - time.monotonic()))
        for proc in self._procs:
            if proc.is_alive():
                proc.kill()
                proc.join(5.0)
        for conn in self._conns:
            conn.close()
