"""A2C_ACKTR.update: one RMSprop (A2C) or K-FAC (ACKTR) step toward advantageous actions and the
returns."""
import math

import numpy as np
import pytest
import torch
from gymnasium import spaces

from a2c_ppo_acktr.algo import A2C_ACKTR, KFACOptimizer
from a2c_ppo_acktr.model import Policy
from a2c_ppo_acktr.settings.arguments import get_args
from a2c_ppo_acktr.storage import RolloutStorage
from tests.algo.test_ppo import N, T, bandit_rollout, prob_of_action_0


@pytest.mark.slow
@pytest.mark.parametrize("recurrent", [False, True])
def test_a2c_update_prefers_rewarded_action_and_fits_values(recurrent):
    torch.manual_seed(0)
    policy = Policy((3,), spaces.Discrete(2), base_kwargs={"recurrent": recurrent, "hidden_size": 16})
    agent = A2C_ACKTR(policy, value_loss_coef=0.5, entropy_coef=0.0, lr=3e-3, eps=1e-5,
                      alpha=0.99, max_grad_norm=0.5)
    probe = torch.randn(64, 3)
    before = prob_of_action_0(policy, probe)
    value_losses = []
    for _ in range(30):
        rollouts = bandit_rollout(policy, torch.tensor([[1.0], [0.0]]))
        value_losses.append(agent.update(rollouts)["value_loss"])
    assert prob_of_action_0(policy, probe) > before + 0.1
    assert sum(value_losses[-5:]) < sum(value_losses[:5])


@pytest.mark.research
@pytest.mark.parametrize("missing", ["lr", "eps", "alpha", "max_grad_norm"])
def test_a2c_asks_for_the_hyperparameters_acktr_ignores(missing):
    """A2C cannot train with the original's None defaults (RMSprop or the first update's
    clipping failed with a TypeError): one clear error at construction. ACKTR ignores them."""
    policy = Policy((3,), spaces.Discrete(2), base_kwargs={"hidden_size": 8})
    kwargs = {"lr": 7e-4, "eps": 1e-5, "alpha": 0.99, "max_grad_norm": 0.5, missing: None}
    with pytest.raises(ValueError, match=f"A2C needs lr, eps, alpha and max_grad_norm.*{missing}=None"):
        A2C_ACKTR(policy, 0.5, 0.01, **kwargs)
    assert isinstance(A2C_ACKTR(policy, 0.5, 0.01, acktr=True, **kwargs).optimizer, KFACOptimizer)


@pytest.mark.slow
def test_acktr_update_prefers_rewarded_action_and_fits_values():
    torch.manual_seed(0)
    policy = Policy((3,), spaces.Discrete(2), base_kwargs={"hidden_size": 16})
    agent = A2C_ACKTR(policy, value_loss_coef=0.5, entropy_coef=0.0, lr=7e-4, acktr=True)
    assert isinstance(agent.optimizer, KFACOptimizer) and agent.optimizer.lr == 0.25
    probe = torch.randn(64, 3)
    before = prob_of_action_0(policy, probe)
    value_losses = []
    for _ in range(30):
        stats = agent.update(bandit_rollout(policy, torch.tensor([[1.0], [0.0]])))
        value_losses.append(stats["value_loss"])
    assert prob_of_action_0(policy, probe) > before + 0.1
    assert sum(value_losses[-5:]) < sum(value_losses[:5])
    # Every Linear layer of the policy has its Kronecker factors.
    linears = [m for m in policy.modules() if isinstance(m, torch.nn.Linear)]
    assert len(linears) == 6 and all("Q_a" in agent.optimizer.state[m.weight] for m in linears)


def gaussian_bandit_rollout(policy, target):
    """Box actions on random observations; reward -|a - target|^2, one-step episodes."""
    r = RolloutStorage(T, N, (3,), spaces.Box(-10, 10, (2,)), 1)
    r.obs.normal_()
    with torch.no_grad():
        for t in range(T):
            value, action, log_prob, hxs = policy.act(r.obs[t], r.recurrent_hidden_states[t],
                                                      r.masks[t])
            reward = -(action - target).pow(2).sum(1, keepdim=True)
            r.insert(r.obs[t + 1], hxs, action, log_prob, value, reward, torch.zeros(N, 1),
                     torch.ones(N, 1))
        r.compute_returns(torch.zeros(N, 1), True, 0.99, 0.95)
    return r


