"""A2C_ACKTR.update: one RMSprop step toward advantageous actions and the returns."""
import pytest
import torch
from gymnasium import spaces

from a2c_ppo_acktr.algo import A2C_ACKTR
from a2c_ppo_acktr.model import Policy
from tests.test_ppo import N, bandit_rollout, prob_of_action_0


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
        value_loss, action_loss, entropy = agent.update(rollouts)
        value_losses.append(value_loss)
    assert prob_of_action_0(policy, probe) > before + 0.1
    assert sum(value_losses[-5:]) < sum(value_losses[:5])


def test_acktr_without_kfac_is_refused():
    policy = Policy((3,), spaces.Discrete(2))
    with pytest.raises(ValueError, match="K-FAC"):
        A2C_ACKTR(policy, 0.5, 0.01, lr=0.25, acktr=True)
