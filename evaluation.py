"""Evaluate a policy on fresh envs with the training run's observation statistics frozen."""
import numpy as np
import torch

from a2c_ppo_acktr.envs import get_vec_normalize, make_vec_envs


def evaluate(actor_critic, obs_rms, env_name, seed, num_processes, eval_log_dir, device,
             num_episodes=10, deterministic=True, env_kwargs=None):
    """Run ``num_episodes`` episodes and return their raw returns (a list of floats).

    ``obs_rms`` is the training normalizer's state (``VecNormalize.state_dict()``) or None for
    envs without one (images: the original crashed here on Atari). ``env_kwargs`` go to
    ``gym.make``, as in training. Atari episodes are whole games (no episodic life).
    """
    eval_envs = make_vec_envs(env_name, seed + num_processes, num_processes, None,
                              eval_log_dir, device, True, env_kwargs=env_kwargs,
                              episodic_life=False)
    vec_norm = get_vec_normalize(eval_envs)
    if vec_norm is not None:
        vec_norm.eval()
        if obs_rms is not None:
            vec_norm.load_state_dict(obs_rms)

    episode_returns = []
    obs = eval_envs.reset()
    rnn_hxs = torch.zeros(num_processes, actor_critic.recurrent_hidden_state_size, device=device)
    masks = torch.zeros(num_processes, 1, device=device)
    try:
        while len(episode_returns) < num_episodes:
            with torch.inference_mode():
                _, action, _, rnn_hxs = actor_critic.act(obs, rnn_hxs, masks,
                                                         deterministic=deterministic)
            obs, _, terminated, truncated, infos = eval_envs.step(action)
            masks = (~(terminated | truncated)).float().unsqueeze(1).to(device)  # host flags
            for info in infos:
                if "episode" in info:
                    episode_returns.append(float(info["episode"]["r"]))
    finally:
        eval_envs.close()

    print(f" Evaluation using {len(episode_returns)} episodes: mean reward "
          f"{np.mean(episode_returns):.5f}")
    return episode_returns[:num_episodes]
