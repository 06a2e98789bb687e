"""Collecting a rollout: the policy steps the vectorized envs and fills a ``RolloutStorage``.

One function for every caller (``main.py``, the asynchronous sampler, the scale-out workers), so
the handling of episode ends and truncation lives in one place.
"""
import numpy as np
import torch


def episode_masks(terminated, truncated):
    """-> masks (N, 1), bad_masks (N, 1) float32 CPU tensors, truncated (N,) numpy bool.

    ``masks`` are 0 where the episode ended (either way), ``bad_masks`` 0 where a time limit cut
    it; ``truncated`` excludes episodes that terminated on their last allowed step (those ended
    by the task, not the clock). Done in numpy: on N flags each torch op would cost more than
    the whole of this; ``RolloutStorage.insert`` copies them to its device.
    """
    terminated, truncated = terminated.cpu().numpy(), truncated.cpu().numpy()
    truncated = truncated & ~terminated
    masks = torch.from_numpy((~(terminated | truncated)).astype(np.float32)[:, None])
    bad_masks = torch.from_numpy((~truncated).astype(np.float32)[:, None])
    return masks, bad_masks, truncated


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


def collect_rollout(envs, actor_critic, rollouts, episode_rewards, use_proper_time_limits,
                    timeouts=None):
    """Step the envs ``rollouts.num_steps`` times with the current policy, filling ``rollouts``.

    Finished episodes' raw returns go to ``episode_rewards``; real-time envs report their count of
    late steps (time-outs), kept per env in ``timeouts``.
    """
    for step in range(rollouts.num_steps):
        with torch.inference_mode():
            value, action, action_log_prob, rnn_hxs = actor_critic.act(
                rollouts.obs[step], rollouts.recurrent_hidden_states[step], rollouts.masks[step])

        obs, reward, terminated, truncated, infos = envs.step(action)
        for i, info in enumerate(infos):
            if "episode" in info:
                episode_rewards.append(float(info["episode"]["r"]))
            if "timeouts" in info and timeouts is not None:
                timeouts[i] = info["timeouts"]

        masks, bad_masks, truncated = episode_masks(terminated, truncated)
        bootstrap = None
        if use_proper_time_limits and truncated.any():
            bootstrap = truncation_values(actor_critic, infos, truncated, rnn_hxs)
        rollouts.insert(obs, rnn_hxs, action, action_log_prob, value, reward, masks, bad_masks,
                        bootstrap)
