"""Proximal Policy Optimization (Schulman et al. 2017), clipped surrogate objective."""
import torch

from a2c_ppo_acktr.algo.agent import BaseAgent
from a2c_ppo_acktr.errors import ConfigError
from a2c_ppo_acktr.model import Policy
from a2c_ppo_acktr.storage import Minibatch, RolloutStorage

ADVANTAGE_NORMS = ("batch", "minibatch", "none")
# The adaptive learning rate (rl_games' AdaptiveScheduler): its step and bounds.
KL_LR_FACTOR, KL_MIN_LR, KL_MAX_LR = 1.5, 1e-6, 1e-2
# ``loss``'s statistics (progress.csv's columns), stacked in one tensor so that an update syncs the
# device once.
STATS = ("value_loss", "action_loss", "entropy", "approx_kl", "clip_fraction")
KL = STATS.index("approx_kl")


def standardize(x: torch.Tensor) -> torch.Tensor:
    return (x - x.mean()) / (x.std() + 1e-5)


class PPO(BaseAgent):
    """PPO on a ``Policy``: ``ppo_epoch`` passes of ``num_mini_batch`` minibatches per rollout.

    ``advantage_norm``: standardize over the rollout ("batch", the original's), each minibatch
    ("minibatch") or not ("none"). ``desired_kl``: after each epoch the lr is divided by
    ``KL_LR_FACTOR`` if the epoch's mean ``approx_kl`` exceeded 2 * ``desired_kl``, multiplied by
    it if under half, within [``KL_MIN_LR``, ``KL_MAX_LR``]. ``lr_decay_horizon``: linear decay to
    0 at that many env steps. ``recompute_advantages``: values, returns and advantages again before
    each epoch after the first (``RolloutStorage.recompute_returns``; feed-forward only). ``rpo_alpha``:
    RPO's U(-rpo_alpha, rpo_alpha) noise on a Gaussian's mean in the loss (``Policy.evaluate_actions``). With
    ``Policy(value_norm=True)`` the value loss is in the head's units. ``update`` returns the means
    over its minibatches of ``STATS``, ``approx_kl`` being E[(r - 1) - log r]. The options' sources:
    docs/details.md, "Flags and run files". ``generator`` draws the minibatches (None: torch's
    global generator; a sampler thread drawing actions from that one makes its own necessary).
    """

    def __init__(self, actor_critic: Policy, clip_param: float, ppo_epoch: int,
                 num_mini_batch: int, value_loss_coef: float, entropy_coef: float,
                 lr: float | None = None, eps: float | None = None,
                 max_grad_norm: float | None = None, use_clipped_value_loss: bool = True,
                 advantage_norm: str = "batch", desired_kl: float | None = None,
                 lr_decay_horizon: int | None = None,
                 recompute_advantages: bool = False, rpo_alpha: float = 0.0,
                 generator: torch.Generator | None = None) -> None:
        if advantage_norm not in ADVANTAGE_NORMS:
            raise ConfigError(f"unknown advantage_norm {advantage_norm!r}; expected one of "
                             f"{', '.join(ADVANTAGE_NORMS)}")
        if lr is None or eps is None or max_grad_norm is None:  # the original's None defaults
            raise ConfigError(f"PPO needs lr, eps and max_grad_norm; got lr={lr}, eps={eps}, "
                              f"max_grad_norm={max_grad_norm}")
        if recompute_advantages and actor_critic.is_recurrent:
            raise ConfigError("recompute_advantages needs a feed-forward policy: a recurrent "
                              "one's values depend on hidden states kept from the old weights")
        self.advantage_norm = advantage_norm
        self.recompute_advantages = recompute_advantages
        self.rpo_alpha = rpo_alpha
        self.actor_critic = actor_critic
        self.clip_param = clip_param
        self.ppo_epoch = ppo_epoch
        self.num_mini_batch = num_mini_batch
        self.value_loss_coef = value_loss_coef
        self.entropy_coef = entropy_coef
        self.max_grad_norm = max_grad_norm
        self.use_clipped_value_loss = use_clipped_value_loss
        self.desired_kl = desired_kl
        self.generator = generator
        # The list, once: listing a module's parameters walks its submodules on every call.
        self.params = list(actor_critic.parameters())
        # fused: one kernel for all parameters instead of a Python loop over them.
        self.optimizer: torch.optim.Optimizer = torch.optim.Adam(self.params, lr=lr, eps=eps,
                                                                 fused=True)
        self._init_lr_decay(self.optimizer, lr_decay_horizon)  # the adaptive step: in update

    def update(self, rollouts: RolloutStorage) -> dict[str, float]:
        """``ppo_epoch`` passes over ``rollouts`` (returns computed); -> the means of ``STATS``
        over the minibatches."""
        advantages = self._advantages(rollouts)
        # Sums over minibatches, kept as tensors so there is one device sync per update.
        totals = torch.zeros(len(STATS), device=advantages.device)
        num_updates = 0
        # Without a generator of its own, the original's call (a storage written for it too).
        own = {} if self.generator is None else {"generator": self.generator}
        for epoch in range(self.ppo_epoch):
            if self.recompute_advantages and epoch > 0:
                rollouts.recompute_returns(self.actor_critic)
                advantages = self._advantages(rollouts)
            epoch_kl, epoch_start = totals[KL].clone(), num_updates
            if self.actor_critic.is_recurrent:
                batches = rollouts.recurrent_generator(advantages, self.num_mini_batch, **own)
            else:
                batches = rollouts.feed_forward_generator(advantages, self.num_mini_batch, **own)
            for b in batches:
                loss, stats = self.loss(b)  # this method, or its compiled copy (speed.py)
                self.optimizer.zero_grad()
                loss.backward()
                self.clip_grad_norm()
                self.optimizer.step()
                totals += stats
                num_updates += 1
            if self.desired_kl is not None:
                self._adapt_lr(((totals[KL] - epoch_kl) / (num_updates - epoch_start)).item(),
                               self.desired_kl)

        if self.actor_critic.value_norm is not None:  # for the next rollout's values
            self.actor_critic.value_norm.update(rollouts.returns[:-1])
        return dict(zip(STATS, (totals / num_updates).tolist()))

    def _advantages(self, rollouts: RolloutStorage) -> torch.Tensor:
        """returns - value_preds (T, N, 1), standardized over the rollout if ``advantage_norm``
        is "batch"."""
        advantages = rollouts.returns[:-1] - rollouts.value_preds[:-1]
        return standardize(advantages) if self.advantage_norm == "batch" else advantages

    def loss(self, b: Minibatch) -> tuple[torch.Tensor, torch.Tensor]:
        """PPO's loss on one minibatch -> the loss to minimise, and (detached) its ``STATS``."""
        rpo = (self.rpo_alpha, self.generator) if self.rpo_alpha else ()  # off: the original's call
        values, action_log_probs, dist_entropy, _ = self.actor_critic.evaluate_actions(
            b.obs, b.recurrent_hidden_states, b.masks, b.actions, *rpo)

        log_ratio = action_log_probs - b.old_action_log_probs
        ratio = torch.exp(log_ratio)
        assert b.advantages is not None, "update() gives the generators advantages"
        adv = standardize(b.advantages) if self.advantage_norm == "minibatch" else b.advantages
        surr1 = ratio * adv
        surr2 = torch.clamp(ratio, 1.0 - self.clip_param, 1.0 + self.clip_param) * adv
        action_loss = -torch.min(surr1, surr2).mean()

        old_values, returns = b.value_preds, b.returns
        if self.actor_critic.value_norm is not None:  # the loss in the value head's units
            scale = self.actor_critic.value_norm.scale
            values, old_values, returns = values / scale, old_values / scale, returns / scale
        if self.use_clipped_value_loss:
            value_pred_clipped = old_values + (values - old_values).clamp(
                -self.clip_param, self.clip_param)
            value_losses = (values - returns).pow(2)
            value_losses_clipped = (value_pred_clipped - returns).pow(2)
            value_loss = 0.5 * torch.max(value_losses, value_losses_clipped).mean()
        else:
            value_loss = 0.5 * (returns - values).pow(2).mean()

        with torch.no_grad():
            approx_kl = ((ratio - 1) - log_ratio).mean()
            clip_fraction = ((ratio - 1).abs() > self.clip_param).float().mean()
        terms = {"value_loss": value_loss, "action_loss": action_loss,
                 "entropy": dist_entropy, "approx_kl": approx_kl,
                 "clip_fraction": clip_fraction}
        stats = torch.stack([terms[name] for name in STATS])
        loss = value_loss * self.value_loss_coef + action_loss - dist_entropy * self.entropy_coef
        return loss, stats.detach()

    def _adapt_lr(self, kl: float, desired_kl: float) -> None:
        """One step of the adaptive schedule (``desired_kl``) after an epoch of mean KL ``kl``."""
        for group in self.optimizer.param_groups:
            if kl > 2 * desired_kl:
                group["lr"] = max(group["lr"] / KL_LR_FACTOR, KL_MIN_LR)
            elif kl < desired_kl / 2:
                group["lr"] = min(group["lr"] * KL_LR_FACTOR, KL_MAX_LR)
