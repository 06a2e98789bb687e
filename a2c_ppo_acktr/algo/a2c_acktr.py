"""Advantage actor-critic (A2C, synchronous A3C) and ACKTR on the whole rollout as one batch."""
import torch
import torch.nn as nn
import torch.optim as optim

from a2c_ppo_acktr.algo.agent import LinearDecay
from a2c_ppo_acktr.algo.kfac import KFACOptimizer
from a2c_ppo_acktr.model import Policy
from a2c_ppo_acktr.storage import RolloutStorage


class A2C_ACKTR:
    """A2C with RMSprop, or ``acktr=True``: ACKTR, the same loss with the K-FAC optimizer.

    One gradient step per rollout on the loss
    ``value_loss_coef * E[(R - V)^2] - E[A * log pi(a|s)] - entropy_coef * H``.

    ACKTR (as the original) builds ``KFACOptimizer(actor_critic)`` with its own defaults
    (lr 0.25, momentum 0.9, kl_clip 0.001, damping 0.01, stat_decay 0.99): ``lr``, ``eps``,
    ``alpha`` and ``max_grad_norm`` are ignored (the KL clip bounds the step instead of gradient
    clipping). Before each step the Fisher statistics are accumulated from the backward pass of
    the sampled Fisher loss ``-E[log pi(a~|s)] - E[(V - (V + noise))^2]`` with actions ``a~``
    drawn from the current policy and unit Gaussian noise on the values. ``lr_decay_horizon``:
    the original's linear decay to 0 at that many env steps (``adjust_lr``).
    """

    def __init__(self, actor_critic: Policy, value_loss_coef: float, entropy_coef: float,
                 lr: float | None = None, eps: float | None = None, alpha: float | None = None,
                 max_grad_norm: float | None = None, acktr: bool = False,
                 lr_decay_horizon: int | None = None) -> None:
        self.actor_critic = actor_critic
        self.acktr = acktr
        self.value_loss_coef = value_loss_coef
        self.entropy_coef = entropy_coef
        self.max_grad_norm = max_grad_norm
        if acktr:
            self.optimizer = KFACOptimizer(actor_critic)
        else:
            # foreach: one call for all parameters; on the CPU torch defaults to a Python loop
            # over them, which costs more than the arithmetic for small networks.
            self.optimizer = optim.RMSprop(actor_critic.parameters(), lr, eps=eps, alpha=alpha,
                                           foreach=True)
        # ACKTR decays K-FAC's own lr: --lr is not used by it.
        self.lr_decay = LinearDecay(self.optimizer, lr_decay_horizon) if lr_decay_horizon else None
        self.stats: dict[str, float] = {}

    def adjust_lr(self, env_steps: int) -> None:
        """The linear decay's step (``lr_decay_horizon``), if any."""
        if self.lr_decay is not None:
            self.lr_decay(env_steps)

    def update(self, rollouts: RolloutStorage) -> tuple[float, float, float]:
        """One gradient step on the whole rollout (returns computed); -> value_loss,
        action_loss, dist_entropy."""
        obs_shape = rollouts.obs.shape[2:]
        action_dim = rollouts.actions.shape[-1]
        T, N, _ = rollouts.rewards.shape

        fisher = self.acktr and self.optimizer.steps % self.optimizer.Ts == 0
        if self.acktr:
            self.optimizer.acc_stats = fisher  # the K-FAC hooks record this forward pass
        try:
            values, actor_features, _ = self.actor_critic.base(
                rollouts.obs[:-1].reshape(-1, *obs_shape),
                rollouts.recurrent_hidden_states[0],
                rollouts.masks[:-1].reshape(-1, 1))
            dist = self.actor_critic.dist(actor_features)
            action_log_probs = dist.log_probs(rollouts.actions.reshape(-1, action_dim))
            dist_entropy = dist.entropy().mean()

            if fisher:
                # The Fisher of the policy is E over actions sampled from it, not the taken ones.
                sampled = dist.sample().detach()
                pg_fisher_loss = -dist.log_probs(sampled).mean()
                value_noise = torch.randn(values.size(), device=values.device)
                sample_values = values + value_noise
                vf_fisher_loss = -(values - sample_values.detach()).pow(2).mean()
                fisher_loss = pg_fisher_loss + vf_fisher_loss
                self.optimizer.zero_grad(set_to_none=True)
                fisher_loss.backward(retain_graph=True)
        finally:
            if self.acktr:
                self.optimizer.acc_stats = False

        values = values.view(T, N, 1)
        action_log_probs = action_log_probs.view(T, N, 1)
        advantages = rollouts.returns[:-1] - values
        value_loss = advantages.pow(2).mean()
        action_loss = -(advantages.detach() * action_log_probs).mean()

        self.optimizer.zero_grad(set_to_none=True)
        (value_loss * self.value_loss_coef + action_loss
         - dist_entropy * self.entropy_coef).backward()
        if not self.acktr:
            nn.utils.clip_grad_norm_(self.actor_critic.parameters(), self.max_grad_norm, foreach=True)
        self.optimizer.step()
        return value_loss.item(), action_loss.item(), dist_entropy.item()
