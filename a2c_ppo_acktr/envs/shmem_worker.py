"""A ``ShmemVecEnv`` worker process: it builds its block of envs, maps the shared buffer the
parent made (``shared_layout``: where each array lies in it) and steps, resets, renders, saves or
restores its envs on the parent's one-byte commands; a failure goes back as a ``RemoteError``.
"""
import copyreg
import io
import mmap
import os
import pickle
import signal
import traceback
from multiprocessing import reduction
from multiprocessing.connection import Connection
from typing import Any

import cloudpickle
import gymnasium as gym
import numpy as np

from a2c_ppo_acktr.envs.blocks import benchmark_block, build_envs, pause_block, reset_block, step_block
from a2c_ppo_acktr.envs.processes import die_with_parent
from a2c_ppo_acktr.envs.state import capture_envs, restore_envs
from a2c_ppo_acktr.envs.vec_env import space_shape
from a2c_ppo_acktr.errors import EnvError

Layout = dict[str, tuple[str, tuple[int, ...], int]]  # name -> (dtype, shape, offset)


def shared_layout(n: int, observation_space: gym.Space, action_space: gym.Space
                  ) -> tuple[Layout, int]:
    """Byte layout of the shared buffer: name -> (dtype, shape, offset); plus the total size."""
    fields: list[tuple[str, Any, tuple[int, ...]]] = [
        ("obs", observation_space.dtype, space_shape(observation_space)),
        ("actions", action_space.dtype, space_shape(action_space)),
        ("rewards", np.float32, ()), ("terminated", bool, ()), ("truncated", bool, ())]
    layout: Layout = {}
    offset = 0
    for name, dtype, shape in fields:
        dtype = np.dtype(dtype)
        layout[name] = (dtype.str, (n, *shape), offset)
        offset += -(-n * int(np.prod(shape)) * dtype.itemsize // 64) * 64  # 64-byte aligned
    return layout, max(offset, 1)


def shared_views(buf: Any, layout: Layout, lo: int = 0, hi: int | None = None
                 ) -> dict[str, np.ndarray]:
    """numpy views (rows lo:hi) on the shared buffer, keyed like the layout."""
    return {name: np.ndarray(shape, dtype, buffer=buf, offset=offset)[lo:hi]
            for name, (dtype, shape, offset) in layout.items()}


class RemoteError:
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


def worker(conn: Connection, env_fns_blob: bytes, first_index: int) -> None:
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
        v = shared_views(buf, layout, first_index, first_index + len(envs))
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
            conn.send(RemoteError(str(e), e.details))
        except OSError:
            pass
    finally:
        for env in envs:
            try:
                env.close()
            except Exception:
                pass
