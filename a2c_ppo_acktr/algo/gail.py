"""Generative Adversarial Imitation Learning (Ho & Ermon 2016): a discriminator is the reward.

``GailReward`` is the training loop's one view of it: a reward model (``algo.agent.RewardModel``)
called on each rollout between the bootstrap and the returns.

D(s, a) = sigmoid(trunk([s, a])) learns to tell expert pairs (label 1) from the policy's (label
0); the policy is trained by PPO / A2C on a reward that grows with D (docs/gail.md). Expert files
(``gail_experts/``) are dicts loadable with ``torch.load(weights_only=True)``::

    states   (num_traj, T, obs_dim) float32, raw (un-normalized) observations, zero-padded
    actions  (num_traj, T, 1) int64 for Discrete, (num_traj, T, action_dim) float32 for Box
    rewards  (num_traj, T) float32
    lengths  (num_traj,) int64, the valid steps of each trajectory
    env_name, obs_shape (list), action_space (str of the gymnasium space)
"""
import os
from collections.abc import Callable, Iterable
from typing import cast

import gymnasium as gym
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from gymnasium import spaces

from a2c_ppo_acktr.envs import Normalizer, RunningMeanStd
from a2c_ppo_acktr.envs.ids import env_file_name
from a2c_ppo_acktr.envs.vec_env import space_shape
from a2c_ppo_acktr.errors import ConfigError, GailError
from a2c_ppo_acktr.files import save_atomic
from a2c_ppo_acktr.storage import RolloutStorage

REWARDS = ("airl", "gail")
EXPERT_KEYS = ("states", "actions", "rewards", "lengths", "env_name", "obs_shape", "action_space")


def expert_path(experts_dir: str, env_name: str) -> str:
    """``<experts_dir>/trajs_<env-name>.pt``, the env id as checkpoints write it
    (``envs/ids.env_file_name``)."""
    return os.path.join(experts_dir, f"trajs_{env_file_name(env_name)}.pt")


def save_expert_file(data: dict, experts_dir: str) -> str:
    """Write ``data`` (the expert file dict) to ``expert_path`` atomically; -> a one-line summary."""
    path = expert_path(experts_dir, data["env_name"])
    save_atomic(data, path)
    lengths = data["lengths"]
    returns = [float(data["rewards"][i, :n].sum()) for i, n in enumerate(lengths.tolist())]
    return (f"wrote {path}: {len(returns)} trajectories, return {np.mean(returns):.1f} ± "
            f"{np.std(returns):.1f} (min {np.min(returns):.1f}, max {np.max(returns):.1f}), "
            f"lengths {lengths.min().item()}-{lengths.max().item()}")


def load_expert_file(path: str) -> dict:
    """Read an expert file (dict of tensors and plain values); ``GailError`` if unusable."""
    if not os.path.isfile(path):
        raise GailError(f"no expert file at {path}")
    try:
        data = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # torch explains in paragraphs: name the kind of failure only
        raise GailError(f"cannot read expert file {path}: corrupt, not a torch file or it "
                              "pickles Python objects") from e
    missing = [k for k in EXPERT_KEYS if not isinstance(data, dict) or k not in data]
    if missing:
        raise GailError(f"{path} is not an expert file: missing {', '.join(missing)}")
    return data


