"""Action heads: a linear layer from features to the parameters of an action distribution.

Each head's ``forward`` returns a light distribution object with the interface of the original
(``sample``, ``log_probs``, ``mode``, ``entropy``), written out by hand rather than wrapping
``torch.distributions``, whose argument checks cost more than a small batched forward;
``tests/test_distributions.py`` checks every formula against ``torch.distributions``.

Shapes (N = batch): ``log_probs(actions)`` -> (N, 1), summed over action dimensions;
``entropy()`` -> (N,); ``sample()`` / ``mode()`` -> (N, 1) long for Categorical, (N, D) long for
MultiCategorical, (N, D) float for DiagGaussian and Bernoulli, the layout ``RolloutStorage.actions``
keeps. ``sample(generator)`` draws from that ``torch.Generator``, by default torch's global one.
"""
import math
from typing import TypeVar

import torch
import torch.nn as nn
import torch.nn.functional as F

_HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)


M = TypeVar("M", nn.Linear, nn.Conv2d)


def init(module: M, gain: float = 1.0) -> M:
    """Orthogonal weights with ``gain`` and zero biases, as the original initialises every layer."""
    nn.init.orthogonal_(module.weight, gain=gain)
    if module.bias is not None:
        nn.init.constant_(module.bias, 0)
    return module


