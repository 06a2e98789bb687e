"""The agents' learning-rate schedules (algo/agent.py, PPO's adaptive KL rate) and the Agent
interface that the loop relies on: statistics by name, state for checkpoints (with the layout
older checkpoints saved A2C's optimizer in), torch.optim's own optimizers."""
import copy

import pytest
import torch
from gymnasium import spaces

from a2c_ppo_acktr.algo import A2C_ACKTR, PPO, LinearDecay
from a2c_ppo_acktr.algo.agent import Agent, Stateful
from a2c_ppo_acktr.algo.ppo import KL_LR_FACTOR
from a2c_ppo_acktr.model import Policy
from a2c_ppo_acktr.run.checkpoint import component_states
from a2c_ppo_acktr.storage import RolloutStorage

pytestmark = pytest.mark.research  # the research tier: what a change to the core needs


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


AGENTS = {
    "ppo": lambda p: PPO(p, 0.2, 2, 2, 0.5, 0.01, lr=3e-4, eps=1e-5, max_grad_norm=0.5),
    "a2c": lambda p: A2C_ACKTR(p, 0.5, 0.01, lr=7e-4, eps=1e-5, alpha=0.99, max_grad_norm=0.5),
    "acktr": lambda p: A2C_ACKTR(p, 0.5, 0.01, acktr=True),
}
COLUMNS = {"ppo": ["value_loss", "action_loss", "entropy", "approx_kl", "clip_fraction"],
           "a2c": ["value_loss", "action_loss", "entropy"],
           "acktr": ["value_loss", "action_loss", "entropy", "kl_clip_scale"]}


@pytest.mark.parametrize("algo", AGENTS)
def test_update_returns_its_statistics_by_name(algo):
    """progress.csv's columns, as before the statistics were a mapping."""
    policy = Policy((3,), spaces.Discrete(2))
    agent = AGENTS[algo](policy)
    assert isinstance(agent, Stateful)
    stats = agent.update(_rollout(policy))
    assert list(stats) == COLUMNS[algo] and all(isinstance(v, float) for v in stats.values())


@pytest.mark.parametrize("algo", AGENTS)
def test_an_agent_resumes_from_its_state_dict(algo):
    torch.manual_seed(0)
    policies = [Policy((3,), spaces.Discrete(2)) for _ in range(2)]
    policies[1].load_state_dict(policies[0].state_dict())
    agents = [AGENTS[algo](p) for p in policies]
    agents[0].update(_rollout(policies[0]))
    policies[1].load_state_dict(policies[0].state_dict())
    agents[1].load_state_dict(copy.deepcopy(agents[0].state_dict()))
    for policy, agent in zip(policies, agents):
        torch.manual_seed(1)
        agent.update(_rollout(policy))
    assert all(torch.equal(a, b) for a, b in zip(policies[0].parameters(), policies[1].parameters()))


class AdaptiveEntropy(PPO):
    """A researcher's PPO: an entropy coefficient that adapts, kept in the agent's state."""

    def update(self, rollouts: RolloutStorage) -> dict[str, float]:
        stats = super().update(rollouts)
        self.entropy_coef *= 0.9 if stats["entropy"] < 0.6 else 1.1
        return {**stats, "entropy_coef": self.entropy_coef}

    def state_dict(self) -> dict:
        return {**super().state_dict(), "entropy_coef": self.entropy_coef}

    def load_state_dict(self, state_dict: dict) -> None:
        super().load_state_dict(state_dict)
        self.entropy_coef = state_dict["entropy_coef"]


def test_a_subclass_adds_its_own_state_and_statistics():
    policy = Policy((3,), spaces.Discrete(2))
    agent: Agent = AdaptiveEntropy(policy, 0.2, 1, 1, 0.5, 0.01, lr=3e-4, eps=1e-5,
                                   max_grad_norm=0.5)
    stats = agent.update(_rollout(policy))
    assert stats["entropy_coef"] == agent.entropy_coef != 0.01
    fresh = AdaptiveEntropy(policy, 0.2, 1, 1, 0.5, 0.01, lr=3e-4, eps=1e-5, max_grad_norm=0.5)
    fresh.load_state_dict(agent.state_dict())
    assert fresh.entropy_coef == agent.entropy_coef


def _as_flat(state: dict, params: list) -> dict:
    """An optimizer state of separate tensors as FlatParams laid it out (A2C's checkpoints
    before its parameters were plain): one tensor, each part in memory order, padded to 64
    bytes."""
    def laid(t):
        values = t.permute(sorted(range(t.dim()), key=lambda d: -t.stride()[d])).reshape(-1)
        return torch.cat([values, values.new_zeros(-(-t.numel() // 16) * 16 - t.numel())])
    parts = [state["state"][i] for i in range(len(params))]
    return {"state": {0: {k: parts[0][k] if k == "step" else torch.cat([laid(p[k]) for p in parts])
                          for k in parts[0]}},
            "param_groups": [{**state["param_groups"][0], "params": [0]}]}


@pytest.mark.parametrize("obs_shape", [(3,), (4, 84, 84)])  # the CNN's convolutions: channels_last
def test_an_old_a2c_checkpoint_of_one_flat_tensor_resumes(obs_shape):
    """A checkpoint from when A2C stepped its parameters as one flat tensor, its optimizer under
    "optimizer", resumes to the same weights as the separate tensors would."""
    torch.manual_seed(0)
    policy = Policy(obs_shape, spaces.Discrete(2))
    reference = copy.deepcopy(policy)
    optimizer = torch.optim.RMSprop(reference.parameters(), 7e-4, eps=1e-5, alpha=0.99,
                                    foreach=False)
    for p in reference.parameters():
        p.grad = torch.randn_like(p)
    optimizer.step()
    agent = AGENTS["a2c"](policy)
    policy.load_state_dict(reference.state_dict())
    ckpt = {"optimizer": _as_flat(copy.deepcopy(optimizer.state_dict()), agent.params)}
    agent.load_state_dict(component_states(ckpt, {"agent": agent})["agent"])
    for p, q in zip(policy.parameters(), reference.parameters()):
        p.grad = q.grad.clone()
    optimizer.step()
    agent.optimizer.step()
    assert all(torch.equal(a, b) for a, b in zip(policy.parameters(), reference.parameters()))
    # An old checkpoint of separate tensors loads as it is.
    ckpt = {"optimizer": copy.deepcopy(optimizer.state_dict())}
    assert component_states(ckpt, {"agent": agent})["agent"] == {"optimizer": ckpt["optimizer"]}
    ckpt["optimizer"]["state"][0]["square_avg"] = torch.zeros(3)
    with pytest.raises(ValueError):
        agent.load_state_dict(component_states(_flat_of(ckpt), {"agent": agent})["agent"])


def _flat_of(ckpt):
    """A flat state of the wrong size: refused."""
    state = ckpt["optimizer"]
    return {"optimizer": {"state": {0: {"step": state["state"][1]["step"],
                                        "square_avg": torch.zeros(5)}},
                          "param_groups": [{**state["param_groups"][0], "params": [0]}]}}
