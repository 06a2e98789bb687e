"""Asynchronous rollouts: a sampler thread steps the envs while the learner updates.

    sampler thread:  rollout 0 | rollout 1 | rollout 2 | rollout 3 | ...
    learner (main):             | update 0  | update 1  | update 2  | ...

Rollout k + 1 is collected with the weights from before update k: a policy lag of one update
(zero for rollout 0). Two ``RolloutStorage`` buffers alternate: the sampler fills one while the
learner trains on the other and hands it back with its new weights. The threads overlap where one
waits outside the GIL (torch ops, ``ShmemVecEnv``'s pipes). What the lag means for each algorithm
and when it pays: docs/scale-out.md, "Asynchronous rollouts".
"""
import copy
import queue
import threading
from typing import Any, NamedTuple, Optional

import torch

from a2c_ppo_acktr.envs import VecEnvWrapper, normalizer_state
from a2c_ppo_acktr.model import Policy
from a2c_ppo_acktr.rollout import Collector, collect_rollout
from a2c_ppo_acktr.storage import RolloutStorage


class _Stopped(Exception):
    """Raised in the sampler thread by the next env step after ``AsyncCollector.close()``."""


class _StoppableEnvs(VecEnvWrapper):
    """Lets ``close()`` end the thread within one env step, even in the middle of a rollout."""

    def __init__(self, venv, stop):
        super().__init__(venv)
        self._stop = stop
        self.num_groups = getattr(venv, "num_groups", 1)

    def step(self, actions):
        if self._stop.is_set():
            raise _Stopped
        return self.venv.step(actions)

    def send(self, actions, group=0):
        if self._stop.is_set():
            raise _Stopped
        self.venv.send(actions, group)

    def recv(self, group=0):
        return self.venv.recv(group)

    def group_slice(self, group):
        return self.venv.group_slice(group)


class RolloutInfo(NamedTuple):
    """What the sampler knew when it finished a rollout, handed to the learner with it."""

    episode_returns: list    # raw returns of the episodes that ended in the rollout
    timeouts: list           # per env: real-time late-step count, or None
    obs_rms: Optional[dict]  # normalizer state at the rollout's end (for checkpoints, evaluation)
    benchmarks: list         # per env: RealTimeEnv.benchmarks() or None
    version: int             # updates the acting weights had seen


class AsyncCollector(Collector):
    """Collects ``num_rollouts`` rollouts in a daemon thread with ``behaviour``, a second policy of
    the same architecture as the learner's ``actor_critic``, whose weights it loads now and after
    each update (``sync``).

    A second storage like ``self.rollouts`` is made here; the thread starts on the first at once.
    It owns the envs until ``close()``: the learner must not step them, and reads the normalizer
    statistics and real-time benchmarks as of the end of the rollout it was last given. When the
    learner is slower than a whole rollout the sampler has no free buffer: it pauses the envs
    (real-time envs hold still, no time-out) and counts a stall.
    """

    inexact = "--async-rollouts: the sampler thread's envs are a rollout ahead of the saved weights"

    def __init__(self, envs: Any, actor_critic: Policy, behaviour: Policy, num_steps: int,
                 use_proper_time_limits: bool, device: torch.device | str,
                 num_rollouts: int) -> None:
        super().__init__(envs, actor_critic, num_steps, use_proper_time_limits, device)
        self.behaviour = behaviour.requires_grad_(False)
        self.behaviour.load_state_dict(actor_critic.state_dict())
        self.policy_lag = 0   # of the rollout last given to the learner
        self.lags: list[int] = []  # of every rollout given, in order
        self.stalls = 0       # rollouts the sampler had to wait for a free buffer
        self._obs_rms = normalizer_state(envs)
        self._last_benchmarks = envs.benchmarks()
        self._updates = 0
        self._stop = threading.Event()
        self._envs = _StoppableEnvs(envs, self._stop)
        self._num_threads = torch.get_num_threads()
        # (rollouts, RolloutInfo) or the exception that ended the thread
        self._ready: queue.Queue[tuple[RolloutStorage, RolloutInfo] | BaseException] = queue.Queue()
        # (rollouts, weights or None, version) or None: stop
        self._free: queue.Queue[tuple[RolloutStorage, dict | None, int] | None] = queue.Queue()
        self._free.put((copy.deepcopy(self.rollouts), None, 0))
        self._thread = threading.Thread(target=self._run, args=(self.rollouts, num_rollouts),
                                        daemon=True, name="sampler")
        self._thread.start()

    def _run(self, rollouts, num_rollouts):
        # torch.set_num_threads reaches OpenMP in the calling thread only: left alone, this one
        # would run small matmuls on a team of all cores, and waking that team costs more than
        # the forward on a busy machine (docs/benchmarks.md, "Measured code choices").
        torch.set_num_threads(self._num_threads)
        version = 0
        try:
            for k in range(num_rollouts):
                if k > 0:
                    rollouts, version = self._next_buffer(rollouts, version)
                returns, timeouts = [], [None] * rollouts.obs.shape[1]
                collect_rollout(self._envs, self.behaviour, rollouts, returns,
                                self.use_proper_time_limits, timeouts)
                self._ready.put((rollouts, RolloutInfo(
                    returns, timeouts, normalizer_state(self._envs), self._envs.benchmarks(),
                    version)))
        except _Stopped:
            pass
        except BaseException as e:  # an env failed: the learner re-raises it
            self._ready.put(e)

    def _next_buffer(self, last, version):
        """A buffer the learner is done with, starting where ``last`` ended, and the newest weights."""
        try:
            item = self._free.get_nowait()
        except queue.Empty:
            self.stalls += 1
            self._envs.pause()  # real-time envs hold still instead of timing out
            item = self._free.get()
        if item is None:
            raise _Stopped
        rollouts, weights, new_version = item
        if weights is not None:
            self.behaviour.load_state_dict(weights)
            version = new_version
        last.after_update(rollouts)
        return rollouts, version

    def collect(self, actor_critic: Policy) -> RolloutStorage:
        """The next rollout the thread finished (by weights one update older than
        ``actor_critic``'s, the first excepted); its episode returns and time-out counts are
        added to ``episode_returns`` and ``timeouts``."""
        item = self._ready.get()
        if isinstance(item, BaseException):
            self._stop_thread()
            raise item
        rollouts, info = item
        self.episode_returns.extend(info.episode_returns)
        for i, t in enumerate(info.timeouts):
            if t is not None:
                self.timeouts[i] = t
        self.policy_lag = self._updates - info.version
        self.lags.append(self.policy_lag)
        self._obs_rms, self._last_benchmarks = info.obs_rms, info.benchmarks
        return rollouts

    def sync(self, actor_critic: Policy, rollouts: RolloutStorage) -> None:
        """Give ``rollouts`` back after an update, with the updated weights for the sampler."""
        self._updates += 1
        weights = {k: v.detach().clone() for k, v in actor_critic.state_dict().items()}
        self._free.put((rollouts, weights, self._updates))

    @property
    def obs_rms(self) -> dict | None:
        """As of the end of the rollout last given: the thread keeps updating the live one."""
        return self._obs_rms

    def _benchmarks(self) -> list[dict | None]:
        return list(self._last_benchmarks)

    def stats(self) -> dict:
        return {**super().stats(), "policy_lag": self.policy_lag, "sampler_stalls": self.stalls}

    def _stop_thread(self, timeout: float = 10.0) -> None:
        """Stop the thread (within one env step) and wait for it; the envs stay open."""
        self._stop.set()
        self._free.put(None)
        self._thread.join(timeout)

    def close(self) -> None:
        self._stop_thread()
        super().close()