def _normal(like: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
    """N(0, 1) noise shaped like ``like``, from ``generator`` (None: the global one, by
    ``randn_like``, which takes no generator)."""
    if generator is None:
        return torch.randn_like(like)
    return torch.randn(like.shape, generator=generator, dtype=like.dtype, device=like.device)


def _uniform(like: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
    """U[0, 1) noise shaped like ``like``, from ``generator`` (None: the global one)."""
    if generator is None:
        return torch.rand_like(like)
    return torch.rand(like.shape, generator=generator, dtype=like.dtype, device=like.device)


class CategoricalDist:
    """Categorical over ``logits`` (N, K)."""

    __slots__ = ("logits",)

    def __init__(self, logits: torch.Tensor) -> None:
        self.logits = torch.log_softmax(logits, -1)  # normalized log-probabilities

    def sample(self, generator: torch.Generator | None = None) -> torch.Tensor:
        # Inverse CDF: the first k with cdf[k] >= u, u ~ U[0, 1); cheaper than torch.multinomial
        # for a few rows (docs/benchmarks.md, "Measured code choices"). The clamp guards a u
        # above a last cdf that rounding left below 1.
        cdf = self.logits.exp().cumsum_(-1)
        u = torch.rand(cdf.shape[:-1] + (1,), generator=generator, device=cdf.device,
                       dtype=cdf.dtype)
        return torch.searchsorted(cdf, u).clamp_(max=cdf.size(-1) - 1)

    def log_probs(self, actions: torch.Tensor) -> torch.Tensor:
        return self.logits.gather(-1, actions.long())

    def mode(self) -> torch.Tensor:
        return self.logits.argmax(-1, keepdim=True)

    def entropy(self) -> torch.Tensor:
        return -(self.logits.exp() * self.logits).sum(-1)


class MultiCategoricalDist:
    """Independent categoricals, one per action dimension (SB3's MultiDiscrete): ``logits``
    (N, sum(nvec)) split into (N, nvec[d]); log-probabilities and entropies add up over them."""

    __slots__ = ("dists",)

    def __init__(self, logits: torch.Tensor, nvec: list[int]) -> None:
        self.dists = [CategoricalDist(part) for part in torch.split(logits, nvec, dim=-1)]

    def sample(self, generator: torch.Generator | None = None) -> torch.Tensor:
        return torch.cat([d.sample(generator) for d in self.dists], -1)

    def log_probs(self, actions: torch.Tensor) -> torch.Tensor:
        columns = actions.split(1, -1)
        return torch.stack([d.log_probs(a) for d, a in zip(self.dists, columns)]).sum(0)

    def mode(self) -> torch.Tensor:
        return torch.cat([d.mode() for d in self.dists], -1)

    def entropy(self) -> torch.Tensor:
        return torch.stack([d.entropy() for d in self.dists]).sum(0)


class DiagGaussianDist:
    """Independent normals with ``mean`` (N, D) and state-independent ``logstd`` (D,)."""

    __slots__ = ("mean", "logstd")

    def __init__(self, mean: torch.Tensor, logstd: torch.Tensor) -> None:
        self.mean, self.logstd = mean, logstd

    def sample(self, generator: torch.Generator | None = None) -> torch.Tensor:
        return self.mean + self.logstd.exp() * _normal(self.mean, generator)

    def log_probs(self, actions: torch.Tensor) -> torch.Tensor:
        z = (actions - self.mean) * torch.exp(-self.logstd)
        return (-0.5 * z.pow(2) - self.logstd - _HALF_LOG_2PI).sum(-1, keepdim=True)

    def mode(self) -> torch.Tensor:
        return self.mean

    def entropy(self) -> torch.Tensor:
        ent = (0.5 + _HALF_LOG_2PI + self.logstd).sum(-1)
        return ent.expand(self.mean.shape[:-1])


class BernoulliDist:
    """Independent Bernoulli variables with ``logits`` (N, D); actions are 0./1. floats."""

    __slots__ = ("logits",)

    def __init__(self, logits: torch.Tensor) -> None:
        self.logits = logits

    def sample(self, generator: torch.Generator | None = None) -> torch.Tensor:
        return (_uniform(self.logits, generator) < torch.sigmoid(self.logits)).float()

    def log_probs(self, actions: torch.Tensor) -> torch.Tensor:
        lp = -F.binary_cross_entropy_with_logits(self.logits, actions, reduction="none")
        return lp.sum(-1, keepdim=True)

    def mode(self) -> torch.Tensor:
        return (self.logits > 0).float()

    def entropy(self) -> torch.Tensor:
        p = torch.sigmoid(self.logits)
        return F.binary_cross_entropy_with_logits(self.logits, p, reduction="none").sum(-1)


class Categorical(nn.Module):
    """Head for ``Discrete(K)`` action spaces."""

    def __init__(self, num_inputs: int, num_outputs: int) -> None:
        super().__init__()
        # Small gain: the initial policy is close to uniform (as the original).
        self.linear = init(nn.Linear(num_inputs, num_outputs), gain=0.01)

    def forward(self, x: torch.Tensor) -> CategoricalDist:
        return CategoricalDist(self.linear(x))


class MultiCategorical(nn.Module):
    """Head for 1-D ``MultiDiscrete(nvec)`` action spaces: one linear layer gives the logits of
    every dimension at once."""

    def __init__(self, num_inputs: int, nvec: list[int]) -> None:
        super().__init__()
        self.nvec = [int(n) for n in nvec]
        self.linear = init(nn.Linear(num_inputs, sum(self.nvec)), gain=0.01)  # as Categorical

    def forward(self, x: torch.Tensor) -> MultiCategoricalDist:
        return MultiCategoricalDist(self.linear(x), self.nvec)


class DiagGaussian(nn.Module):
    """Head for ``Box`` action spaces; the log-std is a free parameter, not a function of the state."""

    def __init__(self, num_inputs: int, num_outputs: int, log_std_init: float = 0.0,
                 mean_gain: float = 1.0) -> None:
        super().__init__()
        self.fc_mean = init(nn.Linear(num_inputs, num_outputs), gain=mean_gain)
        self.logstd = nn.Parameter(torch.full((num_outputs,), float(log_std_init)))

    def forward(self, x: torch.Tensor) -> DiagGaussianDist:
        return DiagGaussianDist(self.fc_mean(x), self.logstd)


class Bernoulli(nn.Module):
    """Head for ``MultiBinary(D)`` action spaces."""

    def __init__(self, num_inputs: int, num_outputs: int) -> None:
        super().__init__()
        self.linear = init(nn.Linear(num_inputs, num_outputs))

    def forward(self, x: torch.Tensor) -> BernoulliDist:
        return BernoulliDist(self.linear(x))
