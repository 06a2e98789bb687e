"""A researcher's edits work with the speed seam on (speed.speed_up): a loss term, a network
layer, another torch.optim optimizer, a new statistic; each trains, and to the same weights bit
for bit as with the seam off. (That the seam is applied once, as a run opens, and said:
tests/run/test_start.py.)"""

import pytest
import torch
import torch.nn as nn
from gymnasium import spaces

from a2c_ppo_acktr import speed
from a2c_ppo_acktr.algo import A2C_ACKTR, PPO
from a2c_ppo_acktr.model import MLPBase, Policy
from a2c_ppo_acktr.storage import Minibatch, RolloutStorage

pytestmark = pytest.mark.research  # the research tier: what a change to the core needs

T, N, OBS = 16, 4, 3


class L2PPO(PPO):
    """PPO with an extra loss term (weight decay on the policy's parameters) and its statistic."""

    def loss(self, b: Minibatch) -> tuple[torch.Tensor, torch.Tensor]:
        loss, stats = super().loss(b)
        return loss + 1e-3 * sum(p.pow(2).sum() for p in self.params), stats

    def update(self, rollouts: RolloutStorage) -> dict[str, float]:
        stats = super().update(rollouts)
        return {**stats, "l2": sum(p.pow(2).sum() for p in self.params).item()}


class NormedBase(MLPBase):
    """A network edit: a LayerNorm first in the actor's tower, and a forward of its own."""

    def __init__(self, num_inputs: int, **kwargs) -> None:
        super().__init__(num_inputs, **kwargs)
        self.norm = nn.LayerNorm(num_inputs)

    def forward(self, inputs, rnn_hxs, masks):
        value, features, rnn_hxs = super().forward(self.norm(inputs), rnn_hxs, masks)
        return value, torch.tanh(features) * 2, rnn_hxs


def ppo(policy):
    return PPO(policy, 0.2, 2, 2, 0.5, 0.01, lr=1e-3, eps=1e-5, max_grad_norm=0.5)


def with_sgd(policy):
    agent = ppo(policy)
    agent.optimizer = torch.optim.SGD(agent.params, lr=0.05, momentum=0.9)
    return agent


EDITS = {
    "loss term": (lambda: Policy((OBS,), spaces.Discrete(2)),
                  lambda p: L2PPO(p, 0.2, 2, 2, 0.5, 0.01, lr=1e-3, eps=1e-5, max_grad_norm=0.5)),
    "layer": (lambda: Policy((OBS,), spaces.Box(-1, 1, (2,)), base=NormedBase), ppo),
    "optimizer": (lambda: Policy((OBS,), spaces.Discrete(3)), with_sgd),
    "a2c": (lambda: Policy((OBS,), spaces.Discrete(2)),
            lambda p: A2C_ACKTR(p, 0.5, 0.01, lr=7e-4, eps=1e-5, alpha=0.99, max_grad_norm=0.5)),
    "recurrent": (lambda: Policy((OBS,), spaces.Discrete(2), base_kwargs={"recurrent": True}), ppo),
}


def train(edit, mechanisms, monkeypatch, updates=3):
    """``updates`` updates of the ``edit``'s agent on rollouts its policy collects (inserted step
    by step) from a fixed stream of observations and rewards; -> the policy, the applied
    mechanisms and the last statistics."""
    monkeypatch.setattr(speed, "ENABLED", set(mechanisms))
    make_policy, make_agent = EDITS[edit]
    torch.manual_seed(0)
    policy = make_policy()
    agent = make_agent(policy)
    action_space = policy.dist  # the storage's action layout follows the head
    space = (spaces.Box(-1, 1, (2,)) if type(action_space).__name__ == "DiagGaussian"
             else spaces.Discrete(2))
    rollouts = RolloutStorage(T, N, (OBS,), space, policy.recurrent_hidden_state_size)
    applied = speed.speed_up(policy, agent)
    data = torch.Generator().manual_seed(1)
    stats = {}
    for _ in range(updates):
        with torch.inference_mode():
            for step in range(T):
                value, action, log_prob, hxs = policy.act(
                    rollouts.obs[step], rollouts.recurrent_hidden_states[step],
                    rollouts.masks[step])
                obs, reward = torch.randn(N, OBS, generator=data), torch.randn(N, 1, generator=data)
                masks = (torch.rand(N, 1, generator=data) > 0.1).float()
                rollouts.insert(obs, hxs, action, log_prob, value, reward, masks,
                                torch.ones(N, 1))
            next_value = policy.get_value(rollouts.obs[-1], rollouts.recurrent_hidden_states[-1],
                                          rollouts.masks[-1])
        rollouts.compute_returns(next_value, True, 0.99, 0.95)
        torch.manual_seed(2)
        stats = agent.update(rollouts)
        rollouts.after_update()
    return policy, applied, stats


@pytest.mark.parametrize("edit", EDITS)
def test_an_edit_trains_with_the_seam_on_as_with_it_off(edit, monkeypatch):
    plain, applied, plain_stats = train(edit, [], monkeypatch)
    assert applied == []
    fast, applied, stats = train(edit, speed.MECHANISMS, monkeypatch)
    assert set(applied) >= {"flat", "layers"}  # "optim": not for SGD
    assert ("optim" in applied) is (edit != "optimizer")
    assert stats == plain_stats and all(map(torch.isfinite, map(torch.tensor, stats.values())))
    if edit == "loss term":
        assert "l2" in stats
    torch.manual_seed(0)
    initial = EDITS[edit][0]()
    for (name, p), q in zip(fast.named_parameters(), plain.parameters()):
        assert torch.equal(p, q), name
    assert any(not torch.equal(p, p0) for p, p0 in zip(fast.parameters(), initial.parameters()))


def test_each_mechanism_alone(monkeypatch):
    """Each one switched on alone gives the plain run's weights too (the A/B of a benchmark)."""
    plain, _, _ = train("a2c", [], monkeypatch, updates=2)
    for mechanism in speed.MECHANISMS:
        fast, applied, _ = train("a2c", [mechanism], monkeypatch, updates=2)
        assert applied == [mechanism]
        assert all(torch.equal(p, q) for p, q in zip(fast.parameters(), plain.parameters()))