class ExpertDataset(torch.utils.data.Dataset):
    """(state, action) pairs of ``num_trajectories`` random expert trajectories, subsampled.

    As the original: each chosen trajectory keeps every ``subsample_frequency``-th step from a
    random offset in [0, subsample_frequency), ``length // subsample_frequency`` steps in all, so
    the discriminator cannot memorise whole trajectories. Items: states (obs_dim,) float32, actions
    (1,) int64 or (action_dim,) float32.
    """

    def __init__(self, file_name: str, num_trajectories: int = 4,
                 subsample_frequency: int = 20) -> None:
        data = load_expert_file(file_name)
        self.env_name, self.obs_shape = data["env_name"], list(data["obs_shape"])
        self.action_space = data["action_space"]
        available = data["states"].shape[0]
        if not 0 < num_trajectories <= available:
            raise GailError(f"{file_name} holds {available} trajectories, "
                            f"{num_trajectories} are needed")
        idx = torch.randperm(available)[:num_trajectories]
        starts = torch.randint(0, subsample_frequency, (num_trajectories,))
        states, actions = [], []
        for i, start in zip(idx.tolist(), starts.tolist()):
            n = int(data["lengths"][i]) // subsample_frequency
            states.append(data["states"][i, start::subsample_frequency][:n])
            actions.append(data["actions"][i, start::subsample_frequency][:n])
        self.trajectory_indices = idx
        self.expert_returns = [float(data["rewards"][i, :data["lengths"][i]].sum()) for i in idx]
        self.states = torch.cat(states).float()  # (M, obs_dim)
        self.actions = torch.cat(actions)        # (M, 1) int64 or (M, action_dim) float32
        if len(self.states) == 0:
            raise GailError(f"{file_name}: trajectories shorter than the subsampling "
                            f"frequency {subsample_frequency} leave no samples")

    def __len__(self) -> int:
        return len(self.states)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self.states[i], self.actions[i]


def check_expert_data(dataset: ExpertDataset, path: str, env_name: str,
                      observation_space: gym.Space, action_space: gym.Space) -> None:
    """``GailError`` unless ``dataset`` was recorded in this env with these spaces."""
    expected = {"env_name": env_name, "obs_shape": list(space_shape(observation_space)),
                "action_space": str(action_space)}
    for key, want in expected.items():
        got = getattr(dataset, key)
        if got != want:
            raise GailError(f"expert file {path} is for {key} {got!r}, expected {want!r}")


