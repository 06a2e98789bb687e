"""ValueNorm (a2c_ppo_acktr/value_norm.py): SB3's running statistics, values in reward units,
and PPO with it equal to PPO without it on returns in the head's units."""
import copy

import numpy as np
import torch
from gymnasium import spaces
from stable_baselines3.common.running_mean_std import RunningMeanStd as SB3RunningMeanStd

from a2c_ppo_acktr.algo import PPO
from a2c_ppo_acktr.model import Policy, make_policy, policy_kwargs
from a2c_ppo_acktr.settings.arguments import get_config
from a2c_ppo_acktr.value_norm import EPS, ValueNorm
from tests.algo.test_ppo import N, T, bandit_rollout


def test_statistics_match_stable_baselines3():
    norm, reference = ValueNorm(), SB3RunningMeanStd(epsilon=1e-4, shape=())
    assert norm.scale.item() == 1.0  # before any data: the head's units are reward units
    g = np.random.default_rng(0)
    for size, spread in ((64, 3.0), (5, 0.1), (200, 10.0)):
        batch = g.normal(1.0, spread, size)
        norm.update(torch.tensor(batch, dtype=torch.float32).view(-1, 1))
        reference.update(batch.astype(np.float32).astype(np.float64))
        np.testing.assert_allclose([norm.mean.item(), norm.var.item(), norm.count.item()],
                                   [reference.mean, reference.var, reference.count], rtol=1e-9)
        np.testing.assert_allclose(norm.scale.item(), np.sqrt(reference.var + EPS), rtol=1e-6)


def test_values_come_in_reward_units_and_the_statistics_travel_with_the_weights():
    torch.manual_seed(0)
    plain = Policy((3,), spaces.Discrete(2), base_kwargs={"hidden_size": 8})
    normed = make_policy((3,), spaces.Discrete(2), policy_kwargs(get_config(
        ["--algo", "ppo", "--hidden-size", "8", "--value-norm"]).policy))
    normed.load_state_dict(plain.state_dict(), strict=False)  # the same network
    normed.value_norm.update(torch.tensor([-6.0, 0.0, 6.0]))
    s = normed.value_norm.scale
    obs, hxs, masks = torch.randn(5, 3), torch.zeros(5, 1), torch.ones(5, 1)
    torch.testing.assert_close(normed.get_value(obs, hxs, masks), s * plain.get_value(obs, hxs, masks))
    torch.manual_seed(1)
    value, action, _, _ = normed.act(obs, hxs, masks)
    torch.testing.assert_close(value, s * plain.act(obs, hxs, masks)[0])
    torch.testing.assert_close(normed.evaluate_actions(obs, hxs, masks, action)[0],
                               s * plain.evaluate_actions(obs, hxs, masks, action)[0])
    assert "value_norm" not in policy_kwargs(get_config([]).policy)  # old versions load default runs
    copy_ = make_policy((3,), spaces.Discrete(2), policy_kwargs(get_config(
        ["--algo", "ppo", "--hidden-size", "8", "--value-norm"]).policy))
    copy_.load_state_dict(normed.state_dict())  # strict: the buffers are in the state dict
    assert copy_.value_norm.scale.item() == s.item() and copy_.value_norm.count.item() > 3


def test_ppo_with_value_norm_is_ppo_on_returns_in_the_heads_units():
    """A policy whose values are scaled by s, on a rollout whose returns and values are s times a
    plain policy's, takes the plain policy's steps (advantages standardized: scale-free); then
    its statistics take the rollout's returns."""
    torch.manual_seed(0)
    plain = Policy((3,), spaces.Discrete(2), base_kwargs={"hidden_size": 8})
    rollouts = bandit_rollout(plain, torch.tensor([[1.0], [-1.0]]))
    normed = Policy((3,), spaces.Discrete(2), base_kwargs={"hidden_size": 8}, value_norm=True)
    normed.load_state_dict(plain.state_dict(), strict=False)
    normed.value_norm.update(torch.tensor([-3.0, 1.0, 4.0]))
    s, count = normed.value_norm.scale.item(), normed.value_norm.count.item()
    scaled = copy.deepcopy(rollouts)
    scaled.returns *= s
    scaled.value_preds *= s
    results = []
    for policy, r in ((plain, rollouts), (normed, scaled)):
        torch.manual_seed(1)  # the same minibatches
        agent = PPO(policy, 0.2, 3, 2, 0.5, 0.01, lr=1e-2, eps=1e-5, max_grad_norm=0.5)
        results.append(list(agent.update(r).values()))
    np.testing.assert_allclose(results[0], results[1], rtol=1e-4, atol=1e-6)
    for name, param in plain.named_parameters():
        torch.testing.assert_close(dict(normed.named_parameters())[name], param, rtol=1e-4,
                                   atol=1e-5)
    reference = SB3RunningMeanStd(epsilon=1e-4, shape=())
    reference.update(np.array([-3.0, 1.0, 4.0]))
    reference.update(scaled.returns[:-1].reshape(-1).double().numpy())
    assert normed.value_norm.count.item() == count + T * N
    np.testing.assert_allclose(normed.value_norm.var.item(), reference.var, rtol=1e-6)