@pytest.mark.slow
def test_acktr_diag_gaussian_moves_mean_and_logstd():
    torch.manual_seed(0)
    policy = Policy((3,), spaces.Box(-10, 10, (2,)), base_kwargs={"hidden_size": 16})
    agent = A2C_ACKTR(policy, value_loss_coef=0.5, entropy_coef=0.0, acktr=True)
    probe = torch.randn(64, 3)

    def mean_action():
        with torch.no_grad():
            _, feats, _ = policy.base(probe, torch.zeros(64, 1), torch.ones(64, 1))
            return policy.dist(feats).mean.mean().item()

    before_mean, before_logstd = mean_action(), policy.dist.logstd.detach().clone()
    for _ in range(30):
        agent.update(gaussian_bandit_rollout(policy, 1.0))
    assert mean_action() > before_mean + 0.1
    assert not torch.equal(policy.dist.logstd.detach(), before_logstd)  # plain-gradient parameter


@pytest.mark.research
def test_acktr_kl_clip_setting_scales_the_step():
    """A trust region too wide to bind leaves the step whole (scale 1); a narrow one shrinks it."""
    scales = []
    for kl_clip in (1e30, 1e-9):
        torch.manual_seed(0)
        policy = Policy((4,), spaces.Discrete(2))
        agent = A2C_ACKTR(policy, 0.5, 0.01, acktr=True, kfac={"kl_clip": kl_clip})
        r = RolloutStorage(5, 3, (4,), spaces.Discrete(2), 1)
        r.obs.normal_()
        r.actions.random_(0, 2)
        r.returns.normal_()
        scales.append(agent.update(r)["kl_clip_scale"])
    assert scales[0] == 1.0 and 0 < scales[1] < 1e-2


@pytest.mark.slow
def test_acktr_cnn_base_updates_conv_layers():
    torch.manual_seed(0)
    policy = Policy((4, 84, 84), spaces.Discrete(3), base_kwargs={"hidden_size": 32})
    agent = A2C_ACKTR(policy, value_loss_coef=0.5, entropy_coef=0.01, acktr=True)
    r = RolloutStorage(2, 2, (4, 84, 84), spaces.Discrete(3), 1)
    r.obs.random_(0, 256)
    r.rewards.normal_()
    r.returns.normal_()
    convs = [m for m in policy.modules() if isinstance(m, torch.nn.Conv2d)]
    before = [m.weight.detach().clone() for m in convs]
    stats = agent.update(r)
    assert all(map(math.isfinite, stats.values()))
    assert 0 < stats["kl_clip_scale"] <= 1  # K-FAC's trust-region factor, logged
    for m, w in zip(convs, before):
        state = agent.optimizer.state[m.weight]
        k = m.in_channels * m.kernel_size[0] * m.kernel_size[1] + 1
        assert state["m_aa"].shape == (k, k) and state["m_gg"].shape == (m.out_channels,) * 2
        assert not torch.equal(m.weight.detach(), w)


@pytest.mark.research
def test_acktr_cli():
    assert get_args(["--algo", "acktr"]).algo == "acktr"
    with pytest.raises(SystemExit) as exc:
        get_args(["--algo", "acktr", "--recurrent-policy"])
    assert exc.value.code == 2


@pytest.mark.slow
def test_acktr_learns_cartpole(tmp_path):
    """ACKTR with K-FAC's defaults on CartPole: 60k steps, ~8 s. Seen for seed 1: the mean of the
    last 20 episodes is 500.0 (seeds 2, 3: 244, 498)."""
    from tests.test_main import monitor_returns, progress_rows, run

    paths = run(tmp_path, ["--algo", "acktr", "--env-name", "CartPole-v1", "--num-processes", "8",
                           "--num-steps", "20", "--num-env-steps", "60000", "--seed", "1",
                           "--log-interval", "100"])
    returns = monitor_returns(paths.log_dir)
    assert np.mean(returns[-20:]) >= 400, returns[-20:]
    scales = [float(r["kl_clip_scale"]) for r in progress_rows(paths.log_dir)]
    assert scales and all(0 < s <= 1 for s in scales), scales  # the trust region's factor
