"""Collecting a rollout: the policy steps the vectorized envs and fills a ``RolloutStorage``.

One function for every caller (``main.py``, the asynchronous sampler, the scale-out workers), so
the handling of episode ends and truncation lives in one place.

Per step, with the policy on a GPU: the observations, rewards and masks cross to it
asynchronously from pinned memory (``to_device``), and the only wait for it is taking the
actions back to step the envs; the episode flags stay on the host, in numpy.
"""
import numpy as np
import torch

from a2c_ppo_acktr.envs.torch_vec import to_device


def episode_masks(terminated, truncated, device=torch.device("cpu")):
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
    both = to_device(both, device)  # (2, N, 1)
    return both[0], both[1], truncated


def truncation_values(actor_critic, infos, truncated, rnn_hxs):
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
    with torch.inference_mode():
        return actor_critic.act(rollouts.obs[step, columns],
                                rollouts.recurrent_hidden_states[step, columns],
                                rollouts.masks[step, columns])


def _store(results, acted, actor_critic, rollouts, episode_rewards, use_proper_time_limits,
           timeouts, columns=slice(None), advance=True):
    """Record one step's ``results`` (of ``envs.step`` or ``recv``) for the envs ``columns``,
    which acted with ``acted`` (``actor_critic.act``'s output)."""
    obs, reward, terminated, truncated, infos = results
    value, action, action_log_prob, rnn_hxs = acted
    first = columns.start or 0
    for i, info in enumerate(infos):
        if "episode" in info:
            episode_rewards.append(float(info["episode"]["r"]))
        if "timeouts" in info and timeouts is not None:
            timeouts[first + i] = info["timeouts"]
    masks, bad_masks, truncated = episode_masks(terminated, truncated, rnn_hxs.device)
    bootstrap = None
    if use_proper_time_limits and truncated.any():
        bootstrap = truncation_values(actor_critic, infos, truncated, rnn_hxs)
    rollouts.insert(obs, rnn_hxs, action, action_log_prob, value, reward, masks, bad_masks,
                    bootstrap, columns, advance)


def collect_rollout(envs, actor_critic, rollouts, episode_rewards, use_proper_time_limits,
                    timeouts=None):
    """Step the envs ``rollouts.num_steps`` times with the current policy, filling ``rollouts``.

    Finished episodes' raw returns go to ``episode_rewards``; real-time envs report their count of
    late steps (time-outs), kept per env in ``timeouts``. Envs in groups (``envs.num_groups`` >
    1) are pipelined: the policy acts on one group while the others step.
    """
    record = (actor_critic, rollouts, episode_rewards, use_proper_time_limits, timeouts)
    if getattr(envs, "num_groups", 1) > 1:
        return _collect_pipelined(envs, *record)
    for step in range(rollouts.num_steps):
        acted = _act(actor_critic, rollouts, step, slice(None))
        _store(envs.step(acted[1]), acted, *record)


def _collect_pipelined(envs, actor_critic, rollouts, *rest):
    """``collect_rollout`` over G groups of envs: the same transitions, masks and storage, but
    while group g steps (ALE's threads), the policy acts on group g + 1 in this thread.

    Step t of group g is received, stored and acted on right before group g + 1's, so each
    forward overlaps with the stepping of the other groups.
    """
    groups = [envs.group_slice(g) for g in range(envs.num_groups)]
    acted = [None] * len(groups)
    last = len(groups) - 1
    for step in range(rollouts.num_steps + 1):
        for g, columns in enumerate(groups):
            if step > 0:
                _store(envs.recv(g), acted[g], actor_critic, rollouts, *rest, columns, g == last)
            if step < rollouts.num_steps:
                acted[g] = _act(actor_critic, rollouts, step, columns)
                envs.send(acted[g][1], g)
