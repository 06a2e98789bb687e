"""Collecting rollouts: the policy steps the vectorized envs and fills a ``RolloutStorage``.

``collect_rollout`` is the one function every sampling mode runs (in this process, in the
asynchronous sampler's thread, in Ray workers, on DDP ranks), so the handling of episode ends and
truncation lives in one place. ``Collector`` is the training loop's one view of sampling, chosen
once at start-up (``run.build.build_collector``).

Per step, with the policy on a GPU: the observations, rewards and masks cross to it
asynchronously from pinned memory (``to_device``), and the only wait for it is taking the
actions back to step the envs; the episode flags stay on the host, in numpy.
"""
from collections import deque
from typing import Any, NamedTuple

import numpy as np
import torch

from a2c_ppo_acktr.envs import normalizer_state
from a2c_ppo_acktr.envs.torch_vec import to_device
from a2c_ppo_acktr.model import Policy
from a2c_ppo_acktr.realtime import mean_benchmarks
from a2c_ppo_acktr.storage import RolloutStorage


def episode_masks(terminated: np.ndarray, truncated: np.ndarray,
                  device: torch.device | str = torch.device("cpu")
                  ) -> tuple[torch.Tensor, torch.Tensor, np.ndarray]:
    """Host flags (N,) -> masks (N, 1), bad_masks (N, 1) float32 on ``device``, truncated (N,)
    numpy bool.

    ``masks`` are 0 where the episode ended (either way), ``bad_masks`` 0 where a time limit cut
    it; ``truncated`` excludes episodes that terminated on their last allowed step (those ended
    by the task, not the clock). Done in numpy (on N flags each torch op would cost more than the
    whole of this), and both masks cross to ``device`` in one copy.
    """
    terminated, truncated = np.asarray(terminated), np.asarray(truncated)
    truncated = truncated & ~terminated
    both = np.stack((~(terminated | truncated), ~truncated)).astype(np.float32)[:, :, None]
    masks = to_device(both, torch.device(device))  # (2, N, 1)
    return masks[0], masks[1], truncated


def truncation_values(actor_critic: Policy, infos: list[dict], truncated: np.ndarray,
                      rnn_hxs: torch.Tensor) -> torch.Tensor:
    """Values of the real final observations of the envs cut by a time limit (``truncated``,
    (N,) numpy bool) -> (N, 1).

    The vector env has already reset those envs; it kept each final observation in
    ``infos[i]["final_obs"]`` (normalized like any observation).
    """
    values = torch.zeros(truncated.shape[0], 1, device=rnn_hxs.device)
    idx = np.flatnonzero(truncated).tolist()
    final_obs = torch.stack([infos[i]["final_obs"] for i in idx])
    with torch.inference_mode():
        values[idx] = actor_critic.get_value(
            final_obs, rnn_hxs[idx], torch.ones(len(idx), 1, device=rnn_hxs.device))
    return values


def _act(actor_critic, rollouts, step, columns):
    """The policy acts for the envs ``columns`` at ``step``: ``act_step`` is ``Policy.act``, or
    its compiled copy under ``--compile``."""
    with torch.inference_mode():
        return actor_critic.act_step(rollouts.obs[step, columns],
                                     rollouts.recurrent_hidden_states[step, columns],
                                     rollouts.masks[step, columns])


class _Target(NamedTuple):
    """Where one ``collect_rollout`` call records its steps, and how (its arguments but the envs)."""

    actor_critic: Policy
    rollouts: RolloutStorage
    episode_rewards: list[float] | deque[float]
    use_proper_time_limits: bool
    timeouts: list[int | None] | None


def _store(target: _Target, results: tuple, acted: tuple, *, columns: slice = slice(None),
           advance: bool = True) -> None:
    """Record one step's ``results`` (of ``envs.step`` or ``recv``) for the envs ``columns``,
    which acted with ``acted`` (``actor_critic.act``'s output)."""
    obs, reward, terminated, truncated, infos = results
    value, action, action_log_prob, rnn_hxs = acted
    first = columns.start or 0
    for i, info in enumerate(infos):
        if "episode" in info:
            target.episode_rewards.append(float(info["episode"]["r"]))
        if "timeouts" in info and target.timeouts is not None:
            target.timeouts[first + i] = info["timeouts"]
    masks, bad_masks, truncated = episode_masks(terminated, truncated, rnn_hxs.device)
    bootstrap = None
    if target.use_proper_time_limits and truncated.any():
        bootstrap = truncation_values(target.actor_critic, infos, truncated, rnn_hxs)
    target.rollouts.insert(obs, rnn_hxs, action, action_log_prob, value, reward, masks, bad_masks,
                           bootstrap_values=bootstrap, columns=columns, advance=advance)


def collect_rollout(envs: Any, actor_critic: Policy, rollouts: RolloutStorage,
                    episode_rewards: list[float] | deque[float], use_proper_time_limits: bool,
                    timeouts: list[int | None] | None = None) -> None:
    """Step the envs ``rollouts.num_steps`` times with the current policy, filling ``rollouts``.

    Finished episodes' raw returns go to ``episode_rewards``; real-time envs report their count of
    late steps (time-outs), kept per env in ``timeouts``. Envs in groups (``envs.num_groups`` >
    1) are pipelined: the policy acts on one group while the others step.
    """
    target = _Target(actor_critic, rollouts, episode_rewards, use_proper_time_limits, timeouts)
    if getattr(envs, "num_groups", 1) > 1:
        return _collect_pipelined(envs, target)
    for step in range(rollouts.num_steps):
        acted = _act(actor_critic, rollouts, step, slice(None))
        _store(target, envs.step(acted[1]), acted)