class Discriminator(nn.Module):
    """D(s, a) on normalized vector observations and actions (one-hot for Discrete, clipped Box).

    ``update`` trains it on expert batches against equally many random policy samples of the
    rollout; ``predict_reward`` turns it into the reward, ``airl`` log D - log(1 - D) (the
    original's, = the logit) or ``gail`` -log(1 - D) (always positive: a survival bonus),
    divided by the running std of the discounted sum of that reward.
    """

    low: torch.Tensor   # buffers of a Box action space: its bounds
    high: torch.Tensor

    def __init__(self, observation_space: gym.Space, action_space: gym.Space,
                 hidden_size: int = 100, reward: str = "airl", lr: float = 1e-3,
                 device: torch.device | str = "cpu") -> None:
        super().__init__()
        obs_shape = space_shape(observation_space)
        if len(obs_shape) != 1:
            raise GailError(f"GAIL here takes vector observations; this env's are of shape "
                            f"{tuple(obs_shape)} (images are not supported)")
        if isinstance(action_space, spaces.Discrete):
            action_dim = int(action_space.n)
        elif isinstance(action_space, spaces.Box) and len(action_space.shape) == 1:
            action_dim = action_space.shape[0]
            # The env runs the clipped action (VecPyTorch), so D judges that, not the raw sample.
            self.register_buffer("low", torch.as_tensor(action_space.low, dtype=torch.float32))
            self.register_buffer("high", torch.as_tensor(action_space.high, dtype=torch.float32))
        else:
            raise GailError(f"GAIL supports Discrete and 1-D Box actions, not {action_space}")
        if reward not in REWARDS:
            raise ConfigError(f"unknown reward {reward!r}; choose one of: {', '.join(REWARDS)}")
        self.discrete = isinstance(action_space, spaces.Discrete)
        self.action_dim, self.reward = action_dim, reward
        self.trunk = nn.Sequential(
            nn.Linear(obs_shape[0] + action_dim, hidden_size), nn.Tanh(),
            nn.Linear(hidden_size, hidden_size), nn.Tanh(),
            nn.Linear(hidden_size, 1))
        self.to(device)
        self.optimizer = torch.optim.Adam(self.trunk.parameters(), lr=lr)
        self.ret_rms = RunningMeanStd(shape=())
        self.returns: torch.Tensor | None = None  # (N, 1) discounted sum of the learned reward, per env

    def encode(self, states: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        """(B, obs_dim), (B, 1) int or (B, action_dim) -> the trunk's input (B, obs_dim + action_dim)."""
        dtype = cast(nn.Linear, self.trunk[0]).weight.dtype  # Sequential's items are typed Module
        if self.discrete:
            actions = F.one_hot(actions.reshape(-1).long(), self.action_dim).to(dtype)
        else:
            actions = torch.max(torch.min(actions.to(dtype), self.high), self.low)
        return torch.cat([states.to(dtype), actions], dim=1)

    def forward(self, states: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        """Logits of D, (B, 1)."""
        return self.trunk(self.encode(states, actions))

    def compute_grad_pen(self, expert_data: torch.Tensor, policy_data: torch.Tensor,
                         lambda_: float = 10) -> torch.Tensor:
        """lambda * E[(||grad_x trunk(x)||_2 - 1)^2] at random interpolates of the encoded pairs."""
        alpha = torch.rand(expert_data.size(0), 1, device=expert_data.device, dtype=expert_data.dtype)
        mixup_data = (alpha * expert_data + (1 - alpha) * policy_data).requires_grad_(True)
        disc = self.trunk(mixup_data)
        grad = torch.autograd.grad(outputs=disc, inputs=mixup_data,
                                   grad_outputs=torch.ones_like(disc), create_graph=True)[0]
        return lambda_ * (grad.norm(2, dim=1) - 1).pow(2).mean()

    def update(self, expert_loader: Iterable[tuple[torch.Tensor, torch.Tensor]],
               rollouts: RolloutStorage,
               obsfilt: Callable[[np.ndarray], np.ndarray] | None = None,
               epochs: int = 1) -> dict[str, float]:
        """``epochs`` passes over ``expert_loader``; returns the mean loss and accuracies.

        Each expert batch (raw states, normalized here by ``obsfilt``: numpy -> numpy, the envs'
        statistics without updating them) meets as many random (state, action) pairs of the
        rollout (already normalized). Returns {"gail_loss", "gail_grad_pen", "gail_expert_acc",
        "gail_policy_acc"}: BCE + penalty, the penalty alone, the share of expert samples with
        D > 1/2 and of policy samples with D < 1/2.
        """
        self.train()
        obs = rollouts.obs[:-1].reshape(-1, rollouts.obs.shape[-1])  # (T * N, obs_dim)
        acts = rollouts.actions.reshape(obs.shape[0], -1)            # (T * N, 1 or action_dim)
        device = obs.device
        totals = torch.zeros(4, device=device)
        n = 0
        for _ in range(epochs):
            perm = torch.randperm(obs.shape[0], device=device)
            start = 0
            for expert_state, expert_action in expert_loader:
                size = min(len(expert_state), obs.shape[0] - start)
                if size <= 0:
                    break
                idx = perm[start:start + size]
                start += size
                if obsfilt is not None:
                    expert_state = torch.from_numpy(obsfilt(expert_state[:size].numpy()))
                expert_data = self.encode(expert_state[:size].to(device),
                                          expert_action[:size].to(device))
                policy_data = self.encode(obs[idx], acts[idx])
                expert_d, policy_d = self.trunk(expert_data), self.trunk(policy_data)
                expert_loss = F.binary_cross_entropy_with_logits(expert_d, torch.ones_like(expert_d))
                policy_loss = F.binary_cross_entropy_with_logits(policy_d, torch.zeros_like(policy_d))
                grad_pen = self.compute_grad_pen(expert_data, policy_data)
                loss = expert_loss + policy_loss + grad_pen
                self.optimizer.zero_grad()
                loss.backward()
                self.optimizer.step()
                with torch.no_grad():
                    totals += torch.stack([loss, grad_pen, (expert_d > 0).float().mean(),
                                           (policy_d < 0).float().mean()])
                n += 1
        means = (totals / max(n, 1)).tolist()
        return dict(zip(("gail_loss", "gail_grad_pen", "gail_expert_acc", "gail_policy_acc"),
                        means))

    @torch.no_grad()
    def predict_reward(self, state: torch.Tensor, action: torch.Tensor, gamma: float,
                       masks: torch.Tensor) -> torch.Tensor:
        """Learned reward of one step of N envs, (N, 1), scaled by 1 / std of its return.

        ``masks`` (N, 1) is 0 where ``state`` begins an episode (``rollouts.masks[step]``).
        """
        self.eval()
        d = self(state, action)
        # log D - log(1 - D) = the logit; -log(1 - D) = softplus(logit): stable for saturated D.
        reward = d if self.reward == "airl" else F.softplus(d)
        if self.returns is None:
            # from 0 (docs/gail.md, "Differences from the original's GAIL")
            self.returns = torch.zeros_like(reward)
        self.returns = self.returns * masks * gamma + reward
        self.ret_rms.update(self.returns.reshape(-1).cpu().numpy())
        return reward / float(self.ret_rms.var + 1e-8) ** 0.5

    def full_state_dict(self) -> dict:
        """Parameters, optimizer and return statistics: what ``--resume`` needs."""
        return {"model": self.state_dict(), "optimizer": self.optimizer.state_dict(),
                "ret_rms": self.ret_rms.state_dict(),
                "returns": None if self.returns is None else self.returns.cpu()}

    def load_full_state_dict(self, d: dict) -> None:
        """Restore what ``full_state_dict`` saved."""
        self.load_state_dict(d["model"])
        self.optimizer.load_state_dict(d["optimizer"])
        self.ret_rms.load_state_dict(d["ret_rms"])
        self.returns = None if d["returns"] is None else d["returns"].to(self.trunk[0].weight.device)


class GailReward:
    """GAIL as a reward model (``algo.agent.RewardModel``): ``reward_model(rollouts, update)``
    trains the discriminator on the rollout, then puts its rewards in place of the env's; -> its
    statistics (``Discriminator.update``). Its state is the discriminator's ``full_state_dict``.

    ``normalizer`` is the envs' (D's expert inputs are normalized as the rollout's were). For the
    first ``warmup_updates`` updates D trains ``warmup_epochs`` epochs per rollout and the
    normalizer keeps learning; then ``epochs`` epochs, with the normalizer frozen, as the
    original: D's inputs keep one scale after warm-up.
    """

    def __init__(self, discr: Discriminator,
                 expert_loader: Iterable[tuple[torch.Tensor, torch.Tensor]],
                 normalizer: Normalizer, gamma: float, warmup_updates: int, warmup_epochs: int,
                 epochs: int) -> None:
        self.discr, self.expert_loader, self.normalizer = discr, expert_loader, normalizer
        self.gamma, self.warmup_updates = gamma, warmup_updates
        self.warmup_epochs, self.epochs = warmup_epochs, epochs

    def __call__(self, rollouts: RolloutStorage, update: int) -> dict[str, float]:
        warm = update < self.warmup_updates
        if not warm:
            self.normalizer.eval()
        stats = self.discr.update(self.expert_loader, rollouts, self.normalizer.normalize_obs,
                                  self.warmup_epochs if warm else self.epochs)
        for step in range(rollouts.num_steps):
            rollouts.rewards[step] = self.discr.predict_reward(
                rollouts.obs[step], rollouts.actions[step], self.gamma, rollouts.masks[step])
        return stats

    def state_dict(self) -> dict:
        return self.discr.full_state_dict()

    def load_state_dict(self, state_dict: dict) -> None:
        self.discr.load_full_state_dict(state_dict)
