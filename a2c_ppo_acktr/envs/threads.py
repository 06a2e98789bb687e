"""``ThreadVecEnv``: ``DummyVecEnv``'s envs stepped in blocks by threads of this process.

An env whose step spends most of its time outside the GIL gains from a second core without a
second process: MuJoCo's ``mj_step`` releases the GIL, so two threads step two blocks' physics at
once while their Python (the env's own, the wrappers, the Monitor) takes turns. Nothing crosses a
process: the envs are the ones ``DummyVecEnv`` builds, stepped by the same ``step_block`` with the
same actions, so a run gives the same results bit for bit. docs/benchmarks.md has the
measurements behind ``auto``'s choice.

On cores that other processes keep busy, each hand-over of the GIL waits for the scheduler and
the threads lose to stepping every env in the calling thread (measured). So the env times both
ways as it runs: after its first ``2 * PROBE_STEPS`` steps, then every ``PROBE_EVERY``, it takes
``PROBE_STEPS`` steps the other way and keeps the faster. Either way the results are the same,
so the choice costs nothing but time.
"""
import queue
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym
import numpy as np

from a2c_ppo_acktr.envs.blocks import DummyVecEnv, pending_env, reset_block, step_block
from a2c_ppo_acktr.envs.vec_env import num_cpus
from a2c_ppo_acktr.envs.watch import EnvTimeout, describe_envs

_STOP = None  # a helper's job queue holding this ends its thread
CLOSE_S = 2.0  # how long close() waits for the helpers to finish their step, all together
PROBE_EVERY, PROBE_STEPS = 500, 10  # ~2% of the steps taken the other way, to time it


def _serve(jobs: "queue.SimpleQueue", done: "queue.SimpleQueue", block: int) -> None:
    """A helper thread: run each job ``(call, fn, args)`` of ``jobs``, put ``(call, block,
    result, error)`` into ``done``."""
    while (job := jobs.get()) is not _STOP:
        call, fn, args = job
        try:
            done.put((call, block, fn(*args), None))
        except BaseException as e:  # handed to the caller, who raises it
            done.put((call, block, None, e))


class ThreadVecEnv(DummyVecEnv):
    """N envs in ``num_threads`` contiguous blocks (default: one per CPU): the calling thread
    steps the first block, one helper thread each other block (numpy in, numpy out)."""

    def __init__(self, env_fns: Sequence[Callable[[], gym.Env]],
                 num_threads: int | None = None) -> None:
        super().__init__(env_fns)
        k = max(1, min(self.num_envs, num_threads or num_cpus()))
        bounds = np.linspace(0, self.num_envs, k + 1).round().astype(int).tolist()
        self.blocks = list(zip(bounds[:-1], bounds[1:]))
        self._done: queue.SimpleQueue = queue.SimpleQueue()
        self._jobs: list[queue.SimpleQueue] = [queue.SimpleQueue() for _ in self.blocks[1:]]
        self._threads = [threading.Thread(target=_serve, args=(jobs, self._done, b + 1),
                                          name=f"envs-{lo}-{hi - 1}", daemon=True)
                         for b, (jobs, (lo, hi)) in enumerate(zip(self._jobs, self.blocks[1:]))]
        self._busy = [False] * len(self.blocks)
        self._in_threads = True  # how the call in progress steps them
        self._calls = 0
        self.threaded = True  # steps the blocks in their threads, else all in the caller's
        self._steps, self._decide_at = 0, 2 * PROBE_STEPS  # the first choice soon
        self._seconds: dict[bool, deque] = {True: deque(maxlen=PROBE_STEPS),
                                            False: deque(maxlen=PROBE_STEPS)}
        for t in self._threads:
            t.start()

    def _run(self, fn: Callable[..., Any], args: Callable[[int, int], tuple],
             threaded: bool = True) -> list:
        """``fn(*args(lo, hi))`` for every block at once; the results in block order. An error
        is raised once every block has returned (the lowest block's first), so that no helper
        still writes into the arrays the caller is given; but ``--env-timeout`` and Ctrl-C
        leave at once (a hung env would never return). ``threaded`` False: one call over all
        envs, in this thread."""
        self._in_threads = threaded
        if not threaded:
            self._busy = [True] + [False] * len(self._jobs)
            result = fn(*args(0, self.num_envs))
            self._busy[0] = False
            return [result]
        self._calls += 1
        self._busy = [True] * len(self.blocks)
        for jobs, (lo, hi) in zip(self._jobs, self.blocks[1:]):
            jobs.put((self._calls, fn, args(lo, hi)))
        results: list = [None] * len(self.blocks)
        errors: list[BaseException | None] = [None] * len(self.blocks)
        try:
            results[0] = fn(*args(*self.blocks[0]))
        except EnvTimeout:
            raise
        except Exception as e:
            errors[0] = e
        self._busy[0] = False
        waiting = len(self._jobs)
        while waiting:
            call, block, result, error = self._done.get()
            if call != self._calls:  # a block of a call left by a timeout, returned since
                continue
            results[block], errors[block] = result, error
            self._busy[block] = False
            waiting -= 1
        for error in errors:
            if error is not None:
                raise error
        return results

    def _reset_envs(self, obs: np.ndarray) -> None:
        self._run(reset_block, lambda lo, hi: (self.envs[lo:hi], obs[lo:hi], lo), self.threaded)

    def _step_envs(self, actions: np.ndarray, obs: np.ndarray, rewards: np.ndarray,
                   terminated: np.ndarray, truncated: np.ndarray) -> list[dict]:
        """Step the blocks, in their threads or all in this one (timed: the faster is kept)."""
        threaded = self.threaded != (self._steps >= self._decide_at - PROBE_STEPS)  # probing
        started = time.perf_counter()
        blocks = self._run(step_block, lambda lo, hi: (
            self.envs[lo:hi], actions[lo:hi], obs[lo:hi], rewards[lo:hi], terminated[lo:hi],
            truncated[lo:hi], lo), threaded)
        self._seconds[threaded].append(time.perf_counter() - started)
        self._steps += 1
        if self._steps == self._decide_at:  # the last steps each way: keep the faster
            self.threaded = sum(self._seconds[True]) <= sum(self._seconds[False])
            self._decide_at += PROBE_EVERY
        return [info for infos in blocks for info in infos]

    def describe_pending(self, thread: int) -> str:
        """The envs that the blocks still stepping are calling ("envs 3, 40")."""
        idents = [thread] + [t.ident for t in self._threads]
        blocks = self.blocks if self._in_threads else [(0, self.num_envs)]
        pending = []
        for (lo, hi), busy, ident in zip(blocks, self._busy, idents):
            if busy:
                index = pending_env(ident) if ident is not None else None
                pending.append((index, index + 1) if index is not None else (lo, hi))
        return describe_envs(pending)

    def close(self) -> None:
        """Close the envs; those of a helper still stuck in its env (a hung step) are left to
        it, not closed under it."""
        for jobs in self._jobs:
            jobs.put(_STOP)
        deadline = time.monotonic() + CLOSE_S
        for t in self._threads:
            t.join(max(0.0, deadline - time.monotonic()))
        stuck = [t.is_alive() for t in self._threads]
        for env in [e for (lo, hi), alive in zip(self.blocks, [False, *stuck]) if not alive
                    for e in self.envs[lo:hi]]:
            env.close()
