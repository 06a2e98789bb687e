"""layers.call / run: the same outputs and gradients as the module calls, bit for bit, and hooks
still run."""
import numpy as np
import pytest
import torch
import torch.nn as nn
from gymnasium import spaces

from a2c_ppo_acktr.layers import call, run
from a2c_ppo_acktr.model import Policy

SPACES = [spaces.Discrete(3), spaces.Box(-1, 1, (2,), np.float32), spaces.MultiBinary(4),
          spaces.MultiDiscrete([3, 2])]


@pytest.mark.parametrize("layer", [nn.Linear(5, 7), nn.Linear(5, 7, bias=False), nn.Tanh(),
                                   nn.ReLU(), nn.Sigmoid()])
def test_call_is_the_module_call(layer):
    x = torch.randn(9, 5)
    assert torch.equal(call(layer, x), layer(x))


def test_run_matches_sequential_with_gradients():
    torch.manual_seed(0)
    seq = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 8), nn.ReLU())
    x = torch.randn(16, 4)
    run(seq, x).pow(2).sum().backward()
    fast = [p.grad.clone() for p in seq.parameters()]
    seq.zero_grad()
    seq(x).pow(2).sum().backward()
    assert all(torch.equal(a, p.grad) for a, p in zip(fast, seq.parameters()))


def test_a_hooked_layer_is_called_as_a_module():
    seq = nn.Sequential(nn.Linear(4, 3), nn.Tanh())
    seen = []
    seq[0].register_forward_hook(lambda m, i, o: seen.append(o.shape) or o * 0)
    out = run(seq, torch.randn(2, 4))
    assert seen == [(2, 3)] and torch.equal(out, torch.zeros(2, 3))


@pytest.mark.parametrize("space", SPACES, ids=lambda s: type(s).__name__)
def test_policy_same_as_through_the_modules(space):
    """A global hook sends every call through ``nn.Module.__call__``: the reference."""
    torch.manual_seed(0)
    policy = Policy((5,), space)
    obs, hxs, masks = torch.randn(6, 5), torch.zeros(6, 1), torch.ones(6, 1)

    def outputs():
        torch.manual_seed(1)
        value, action, log_prob, _ = policy.act(obs, hxs, masks)
        value2, log_prob2, entropy, _ = policy.evaluate_actions(obs, hxs, masks, action)
        policy.zero_grad()
        (value2.sum() + log_prob2.sum() + entropy).backward()
        return [value, action, log_prob, value2, log_prob2, entropy,
                *(p.grad.clone() for p in policy.parameters())]

    fast = outputs()
    calls = []
    handle = nn.modules.module.register_module_forward_hook(lambda m, i, o: calls.append(m))
    try:
        reference = outputs()
    finally:
        handle.remove()
    assert calls  # the reference did go through the modules
    assert all(torch.equal(a, b) for a, b in zip(fast, reference))
