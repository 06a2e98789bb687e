"""Collecting a rollout: the policy steps the vectorized envs and fills a ``RolloutStorage``.

One function for every caller (``main.py``, the asynchronous sampler, the scale-out workers), so
the handling of episode ends and truncation lives in one place.
"""
import torch


def truncation_values(actor_critic, infos, truncated, rnn_hxs):
    """Values of the real final observations of the envs cut by a time limit -> (N, 1).

    The vector env has already reset those envs; it kept each final observation in
    ``infos[i]["final_obs"]`` (normalized like any observation).
    """
    values = torch.zeros(truncated.shape[0], 1, device=rnn_hxs.device)
    idx = truncated.nonzero().squeeze(1)
    final_obs = torch.stack([infos[i]["final_obs"] for i in idx.tolist()])
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

        # An episode that terminated on its last allowed step ended by the task, not the clock.
        truncated = truncated & ~terminated
        masks = (~(terminated | truncated)).float().unsqueeze(1)   # (N, 1)
        bad_masks = (~truncated).float().unsqueeze(1)              # (N, 1)
        bootstrap = None
        if use_proper_time_limits and bool(truncated.any()):
            bootstrap = truncation_values(actor_critic, infos, truncated, rnn_hxs)
        rollouts.insert(obs, rnn_hxs, action, action_log_prob, value, reward, masks, bad_masks,
                        bootstrap)