def _collect_pipelined(envs: Any, target: _Target) -> None:
    """``collect_rollout`` over G groups of envs: the same transitions, masks and storage, but
    while group g steps (ALE's threads), the policy acts on group g + 1 in this thread.

    Step t of group g is received, stored and acted on right before group g + 1's, so each
    forward overlaps with the stepping of the other groups.
    """
    actor_critic, rollouts = target.actor_critic, target.rollouts
    groups = [envs.group_slice(g) for g in range(envs.num_groups)]
    acted: list[tuple | None] = [None] * len(groups)  # per group: its last act's output
    last = len(groups) - 1
    # One intra-op thread for these small forwards: the other cores are ALE's, stepping the
    # other groups meanwhile; more threads here only contend with them (docs/benchmarks.md,
    # "PPO Pong (case d) against SB3").
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        for step in range(rollouts.num_steps + 1):
            for g, columns in enumerate(groups):
                if step > 0:
                    previous = acted[g]
                    assert previous is not None  # it acted at step - 1
                    _store(target, envs.recv(g), previous, columns=columns, advance=g == last)
                if step < rollouts.num_steps:
                    act = acted[g] = _act(actor_critic, rollouts, step, columns)
                    envs.send(act[1], g)
    finally:
        torch.set_num_threads(threads)  # the update's


class Collector:
    """The training loop's one view of sampling: ``collect`` fills a ``RolloutStorage`` with
    ``collect_rollout`` in this process, between updates.

    Per update the loop calls ``rollouts = collect(actor_critic)``, trains on ``rollouts``, then
    ``sync(actor_critic, rollouts)``, which hands the storage back with the new weights; ``stats``
    gives the progress log's columns, ``close`` ends it. The subclasses (``DDPCollector``,
    ``AsyncCollector``, ``RayCollector``: docs/design.md, "Start-up (`run/start.open_run`, once)") change
    where and when the envs are stepped, never what a rollout holds. ``envs`` comes from
    ``make_vec_envs`` (or is a ``WorkerGroup``); its first observations go in slot 0 of a storage
    of ``num_steps`` steps on ``device``. What an exact resume saves of it: ``run.resume``.
    """

    # Why this sampling mode cannot save and restore its envs' state (None: it can).
    inexact: str | None = None

    def __init__(self, envs: Any, actor_critic: Policy, num_steps: int,
                 use_proper_time_limits: bool, device: torch.device | str) -> None:
        self.envs = envs
        self.num_envs: int = envs.num_envs
        self.observation_space, self.action_space = envs.observation_space, envs.action_space
        self.use_proper_time_limits = use_proper_time_limits
        self.episode_returns: deque[float] = deque(maxlen=10)  # raw, of the last episodes ended
        self.timeouts: list[int | None] = [None] * self.num_envs  # real-time envs: late steps
        obs = envs.reset()
        self.rollouts = RolloutStorage(num_steps, self.num_envs, self.observation_space.shape,
                                       self.action_space, actor_critic.recurrent_hidden_state_size,
                                       obs_dtype=obs.dtype).to(device)
        self.rollouts.obs[0].copy_(obs)
        self.realtime = any(b is not None for b in envs.benchmarks())
        envs.pause()  # real-time envs hold still until the first step: the set-up took a while

    @property
    def obs_rms(self) -> dict | None:
        """The normalizer's statistics as of the end of the last rollout (checkpoints, evaluation)."""
        return normalizer_state(self.envs)

    def collect(self, actor_critic: Policy) -> RolloutStorage:
        """One rollout of ``num_steps`` x ``num_envs`` transitions by ``actor_critic``."""
        collect_rollout(self.envs, actor_critic, self.rollouts, self.episode_returns,
                        self.use_proper_time_limits, self.timeouts)
        # Real-time envs cannot wait for the update: they hold still (default action, clock
        # stopped) until the next step instead of timing out. No-op for other envs.
        self.envs.pause()
        return self.rollouts

    def sync(self, actor_critic: Policy, rollouts: RolloutStorage) -> None:
        """After the update: the rollout's last state starts the next one."""
        rollouts.after_update()

    def _benchmarks(self) -> list[dict | None]:
        """Per env: real-time timing statistics (``RealTimeEnv.benchmarks()``) or None."""
        return self.envs.benchmarks()

    def stats(self) -> dict:
        """Progress-log columns, the same in every mode: time-outs, policy lag, sampler stalls,
        and for real-time envs their timing statistics (seconds, mean over envs)."""
        row: dict[str, float] = {"timeouts": sum(t for t in self.timeouts if t is not None),
               "policy_lag": 0, "sampler_stalls": 0}
        if self.realtime:
            row.update(mean_benchmarks(self._benchmarks()))
        return row

    def close(self) -> None:
        self.envs.close()
