"""Advantage actor-critic (A2C, synchronous A3C) and ACKTR on the whole rollout as one batch."""
from typing import Any

import torch

from a2c_ppo_acktr.algo.agent import BaseAgent
from a2c_ppo_acktr.algo.kfac import KFACOptimizer
from a2c_ppo_acktr.errors import ConfigError
from a2c_ppo_acktr.model import Policy
from a2c_ppo_acktr.storage import RolloutStorage


class A2C_ACKTR(BaseAgent):
    """A2C with RMSprop, or ``acktr=True``: ACKTR, the same loss with the K-FAC optimizer.

    One gradient step per rollout on
    ``value_loss_coef * E[(R - V)^2] - E[A * log pi(a|s)] - entropy_coef * H``. ACKTR builds
    ``KFACOptimizer(actor_critic, **kfac)`` (K-FAC's defaults where ``kfac`` is silent) and ignores
    ``lr``, ``eps``, ``alpha`` and ``max_grad_norm``; its Fisher statistics come from the sampled
    Fisher loss (docs/details.md, "ACKTR"), and its ``update`` adds ``kl_clip_scale`` to the
    statistics: the factor the KL clip scaled the step by (1: it did not bind).
    ``lr_decay_horizon``: linear decay of the lr (K-FAC's under ACKTR) to 0 at that many env
    steps. ``generator`` draws ACKTR's
    sampled Fisher loss (None: torch's global generator).
    """

    def __init__(self, actor_critic: Policy, value_loss_coef: float, entropy_coef: float,
                 lr: float | None = None, eps: float | None = None, alpha: float | None = None,
                 max_grad_norm: float | None = None, acktr: bool = False,
                 lr_decay_horizon: int | None = None, kfac: dict[str, Any] | None = None,
                 generator: torch.Generator | None = None) -> None:
        self.actor_critic = actor_critic
        self.acktr = acktr
        self.value_loss_coef = value_loss_coef
        self.entropy_coef = entropy_coef
        self.max_grad_norm = max_grad_norm
        self.generator = generator
        # The list, once: listing a module's parameters walks its submodules on every call.
        self.params = list(actor_critic.parameters())
        # ACKTR's optimizer, for its Fisher statistics (the same object as self.optimizer).
        self.kfac = KFACOptimizer(actor_critic, **(kfac or {})) if acktr else None
        self.optimizer: torch.optim.Optimizer
        if self.kfac is not None:
            self.optimizer = self.kfac
        elif lr is None or eps is None or alpha is None or max_grad_norm is None:
            raise ConfigError(f"A2C needs lr, eps, alpha and max_grad_norm; got lr={lr}, eps={eps}, "
                              f"alpha={alpha}, max_grad_norm={max_grad_norm}")
        else:
            # foreach=False: the single-tensor step on every device (CUDA's default is foreach),
            # the numbers A2C has always had.
            self.optimizer = torch.optim.RMSprop(self.params, lr, eps=eps, alpha=alpha,
                                                 foreach=False)
        # ACKTR decays K-FAC's own lr: --lr is not used by it.
        self._init_lr_decay(self.optimizer, lr_decay_horizon)

    def update(self, rollouts: RolloutStorage) -> dict[str, float]:
        """One gradient step on the whole rollout (returns computed); -> value_loss,
        action_loss, entropy (and ACKTR's kl_clip_scale)."""
        T, N, _ = rollouts.rewards.shape

        def flat(x: torch.Tensor) -> torch.Tensor:  # (T or T+1, N, ...) -> (T * N, ...)
            return x[:T].reshape(T * N, *x.shape[2:])

        fisher = self.kfac is not None and self.kfac.steps % self.kfac.Ts == 0
        if self.kfac is not None:
            self.kfac.acc_stats = fisher  # the K-FAC hooks record this forward pass
        try:
            # self.loss: this method, or its compiled copy (speed.py)
            loss, stats, fisher_loss = self.loss(
                flat(rollouts.obs), rollouts.recurrent_hidden_states[0], flat(rollouts.masks),
                flat(rollouts.actions), flat(rollouts.returns), fisher)
            if fisher_loss is not None:  # with ``fisher``
                self.optimizer.zero_grad(set_to_none=True)
                fisher_loss.backward(retain_graph=True)
        finally:
            if self.kfac is not None:
                self.kfac.acc_stats = False

        self.optimizer.zero_grad()
        loss.backward()
        if self.kfac is None:  # K-FAC bounds its step by the KL clip instead
            self.clip_grad_norm()
        self.optimizer.step()
        value_loss, action_loss, entropy = stats.tolist()
        out = {"value_loss": value_loss, "action_loss": action_loss, "entropy": entropy}
        if self.kfac is not None:
            out["kl_clip_scale"] = self.kfac.nu
        return out

    def terms(self, obs: torch.Tensor, rnn_hxs: torch.Tensor, masks: torch.Tensor,
              actions: torch.Tensor, returns: torch.Tensor
              ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, Any]:
        """The loss's terms on a rollout flattened time-major to (T * N, ...) (``rnn_hxs``: (N, H),
        the state before its first step) -> value_loss, action_loss, dist_entropy (scalars, with
        their graphs), the values (T * N, 1) and the policy's distribution."""
        values, actor_features, _ = self.actor_critic.forward_base(obs, rnn_hxs, masks)
        dist = self.actor_critic.dist(actor_features)
        advantages = returns - values
        value_loss = advantages.pow(2).mean()
        action_loss = -(advantages.detach() * dist.log_probs(actions)).mean()
        return value_loss, action_loss, dist.entropy().mean(), values, dist

    def loss(self, obs: torch.Tensor, rnn_hxs: torch.Tensor, masks: torch.Tensor,
             actions: torch.Tensor, returns: torch.Tensor, fisher: bool = False
             ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """The loss (``terms``) to minimise, (detached) its value_loss, action_loss and
        dist_entropy, and with ``fisher`` (ACKTR) the sampled Fisher loss."""
        value_loss, action_loss, dist_entropy, values, dist = self.terms(
            obs, rnn_hxs, masks, actions, returns)
        loss = value_loss * self.value_loss_coef + action_loss - dist_entropy * self.entropy_coef

        fisher_loss = None
        if fisher:
            # The Fisher of the policy is E over actions sampled from it, not the taken ones.
            # Without a generator of its own, the original's call (any head's distribution).
            own = {} if self.generator is None else {"generator": self.generator}
            sampled = dist.sample(**own).detach()
            pg_fisher_loss = -dist.log_probs(sampled).mean()
            value_noise = torch.randn(values.size(), generator=self.generator,
                                      device=values.device)
            sample_values = values + value_noise
            vf_fisher_loss = -(values - sample_values.detach()).pow(2).mean()
            fisher_loss = pg_fisher_loss + vf_fisher_loss
        return loss, torch.stack([value_loss, action_loss, dist_entropy]).detach(), fisher_loss
