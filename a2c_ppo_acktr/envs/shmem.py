"""``ShmemVecEnv``: N envs in worker processes, talking through one shared-memory buffer."""
import atexit
import copyreg
import io
import mmap
import multiprocessing as mp
import os
import pickle
import signal
import tempfile
import time
import traceback
import weakref
from collections.abc import Callable, Sequence
from multiprocessing import forkserver, reduction

import cloudpickle
import gymnasium as gym
import numpy as np

from a2c_ppo_acktr.envs.state import capture_envs, restore_envs
from a2c_ppo_acktr.envs.vec_env import (
    StepResult,
    benchmark_block,
    build_envs,
    num_cpus,
    pause_block,
    reset_block,
    step_block,
)
from a2c_ppo_acktr.envs.watch import Calling, describe_envs
from a2c_ppo_acktr.errors import EnvError
from a2c_ppo_acktr.utils import check_descriptors, die_with_parent, signals_stay_here

CLOSE_S = 2.0  # how long close() waits for the workers to close their envs, all together
_open: "weakref.WeakSet[ShmemVecEnv]" = weakref.WeakSet()


@atexit.register  # before multiprocessing's own, which would wait forever for a stuck worker
def _close_all() -> None:
    for venv in list(_open):
        venv.close()


def _shared_layout(n, observation_space, action_space):
    """Byte layout of the shared buffer: name -> (dtype, shape, offset); plus the total size."""
    fields = [("obs", observation_space.dtype, observation_space.shape),
              ("actions", action_space.dtype, action_space.shape),
              ("rewards", np.float32, ()), ("terminated", bool, ()), ("truncated", bool, ())]
    layout, offset = {}, 0
    for name, dtype, shape in fields:
        dtype = np.dtype(dtype)
        layout[name] = (dtype.str, (n, *shape), offset)
        offset += -(-n * int(np.prod(shape)) * dtype.itemsize // 64) * 64  # 64-byte aligned
    return layout, max(offset, 1)


def _shared_views(buf, layout, lo=0, hi=None):
    """numpy views (rows lo:hi) on the shared buffer, keyed like the layout."""
    return {name: np.ndarray(shape, dtype, buffer=buf, offset=offset)[lo:hi]
            for name, (dtype, shape, offset) in layout.items()}


class _RemoteError:
    """What a worker sends back instead of a result when one of its envs fails: the one line and
    the env's traceback of an ``EnvError``."""

    def __init__(self, message: str, details: str) -> None:
        self.message, self.details = message, details


def _reduce_numpy_scalar(x):
    return type(x), (x.item(),)


# numpy scalars (MuJoCo infos are full of them) pickle faster this way (docs/benchmarks.md,
# "Measured code choices"); same type and value.
_DISPATCH_TABLE = copyreg.dispatch_table.copy()
_DISPATCH_TABLE.update({t: _reduce_numpy_scalar
                        for t in (np.float64, np.float32, np.int64, np.int32, np.bool_)})


def _send(conn, obj):
    """conn.send(obj), with the faster pickling of numpy scalars."""
    buf = io.BytesIO()
    pickler = pickle.Pickler(buf, protocol=pickle.HIGHEST_PROTOCOL)
    pickler.dispatch_table = _DISPATCH_TABLE
    pickler.dump(obj)
    conn.send_bytes(buf.getbuffer())


def _worker(conn, env_fns_blob, first_index):
    """Worker process running envs first_index .. first_index + len(env_fns) - 1."""
    # Ctrl-C and a scheduler's SIGTERM reach the whole process group: the parent saves, then
    # closes us in order (a spawned worker has no forkserver's mask: see _mp_context).
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)  # a closed terminal: the parent saves too
    die_with_parent()  # the forkserver, which ends with the training process
    envs: list[gym.Env] = []
    try:
        envs = build_envs(cloudpickle.loads(env_fns_blob), first_index)
        conn.send((envs[0].observation_space, envs[0].action_space))
        layout = conn.recv()
        fd = reduction.recv_handle(conn)
        buf = mmap.mmap(fd, 0)
        os.close(fd)
        v = _shared_views(buf, layout, first_index, first_index + len(envs))
        while True:
            cmd = conn.recv_bytes()
            if cmd == b"s":
                infos = step_block(envs, v["actions"].copy(), v["obs"], v["rewards"],
                                   v["terminated"], v["truncated"], first_index)
                _send(conn, infos if any(infos) else None)  # usually all empty: send nothing
            elif cmd == b"r":
                reset_block(envs, v["obs"], first_index)
                conn.send(None)
            elif cmd == b"p":
                pause_block(envs)
                conn.send(None)
            elif cmd == b"b":
                conn.send(benchmark_block(envs))
            elif cmd == b"v":
                conn.send(envs[0].render())
            elif cmd == b"g":  # get the envs' states (a checkpoint)
                conn.send(capture_envs(envs))
            elif cmd == b"t":  # set them (--resume)
                try:
                    restore_envs(envs, conn.recv())
                    conn.send(None)
                except (ValueError, KeyError) as e:  # not this run's envs: they run on as they are
                    conn.send(str(e))
            elif cmd == b"c":
                break
    except (EOFError, ConnectionError):
        pass  # the parent is gone
    except Exception as e:  # said once, by the parent: this process prints nothing
        if not isinstance(e, EnvError):  # not in an env's method: the whole traceback
            e = EnvError(f"a ShmemVecEnv worker of envs {first_index}.."
                         f"{first_index + max(len(envs), 1) - 1} failed: {type(e).__name__}: {e}",
                         traceback.format_exc())
        try:
            conn.send(_RemoteError(str(e), e.details))
        except OSError:
            pass
    finally:
        for env in envs:
            try:
                env.close()
            except Exception:
                pass


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
                proc = ctx.Process(target=_worker, daemon=True,
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
        layout, size = _shared_layout(n, self.observation_space, self.action_space)
        fd = _anonymous_file(size)
        try:
            for conn, proc in zip(self._conns, self._procs):
                conn.send(layout)
                reduction.send_handle(conn, fd, proc.pid)
            self._buf = mmap.mmap(fd, size)
        finally:
            os.close(fd)
        self._views = _shared_views(self._buf, layout)
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
        if isinstance(reply, _RemoteError):
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
