"""``RolloutStorage``: the tensors of one rollout, its returns, and minibatch generators.

Layout (T = num_steps, N = num_processes), as the original so code written for it reads the same:
obs (T+1, N, *obs_shape); recurrent_hidden_states (T+1, N, H); rewards (T, N, 1);
value_preds, returns, masks, bad_masks (T+1, N, 1); action_log_probs (T, N, 1);
actions (T, N, 1) for Discrete, (T, N, D) for Box, MultiBinary and MultiDiscrete (long).
Slot 0 of the T+1 tensors holds the state the rollout started from. One addition:
bootstrap_values (T, N, 1), the value of the real final observation of an episode truncated at
step t (zero elsewhere).
"""
from collections.abc import Iterator, Sequence
from typing import NamedTuple, Self

import gymnasium as gym
import torch
from gymnasium import spaces

from a2c_ppo_acktr.config import ReturnsConfig
from a2c_ppo_acktr.model import Policy


class Minibatch(NamedTuple):
    """One minibatch for an update (B = minibatch size)."""

    obs: torch.Tensor                      # (B, *obs_shape)
    recurrent_hidden_states: torch.Tensor  # (B, H); for recurrent batches (n_envs, H) at the first step
    actions: torch.Tensor                  # (B, action_dim)
    value_preds: torch.Tensor              # (B, 1)
    returns: torch.Tensor                  # (B, 1)
    masks: torch.Tensor                    # (B, 1)
    old_action_log_probs: torch.Tensor     # (B, 1)
    advantages: torch.Tensor | None        # (B, 1); None when the generator was given None


