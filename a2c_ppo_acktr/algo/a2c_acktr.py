"""Advantage actor-critic (A2C, synchronous A3C) on the whole rollout as one batch."""
import torch.nn as nn
import torch.optim as optim


class A2C_ACKTR:
    """A2C with RMSprop. ``acktr=True`` selects the K-FAC natural-gradient optimizer (ACKTR).

    One gradient step per rollout on the loss
    ``value_loss_coef * E[(R - V)^2] - E[A * log pi(a|s)] - entropy_coef * H``.
    """

    def __init__(self, actor_critic, value_loss_coef, entropy_coef, lr=None, eps=None,
                 alpha=None, max_grad_norm=None, acktr=False):
        if acktr:
            raise ValueError("acktr=True needs the K-FAC optimizer (algo/kfac.py), which this "
                             "version does not have yet; use --algo a2c or ppo")
        self.actor_critic = actor_critic
        self.acktr = acktr
        self.value_loss_coef = value_loss_coef
        self.entropy_coef = entropy_coef
        self.max_grad_norm = max_grad_norm
        self.optimizer = optim.RMSprop(actor_critic.parameters(), lr, eps=eps, alpha=alpha)
        self.stats = {}

    def update(self, rollouts):
        obs_shape = rollouts.obs.shape[2:]
        action_dim = rollouts.actions.shape[-1]
        T, N, _ = rollouts.rewards.shape

        values, action_log_probs, dist_entropy, _ = self.actor_critic.evaluate_actions(
            rollouts.obs[:-1].reshape(-1, *obs_shape),
            rollouts.recurrent_hidden_states[0],
            rollouts.masks[:-1].reshape(-1, 1),
            rollouts.actions.reshape(-1, action_dim))
        values = values.view(T, N, 1)
        action_log_probs = action_log_probs.view(T, N, 1)

        advantages = rollouts.returns[:-1] - values
        value_loss = advantages.pow(2).mean()
        action_loss = -(advantages.detach() * action_log_probs).mean()

        self.optimizer.zero_grad(set_to_none=True)
        (value_loss * self.value_loss_coef + action_loss
         - dist_entropy * self.entropy_coef).backward()
        nn.utils.clip_grad_norm_(self.actor_critic.parameters(), self.max_grad_norm)
        self.optimizer.step()
        return value_loss.item(), action_loss.item(), dist_entropy.item()
