"""The agents' learning-rate schedules (algo/agent.py, PPO's adaptive KL rate) and the Agent
interface that the loop relies on; the parameters as one tensor (FlatParams) and its clipping,
against torch's own optimizers and clipping."""
import copy

import pytest
import torch
from gymnasium import spaces

from a2c_ppo_acktr.algo import A2C_ACKTR, PPO, LinearDecay
from a2c_ppo_acktr.algo.agent import FlatParams, load_optimizer_state
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


def _rollout(policy, T=16, N=4, space=spaces.Discrete(2)):
    torch.manual_seed(0)
    r = RolloutStorage(T, N, (3,), space, policy.recurrent_hidden_state_size)
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
    flat = FlatParams(params)
    for p, g in zip(params, grads):
        p.grad.copy_(g)
    total = flat.clip_grad_norm(0.5)
    ours = [p.grad.clone() for p in params]
    for p, g in zip(params, grads):
        p.grad = g.clone()
    want = torch.nn.utils.clip_grad_norm_(params, 0.5, foreach=True)
    assert torch.equal(total, want)
    assert all(torch.equal(a, p.grad) for a, p in zip(ours, params))


def test_flat_params_are_views_that_keep_their_values():
    policy = Policy((3,), spaces.Box(-1, 1, (2,)))
    before = copy.deepcopy(policy.state_dict())
    flat = FlatParams(list(policy.parameters()))
    assert flat.flat.numel() >= sum(p.numel() for p in policy.parameters())
    assert all(torch.equal(before[k], v) for k, v in policy.state_dict().items())
    with torch.no_grad():
        flat.flat.add_(1.0)  # one op moves every parameter
    assert all(torch.equal(before[k] + 1, v) for k, v in policy.state_dict().items())
    policy.zero_grad()  # set_to_none elsewhere: zero_grad links the views again
    assert all(p.grad is None for p in policy.parameters())
    flat.zero_grad()
    policy.get_value(torch.ones(4, 3), torch.zeros(4, 1), torch.ones(4, 1)).sum().backward()
    assert flat.grad.abs().sum() > 0  # backward added into the one gradient tensor


@pytest.mark.parametrize("batch", [1, 2, 3, 8])
def test_flat_params_act_as_the_separate_tensors(batch):
    """The views start aligned: a matrix product on a weight that starts elsewhere can round
    differently (on this CPU a (1, 64) action layer on 2 or 3 rows did)."""
    torch.manual_seed(0)
    policy = Policy((3,), spaces.Box(-1, 1, (1,)))
    reference = copy.deepcopy(policy)
    FlatParams(list(policy.parameters()))
    obs, hxs, masks = torch.randn(batch, 3), torch.zeros(batch, 1), torch.ones(batch, 1)
    with torch.inference_mode():
        ours = policy.act(obs, hxs, masks, deterministic=True)
        want = reference.act(obs, hxs, masks, deterministic=True)
    assert all(torch.equal(a, b) for a, b in zip(ours, want))


def _torchs_update(reference, optimizer, loss, max_grad_norm):
    """One step as torch does it on the separate tensors."""
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(list(reference.parameters()), max_grad_norm, foreach=True)
    optimizer.step()


@pytest.mark.parametrize("space", [spaces.Discrete(3), spaces.Box(-1, 1, (2,))])
def test_a2c_steps_its_flat_params_as_torchs_rmsprop(space):
    torch.manual_seed(0)
    policy = Policy((3,), space)
    reference = copy.deepcopy(policy)  # its parameters stay apart: the loss, on torch's own
    agent = A2C_ACKTR(policy, 0.5, 0.01, lr=7e-4, eps=1e-5, alpha=0.99, max_grad_norm=0.5)
    ref_agent = A2C_ACKTR(copy.deepcopy(reference), 0.5, 0.01, lr=7e-4, eps=1e-5, alpha=0.99,
                          max_grad_norm=0.5)
    ref_agent.actor_critic = reference
    optimizer = torch.optim.RMSprop(reference.parameters(), 7e-4, eps=1e-5, alpha=0.99,
                                    foreach=True)
    for _ in range(5):
        rollouts = _rollout(policy, space=space)
        agent.update(rollouts)
        T, N, _ = rollouts.rewards.shape
        obs, masks, actions, returns = (x[:T].reshape(T * N, *x.shape[2:]) for x in
                                        (rollouts.obs, rollouts.masks, rollouts.actions,
                                         rollouts.returns))
        loss, _, _ = ref_agent.loss(obs, rollouts.recurrent_hidden_states[0], masks, actions,
                                    returns)
        _torchs_update(reference, optimizer, loss, 0.5)
        assert all(torch.equal(a, b) for a, b in zip(policy.parameters(), reference.parameters()))


@pytest.mark.parametrize("space", [spaces.Discrete(2), spaces.Box(-1, 1, (1,))])
def test_ppo_steps_as_torchs_adam_with_flat_gradients(space):
    torch.manual_seed(0)
    policy = Policy((3,), space)
    reference = copy.deepcopy(policy)  # its parameters stay apart: the loss, on torch's own
    agent = PPO(policy, 0.2, 1, 1, 0.5, 0.01, lr=3e-4, eps=1e-5, max_grad_norm=0.5)
    ref_agent = PPO(copy.deepcopy(reference), 0.2, 1, 1, 0.5, 0.01, lr=3e-4, eps=1e-5,
                    max_grad_norm=0.5)
    ref_agent.actor_critic = reference
    optimizer = torch.optim.Adam(reference.parameters(), 3e-4, eps=1e-5, fused=True)
    for _ in range(5):
        rollouts = _rollout(policy, space=space)
        torch.manual_seed(1)  # the same minibatch order
        agent.update(rollouts)
        torch.manual_seed(1)
        batch = next(rollouts.feed_forward_generator(ref_agent._advantages(rollouts), 1))
        loss, _ = ref_agent.loss(batch)
        _torchs_update(reference, optimizer, loss, 0.5)
        assert all(torch.equal(a, b) for a, b in zip(policy.parameters(), reference.parameters()))


@pytest.mark.parametrize("obs_shape", [(3,), (4, 84, 84)])  # the CNN's convolutions: channels_last
def test_a2c_loads_the_optimizer_state_of_separate_tensors(obs_shape):
    """A checkpoint from before A2C stepped one flat tensor resumes to the same weights."""
    torch.manual_seed(0)
    policy = Policy(obs_shape, spaces.Discrete(2))
    reference = copy.deepcopy(policy)
    optimizer = torch.optim.RMSprop(reference.parameters(), 7e-4, eps=1e-5, alpha=0.99)
    for p in reference.parameters():
        p.grad = torch.randn_like(p)
    optimizer.step()
    agent = A2C_ACKTR(policy, 0.5, 0.01, lr=7e-4, eps=1e-5, alpha=0.99, max_grad_norm=0.5)
    policy.load_state_dict(reference.state_dict())
    load_optimizer_state(agent.optimizer, copy.deepcopy(optimizer.state_dict()))
    for p, q in zip(policy.parameters(), reference.parameters()):
        p.grad.copy_(q.grad)
    optimizer.step()
    agent.optimizer.step()
    assert all(torch.equal(a, b) for a, b in zip(policy.parameters(), reference.parameters()))
    state = optimizer.state_dict()
    state["state"].pop(0)  # one entry missing: refused in one line
    with pytest.raises(ValueError, match="holds 11 of"):
        load_optimizer_state(agent.optimizer, state)