class RolloutStorage:
    """Fixed-size buffer for ``num_steps`` transitions of ``num_processes`` envs."""

    def __init__(self, num_steps: int, num_processes: int, obs_shape: Sequence[int],
                 action_space: gym.Space, recurrent_hidden_state_size: int,
                 obs_dtype: torch.dtype = torch.float32) -> None:
        T, N = num_steps, num_processes
        self.obs = torch.zeros(T + 1, N, *obs_shape, dtype=obs_dtype)
        self.recurrent_hidden_states = torch.zeros(T + 1, N, recurrent_hidden_state_size)
        self.rewards = torch.zeros(T, N, 1)
        self.value_preds = torch.zeros(T + 1, N, 1)
        self.returns = torch.zeros(T + 1, N, 1)
        self.action_log_probs = torch.zeros(T, N, 1)
        self.bootstrap_values = torch.zeros(T, N, 1)
        if isinstance(action_space, spaces.Discrete):
            self.actions = torch.zeros(T, N, 1, dtype=torch.long)
        elif isinstance(action_space, spaces.MultiDiscrete):
            self.actions = torch.zeros(T, N, action_space.shape[0], dtype=torch.long)
        else:
            shape = action_space.shape  # a Box's or a MultiBinary's
            assert shape is not None, f"{action_space} has no fixed shape"
            self.actions = torch.zeros(T, N, shape[0])
        self.masks = torch.ones(T + 1, N, 1)
        # 0 where the episode was cut by a time limit rather than ended by the task.
        self.bad_masks = torch.ones(T + 1, N, 1)
        self.num_steps = num_steps
        self.step = 0
        # compute_returns' (use_gae, gamma, gae_lambda, use_proper_time_limits), for recompute_returns
        self.returns_settings: ReturnsConfig | None = None  # the last compute_returns'

    _fields = ("obs", "recurrent_hidden_states", "rewards", "value_preds", "returns",
               "action_log_probs", "bootstrap_values", "actions", "masks", "bad_masks")

    def to(self, device: torch.device | str) -> Self:
        """Move every tensor to ``device``; returns this storage."""
        for name in self._fields:
            setattr(self, name, getattr(self, name).to(device))
        return self

    def insert(self, obs: torch.Tensor, recurrent_hidden_states: torch.Tensor,
               actions: torch.Tensor, action_log_probs: torch.Tensor, value_preds: torch.Tensor,
               rewards: torch.Tensor, masks: torch.Tensor, bad_masks: torch.Tensor, *,
               bootstrap_values: torch.Tensor | None = None, columns: slice = slice(None),
               advance: bool = True) -> None:
        """Store one step: ``obs``/``masks`` are those *after* the action (slot step+1).

        Shapes (n = envs in ``columns``): obs (n, *obs_shape), recurrent_hidden_states (n, H),
        actions (n, 1) or (n, A), the others (n, 1).

        ``columns`` (a slice of envs) stores one group's part of the step (a pipelined
        collector); ``advance=False`` keeps the step for the other groups' parts.
        """
        s, c = self.step, columns
        self.obs[s + 1, c] = obs
        self.recurrent_hidden_states[s + 1, c] = recurrent_hidden_states
        self.masks[s + 1, c] = masks
        self.bad_masks[s + 1, c] = bad_masks
        self.actions[s, c] = actions
        self.action_log_probs[s, c] = action_log_probs
        self.value_preds[s, c] = value_preds
        self.rewards[s, c] = rewards
        if bootstrap_values is not None:  # zero elsewhere: after_update clears the rollout's
            self.bootstrap_values[s, c] = bootstrap_values
        if advance:
            self.step = (s + 1) % self.num_steps

    def after_update(self, next_rollouts: "RolloutStorage | None" = None) -> None:
        """The last state of this rollout is the first of the next, held in ``next_rollouts``
        (by default this same storage; the asynchronous sampler alternates two)."""
        nxt = self if next_rollouts is None else next_rollouts
        nxt.obs[0].copy_(self.obs[-1])
        nxt.recurrent_hidden_states[0].copy_(self.recurrent_hidden_states[-1])
        nxt.masks[0].copy_(self.masks[-1])
        nxt.bad_masks[0].copy_(self.bad_masks[-1])
        nxt.bootstrap_values.zero_()

    def compute_returns(self, next_value: torch.Tensor, use_gae: bool | ReturnsConfig,
                        gamma: float | None = None, gae_lambda: float | None = None,
                        use_proper_time_limits: bool = True) -> None:
        """Fill ``returns`` (T+1, N, 1) from rewards, values and ``next_value`` (N, 1), with the
        settings given one by one or as one ``ReturnsConfig`` (in place of ``use_gae``).

        The value after step t is V(s_{t+1}) if the episode goes on (masks[t+1] = 1), 0 if it
        terminated, and, with ``use_proper_time_limits``, the value of its real final observation
        (``bootstrap_values[t]``) if a time limit truncated it. Without it a truncation counts as a
        termination. (The original bootstrapped from the step's own value estimate instead:
        docs/details.md, "How episodes end: masks, bad_masks and truncation".)
        """
        if not isinstance(use_gae, ReturnsConfig):
            assert gamma is not None and gae_lambda is not None, "gamma and gae_lambda, or a ReturnsConfig"
            use_gae = ReturnsConfig(use_gae, gamma, gae_lambda, use_proper_time_limits)
        self.returns_settings = settings = use_gae
        use_gae, gamma, gae_lambda = settings.use_gae, settings.gamma, settings.gae_lambda
        use_proper_time_limits = settings.use_proper_time_limits
        self.value_preds[-1] = next_value
        self.returns[-1] = next_value
        masks = self.masks[1:]
        if use_proper_time_limits:
            bootstrap = self.bootstrap_values * (1.0 - self.bad_masks[1:])
        else:
            bootstrap = torch.zeros_like(self.bootstrap_values)
        if use_gae:
            # (T, N, 1): one-step TD errors, then the backward GAE recursion.
            deltas = (self.rewards + gamma * (masks * self.value_preds[1:] + bootstrap)
                      - self.value_preds[:-1])
            discounts = gamma * gae_lambda * masks
            gae = torch.zeros_like(next_value)
            for t in reversed(range(self.num_steps)):  # A_t, written straight into returns[t]
                gae = torch.add(deltas[t], discounts[t] * gae, out=self.returns[t])
            self.returns[:-1] += self.value_preds[:-1]
        else:
            for t in reversed(range(self.num_steps)):
                torch.add(self.rewards[t], gamma * (masks[t] * self.returns[t + 1] + bootstrap[t]),
                          out=self.returns[t])

    @torch.inference_mode()
    def recompute_returns(self, actor_critic: Policy, chunk: int = 256) -> None:
        """``value_preds`` of every step, the bootstrap slot included, from ``actor_critic``'s
        current weights, then ``returns`` with the settings of the last ``compute_returns``: what
        PPO's ``recompute_advantages`` does between epochs (DI-engine's and Tianshou's
        ``recompute_adv``). Feed-forward policies only: a recurrent policy's values depend on
        hidden states the rollout holds from the old weights. A time-limit truncation keeps its
        stored ``bootstrap_values`` (the final observation is not stored). ``chunk`` samples go
        through the network at a time: Atari's first conv output stays under the 32 MB above
        which malloc maps (and page-faults) each allocation afresh (``speed.keep_freed_memory``)."""
        if actor_critic.is_recurrent:
            raise ValueError("recomputing the values needs a feed-forward policy, not a "
                              "recurrent one")
        if self.returns_settings is None:
            raise RuntimeError("recompute_returns needs a compute_returns first (its settings)")
        obs = self.obs.reshape(-1, *self.obs.shape[2:])  # ((T+1) * N, *obs_shape)
        hxs = self.recurrent_hidden_states.reshape(-1, self.recurrent_hidden_states.shape[-1])
        masks = self.masks.reshape(-1, 1)
        values = torch.cat([actor_critic.get_value(obs[i:i + chunk], hxs[i:i + chunk],
                                                   masks[i:i + chunk])
                            for i in range(0, len(obs), chunk)])
        self.value_preds.copy_(values.view_as(self.value_preds))
        self.compute_returns(self.value_preds[-1].clone(), self.returns_settings)

    def _flat(self, tensor: torch.Tensor) -> torch.Tensor:
        # (T or T+1, N, ...) -> (T * N, ...), dropping the bootstrap slot if present.
        return tensor[:self.num_steps].reshape(-1, *tensor.shape[2:])

    def feed_forward_generator(self, advantages: torch.Tensor | None, num_mini_batch: int,
                               generator: torch.Generator | None = None) -> Iterator[Minibatch]:
        """Yield ``num_mini_batch`` ``Minibatch``es of T * N // ``num_mini_batch`` random (step,
        env) samples, each sample at most once (the remainder of the division is left out).

        ``advantages`` (T, N, 1). ``generator`` draws the permutation (None: torch's global one).
        """
        T, N = self.rewards.shape[:2]
        batch_size = T * N
        if batch_size < num_mini_batch:
            raise ValueError(
                f"PPO needs num_processes * num_steps ({N} * {T} = {batch_size}) to be at "
                f"least num_mini_batch ({num_mini_batch})")
        mini_batch_size = batch_size // num_mini_batch
        obs = self._flat(self.obs)
        hxs = self._flat(self.recurrent_hidden_states)
        actions = self._flat(self.actions)
        value_preds = self._flat(self.value_preds)
        returns = self._flat(self.returns)
        masks = self._flat(self.masks)
        old_log_probs = self._flat(self.action_log_probs)
        adv = None if advantages is None else advantages.reshape(-1, 1)
        perm = torch.randperm(batch_size, generator=generator, device=self.rewards.device)
        for start in range(0, batch_size - mini_batch_size + 1, mini_batch_size):
            idx = perm[start:start + mini_batch_size]
            yield Minibatch(obs[idx], hxs[idx], actions[idx], value_preds[idx], returns[idx],
                            masks[idx], old_log_probs[idx], None if adv is None else adv[idx])

    def recurrent_generator(self, advantages: torch.Tensor | None, num_mini_batch: int,
                            generator: torch.Generator | None = None) -> Iterator[Minibatch]:
        """Yield ``Minibatch``es of whole env columns (all T steps of N / num_mini_batch envs),
        in an order drawn from ``generator`` (None: torch's global one).

        Tensors are flattened time-major, (T, n, ...) -> (T * n, ...), which is what
        ``NNBase._forward_gru`` expects; ``recurrent_hidden_states`` is the state at step 0 (n, H).
        """
        T, N = self.rewards.shape[:2]
        if N < num_mini_batch:
            raise ValueError(
                f"recurrent PPO needs num_processes ({N}) to be at least num_mini_batch "
                f"({num_mini_batch})")
        envs_per_batch = N // num_mini_batch
        perm = torch.randperm(N, generator=generator, device=self.rewards.device)
        for start in range(0, N - envs_per_batch + 1, envs_per_batch):
            ind = perm[start:start + envs_per_batch]

            def cols(x, ind=ind):
                return x[:T, ind].reshape(T * envs_per_batch, *x.shape[2:])
            yield Minibatch(
                cols(self.obs), self.recurrent_hidden_states[0, ind], cols(self.actions),
                cols(self.value_preds), cols(self.returns), cols(self.masks),
                cols(self.action_log_probs), None if advantages is None else cols(advantages))
