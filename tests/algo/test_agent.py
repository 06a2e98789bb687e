"""The agents' learning-rate schedules (algo/agent.py, PPO's adaptive KL rate) and the Agent
interface that the loop relies on; the shared gradient clipping."""
import pytest
import torch
from gymnasium import spaces

from a2c_ppo_acktr.algo import A2C_ACKTR, PPO, LinearDecay
from a2c_ppo_acktr.algo.agent import clip_grad_norm
from a2c_ppo_acktr.algo.ppo import KL_LR_FACTOR
from a2c_ppo_acktr.model import Policy
from a2c_ppo_acktr.storage import RolloutStorage


def test_linear_decay_follows_its_horizon_not_the_budget():
    opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    decay = LinearDecay(opt, horizon=400)
    assert decay(0) == 1.0
    assert decay(300) == 0.25 and opt.param_groups[0]["lr"] == 0.25
    assert decay(500) == 0.0  # past the horizon it stays at 0


@pytest.mark.parametrize("make", [
    lambda p, h: PPO(p, 0.2, 1, 1, 0.5, 0.01, lr=1e-3, eps=1e-5, max_grad_norm=0.5,
                     lr_decay_horizon=h),
    lambda p, h: A2C_ACKTR(p, 0.5, 0.01, lr=1e-3, eps=1e-5, alpha=0.99, max_grad_norm=0.5,
                           lr_decay_horizon=h),
    lambda p, h: A2C_ACKTR(p, 0.5, 0.01, acktr=True, lr_decay_horizon=h),
])
def test_agents_decay_their_own_lr(make):
    """ACKTR decays K-FAC's lr (0.25), the others --lr; without a horizon nothing changes."""
    policy = Policy((3,), spaces.Discrete(2))
    agent = make(policy, 1000)
    start = agent.optimizer.param_groups[0]["lr"]
    agent.adjust_lr(250)
    assert agent.optimizer.param_groups[0]["lr"] == pytest.approx(0.75 * start)
    fixed = make(policy, None)
    fixed.adjust_lr(250)
    assert fixed.optimizer.param_groups[0]["lr"] == start


def _rollout(policy, T=16, N=4):
    torch.manual_seed(0)
    r = RolloutStorage(T, N, (3,), spaces.Discrete(2), policy.recurrent_hidden_state_size)
    r.obs.normal_()
    with torch.no_grad():
        for t in range(T):
            value, action, log_prob, _ = policy.act(r.obs[t], r.recurrent_hidden_states[t],
                                                    r.masks[t])
            r.actions[t], r.action_log_probs[t], r.value_preds[t] = action, log_prob, value
    r.rewards.normal_()
    r.compute_returns(torch.zeros(N, 1), True, 0.99, 0.95)
    return r


@pytest.mark.parametrize("lr, desired_kl, factor", [
    (1e-6, 0.01, KL_LR_FACTOR ** 4),   # the policy barely moves: x1.5 after each of 4 epochs
    (0.05, 1e-6, KL_LR_FACTOR ** -4),  # it moves far past the target: /1.5 after each epoch
])
def test_adaptive_lr_follows_the_kl(lr, desired_kl, factor):
    policy = Policy((3,), spaces.Discrete(2))
    agent = PPO(policy, 0.2, 4, 2, 0.5, 0.0, lr=lr, eps=1e-5, max_grad_norm=0.5,
                desired_kl=desired_kl)
    agent.update(_rollout(policy))
    assert agent.optimizer.param_groups[0]["lr"] == pytest.approx(lr * factor)
    agent.adjust_lr(10**6)  # no linear decay: the adaptive rate is left alone
    assert agent.optimizer.param_groups[0]["lr"] == pytest.approx(lr * factor)


@pytest.mark.parametrize("scale", [1e-3, 10.0])  # under and over max_norm
def test_clip_grad_norm_is_torchs_bit_for_bit(scale):
    torch.manual_seed(0)
    params = [torch.nn.Parameter(torch.randn(*shape)) for shape in ((64, 4), (64,), (2, 64), (3,))]
    grads = [torch.randn_like(p) * scale for p in params]
    params.append(torch.nn.Parameter(torch.randn(5)))  # no gradient: skipped, as torch does
    for p, g in zip(params, grads):
        p.grad = g.clone()
    total = clip_grad_norm(params, 0.5)
    ours = [p.grad for p in params[:-1]]
    for p, g in zip(params, grads):
        p.grad = g.clone()
    want = torch.nn.utils.clip_grad_norm_(params, 0.5, foreach=True)
    assert torch.equal(total, want)
    assert all(torch.equal(a, p.grad) for a, p in zip(ours, params))
    assert params[-1].grad is None
