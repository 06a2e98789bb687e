"""The actor-critic: ``Policy`` = a base network (CNN or MLP, optionally with a GRU) + an action head."""
import inspect
import math
from collections.abc import Callable, Sequence
from typing import Literal, NoReturn, cast

import gymnasium as gym
import torch
import torch.nn as nn
from gymnasium import spaces

from a2c_ppo_acktr.config import PolicyConfig
from a2c_ppo_acktr.distributions import (
    Bernoulli,
    Categorical,
    DiagGaussian,
    DiagGaussianDist,
    MultiCategorical,
    init,
)
from a2c_ppo_acktr.envs.vec_env import space_shape
from a2c_ppo_acktr.errors import ConfigError
from a2c_ppo_acktr.value_norm import ValueNorm

INITS = ("orthogonal", "default")
PRECISIONS = ("fp32", "bf16")
ACTIVATIONS = {"tanh": nn.Tanh, "relu": nn.ReLU}


def policy_kwargs(cfg: PolicyConfig) -> dict:
    """``Policy`` keyword arguments of the network's shape (not ``precision``: how it computes),
    as checkpoints keep them. Unset ``--hidden-size`` / ``--activation`` keep each base's own
    default."""
    base_kwargs: dict = {"recurrent": cfg.recurrent}
    if cfg.hidden_size is not None:
        base_kwargs["hidden_size"] = cfg.hidden_size
    if cfg.activation is not None:
        base_kwargs["activation"] = cfg.activation
    if cfg.layer_norm:  # only when on: older versions load the rest
        base_kwargs["layer_norm"] = True
    kwargs = {"base_kwargs": base_kwargs, "log_std_init": cfg.log_std_init, "init": cfg.init,
              "action_mean_gain": cfg.action_mean_gain}
    if cfg.value_norm:  # only when on: older versions load the rest
        kwargs["value_norm"] = True
    return kwargs


def make_policy(obs_shape: Sequence[int], action_space: gym.Space, kwargs: dict,
                device: torch.device | str = "cpu", precision: str = "fp32") -> "Policy":
    """The one way the package builds a ``Policy``: from ``kwargs`` as ``policy_kwargs`` gives them
    (flags: ``policy_for``; or a checkpoint's copy), on ``device``, computing in ``precision``.
    ``ConfigError`` for a keyword this ``Policy`` does not take (a newer version's checkpoint)."""
    unknown = sorted(set(kwargs) - set(inspect.signature(Policy).parameters))
    if unknown:
        raise ConfigError(f"policy settings this version does not know ({', '.join(unknown)}); "
                          "update a2c_ppo_acktr to load them")
    base = kwargs.get("base") or default_base(obs_shape)
    taken = inspect.signature(base).parameters  # a flag of one base (MLPBase's) given to another
    others = sorted(set(kwargs.get("base_kwargs") or {}) - set(taken))
    if others and not any(p.kind is p.VAR_KEYWORD for p in taken.values()):
        raise ConfigError(f"{', '.join('--' + n.replace('_', '-') for n in others)}: not taken by "
                          f"{base.__name__}, the base for observations of shape {tuple(obs_shape)}")
    return Policy(obs_shape, action_space, **kwargs, precision=precision).to(device)


def policy_for(observation_space: gym.Space, action_space: gym.Space, cfg: PolicyConfig,
               device: torch.device | str = "cpu") -> "Policy":
    """The policy ``cfg``'s flags describe, for an env's spaces."""
    kwargs = policy_kwargs(cfg)
    return make_policy(space_shape(observation_space), action_space, kwargs, device, cfg.precision)


def default_base(obs_shape: Sequence[int]) -> "Callable[..., NNBase]":
    """The base for ``obs_shape``: ``CNNBase`` for images (C, H, W), ``MLPBase`` for vectors."""
    if len(obs_shape) in (1, 3):
        return CNNBase if len(obs_shape) == 3 else MLPBase
    raise ConfigError(f"observation shape {tuple(obs_shape)} is not supported: expected a "
                      "vector (D,) or an image (C, H, W)")


class Policy(nn.Module):
    """Actor-critic with the original's interface.

    ``obs_shape`` picks the base when ``base`` is None: (C, H, W) -> ``CNNBase``, vectors ->
    ``MLPBase``; ``action_space`` the head: Discrete -> Categorical, Box -> DiagGaussian,
    MultiBinary -> Bernoulli, MultiDiscrete -> MultiCategorical. ``base_kwargs``: ``recurrent``,
    ``hidden_size``, ``activation``. ``log_std_init``: the Gaussian head's initial log-std;
    ``action_mean_gain``: the orthogonal gain of its mean layer; ``init="default"``: PyTorch's
    init instead of the original's orthogonal one. ``precision="bf16"``: the base under bfloat16
    autocast, all else fp32. ``value_norm``: the head predicts in units of the returns' running
    std (``ValueNorm``); every value returned is in reward units.
    """

    def __init__(self, obs_shape: Sequence[int], action_space: gym.Space,
                 base: "Callable[..., NNBase] | None" = None, base_kwargs: dict | None = None,
                 log_std_init: float = 0.0, init: str = "orthogonal",
                 action_mean_gain: float = 1.0, precision: str = "fp32",
                 value_norm: bool = False) -> None:
        super().__init__()
        if init not in INITS:
            raise ConfigError(f"unknown init {init!r}; expected one of {', '.join(INITS)}")
        if precision not in PRECISIONS:
            raise ConfigError(f"unknown precision {precision!r}; expected one of "
                              f"{', '.join(PRECISIONS)}")
        self.precision = precision
        if init == "default" and action_mean_gain != 1.0:
            raise ConfigError("an action mean gain applies to the orthogonal init, not to "
                             "init='default'")
        self.base = (base or default_base(obs_shape))(obs_shape[0], **(base_kwargs or {}))

        self.dist: Categorical | DiagGaussian | Bernoulli | MultiCategorical
        if isinstance(action_space, spaces.Discrete):
            self.dist = Categorical(self.base.output_size, int(action_space.n))
        elif isinstance(action_space, spaces.Box) and len(action_space.shape) == 1:
            self.dist = DiagGaussian(self.base.output_size, action_space.shape[0], log_std_init,
                                     action_mean_gain)
        elif isinstance(action_space, spaces.MultiBinary) and len(action_space.shape) == 1:
            self.dist = Bernoulli(self.base.output_size, action_space.shape[0])
        elif (isinstance(action_space, spaces.MultiDiscrete) and len(action_space.shape) == 1
              and not action_space.start.any()):
            self.dist = MultiCategorical(self.base.output_size, action_space.nvec.tolist())
        else:
            raise ConfigError(
                f"action space {action_space} is not supported: expected Discrete, a 1-D Box, "
                "a 1-D MultiBinary or a 1-D MultiDiscrete starting at 0")
        if init == "default":
            for m in self.modules():
                if isinstance(m, (nn.Linear, nn.Conv2d)):
                    m.reset_parameters()
        self.value_norm = ValueNorm() if value_norm else None

    @property
    def is_recurrent(self) -> bool:
        return self.base.is_recurrent

    @property
    def recurrent_hidden_state_size(self) -> int:
        """Size of rnn_hxs; 1 for feed-forward policies so storage code has one shape."""
        return self.base.recurrent_hidden_state_size

    def forward(self, *inputs: torch.Tensor) -> NoReturn:
        raise NotImplementedError("use act, get_value or evaluate_actions")

    def forward_base(self, inputs: torch.Tensor, rnn_hxs: torch.Tensor,
                     masks: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The base's forward -> value (N, 1), actor features (N, hidden), rnn_hxs, all fp32.

        With ``precision="bf16"`` the base runs under autocast to bfloat16 (and so does its
        backward); its outputs come back as fp32, so that the action head, the log-probabilities,
        entropies, ratios and losses are fp32. The value head computes in fp32 (``NNBase._value``).
        """
        if self.precision == "fp32":
            value, actor_features, rnn_hxs = self.base(inputs, rnn_hxs, masks)
        else:
            with torch.autocast(inputs.device.type, dtype=torch.bfloat16):
                value, actor_features, rnn_hxs = self.base(inputs, rnn_hxs, masks)
            value, actor_features, rnn_hxs = value.float(), actor_features.float(), rnn_hxs.float()
        if self.value_norm is not None:  # the head's units -> reward units
            value = value * self.value_norm.scale
        return value, actor_features, rnn_hxs

    def act(self, inputs: torch.Tensor, rnn_hxs: torch.Tensor, masks: torch.Tensor,
            deterministic: bool = False
            ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """inputs (N, *obs_shape), rnn_hxs (N, H), masks (N, 1) -> value (N, 1), action
        ((N, 1) long for Discrete, (N, A) float for Box / MultiBinary), action_log_probs (N, 1),
        rnn_hxs (N, H). ``deterministic`` takes the distribution's mode."""
        value, actor_features, rnn_hxs = self.forward_base(inputs, rnn_hxs, masks)
        dist = self.dist(actor_features)
        action = dist.mode() if deterministic else dist.sample()
        return value, action, dist.log_probs(action), rnn_hxs

    def act_step(self, inputs: torch.Tensor, rnn_hxs: torch.Tensor, masks: torch.Tensor
                 ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """What a rollout calls to act: ``act``. ``speed.compile_policy`` replaces it on an
        instance by a compiled ``act`` (``--compile``); evaluation keeps calling ``act``."""
        return self.act(inputs, rnn_hxs, masks)

    def get_value(self, inputs: torch.Tensor, rnn_hxs: torch.Tensor,
                  masks: torch.Tensor) -> torch.Tensor:
        """-> value (N, 1)."""
        value, _, _ = self.forward_base(inputs, rnn_hxs, masks)
        return value

    def evaluate_actions(self, inputs: torch.Tensor, rnn_hxs: torch.Tensor, masks: torch.Tensor,
                         action: torch.Tensor, mean_noise: float = 0.0,
                         generator: torch.Generator | None = None
                         ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """-> value (N, 1), action_log_probs (N, 1), mean entropy (scalar), rnn_hxs (N, H).

        ``mean_noise`` A > 0 (RPO): a Gaussian's mean is shifted by U(-A, A) noise, drawn from
        ``generator`` (None: torch's global one), before the log-probabilities are taken.

        For a recurrent policy N = T * n is a time-major sequence of n envs, and ``rnn_hxs`` (in
        and out) is (n, H): their state before its first step / after its last
        (``RolloutStorage.recurrent_generator``).
        """
        value, actor_features, rnn_hxs = self.forward_base(inputs, rnn_hxs, masks)
        dist = self.dist(actor_features)
        if mean_noise and isinstance(dist, DiagGaussianDist):
            noise = torch.empty_like(dist.mean).uniform_(-mean_noise, mean_noise,
                                                         generator=generator)
            dist.mean = dist.mean + noise
        return value, dist.log_probs(action), dist.entropy().mean(), rnn_hxs


class NNBase(nn.Module):
    """Shared recurrent machinery: an optional GRU whose state is reset where ``masks`` is 0."""

    critic_linear: nn.Linear  # the value head, set by each base

    def __init__(self, recurrent: bool, recurrent_input_size: int, hidden_size: int) -> None:
        super().__init__()
        self._hidden_size = hidden_size
        self._recurrent = recurrent
        if recurrent:
            self.gru = nn.GRU(recurrent_input_size, hidden_size)
            for name, param in self.gru.named_parameters():
                if "bias" in name:
                    nn.init.constant_(param, 0)
                elif "weight" in name:
                    nn.init.orthogonal_(param)

    @property
    def is_recurrent(self) -> bool:
        return self._recurrent

    @property
    def recurrent_hidden_state_size(self) -> int:
        return self._hidden_size if self._recurrent else 1

    @property
    def output_size(self) -> int:
        return self._hidden_size

    def _value(self, x: torch.Tensor) -> torch.Tensor:
        """``critic_linear(x)`` in fp32 even under bf16 autocast: values feed the returns, and bf16
        would round a value of 20 to a multiple of 0.125."""
        if not torch.is_autocast_enabled(x.device.type):
            return self.critic_linear(x)
        with torch.autocast(x.device.type, enabled=False):
            return self.critic_linear(x.float())

    def _forward_gru(self, x: torch.Tensor, hxs: torch.Tensor,
                     masks: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """x (T*N, D) time-major, hxs (N, H), masks (T*N, 1) -> outputs (T*N, H), final hxs (N, H).

        A mask of 0 at step t starts a new episode: the state entering t is zeroed. The GRU runs
        on the whole segments between those steps (cuDNN-friendly), as stepping one at a time."""
        if x.size(0) == hxs.size(0):  # a single step for each of the N envs
            x, hxs = self.gru(x.unsqueeze(0), (hxs * masks).unsqueeze(0))
            return x.squeeze(0), hxs.squeeze(0)
        return self._gru_segments(x, hxs, masks)

    # --compile runs this eagerly (speed.py).
    def _gru_segments(self, x: torch.Tensor, hxs: torch.Tensor,
                      masks: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        N = hxs.size(0)
        T = x.size(0) // N
        x = x.view(T, N, x.size(1))
        masks = masks.view(T, N)
        # Steps (after the first) where some env starts a new episode.
        has_zeros = (masks[1:] == 0.0).any(dim=-1).nonzero().squeeze(-1).add(1).tolist()
        boundaries = [0] + has_zeros + [T]

        hxs = hxs.unsqueeze(0)
        outputs = []
        for start, end in zip(boundaries[:-1], boundaries[1:]):
            out, hxs = self.gru(x[start:end], hxs * masks[start].view(1, -1, 1))
            outputs.append(out)
        x = torch.cat(outputs, dim=0).view(T * N, -1)
        return x, hxs.squeeze(0)


class CNNBase(NNBase):
    """The Nature DQN torso on uint8 (or 0..255 float) images (C, 84, 84)."""

    def __init__(self, num_inputs: int, recurrent: bool = False, hidden_size: int = 512,
                 activation: str = "relu") -> None:
        super().__init__(recurrent, hidden_size, hidden_size)
        act = ACTIVATIONS[activation]
        gain = nn.init.calculate_gain(cast(Literal["tanh", "relu"], activation))  # a key of ACTIVATIONS
        self.main = nn.Sequential(
            init(nn.Conv2d(num_inputs, 32, 8, stride=4), gain), act(),
            init(nn.Conv2d(32, 64, 4, stride=2), gain), act(),
            init(nn.Conv2d(64, 32, 3, stride=1), gain), act(), nn.Flatten(),
            init(nn.Linear(32 * 7 * 7, hidden_size), gain), act())
        self.critic_linear = init(nn.Linear(hidden_size, 1))
        # Channels-last (NHWC) convolutions: oneDNN's fast path on the CPU (docs/benchmarks.md,
        # "Measured code choices"); tensor-core friendly on GPUs. The input is converted while
        # still uint8, a quarter of the bytes of floats.
        # Module.to takes memory_format (documented, and it works); torch's overloads omit it.
        self.main.to(memory_format=torch.channels_last)  # type: ignore[call-overload]

    def forward(self, inputs: torch.Tensor, rnn_hxs: torch.Tensor,
                masks: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """-> value (N, 1), actor features (N, hidden_size), rnn_hxs (N, H)."""
        x = self.main(inputs.contiguous(memory_format=torch.channels_last).float() / 255.0)
        if self.is_recurrent:
            x, rnn_hxs = self._forward_gru(x, rnn_hxs, masks)
        return self._value(x), x, rnn_hxs


class MLPBase(NNBase):
    """Separate actor and critic MLPs (two layers of ``hidden_size``, tanh or ReLU) on vectors."""

    def __init__(self, num_inputs: int, recurrent: bool = False, hidden_size: int = 64,
                 activation: str = "tanh", layer_norm: bool = False) -> None:
        super().__init__(recurrent, num_inputs, hidden_size)
        if recurrent:
            num_inputs = hidden_size
        gain = math.sqrt(2)  # the original's gain for tanh, kept for ReLU (it is ReLU's gain)

        def layer(n_in: int) -> list[nn.Module]:
            norm = [nn.LayerNorm(hidden_size)] if layer_norm else []
            return [init(nn.Linear(n_in, hidden_size), gain), *norm, ACTIVATIONS[activation]()]

        def tower() -> nn.Sequential:
            return nn.Sequential(*layer(num_inputs), *layer(hidden_size))
        self.actor, self.critic = tower(), tower()
        self.critic_linear = init(nn.Linear(hidden_size, 1))

    def forward(self, inputs: torch.Tensor, rnn_hxs: torch.Tensor,
                masks: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """-> value (N, 1), actor features (N, hidden_size), rnn_hxs (N, H)."""
        x = inputs
        if self.is_recurrent:
            x, rnn_hxs = self._forward_gru(x, rnn_hxs, masks)
        return self._value(self.critic(x)), self.actor(x), rnn_hxs
