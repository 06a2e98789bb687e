"""evaluate(): frozen normalization, raw episode returns, and Atari (where the original crashed)."""
import torch

from a2c_ppo_acktr.envs import get_vec_normalize, make_vec_envs
from a2c_ppo_acktr.model import Policy
from evaluation import evaluate


def test_evaluate_uses_the_training_statistics(tmp_path):
    train = make_vec_envs("CartPole-v1", 0, 2, 0.99, None, "cpu", False, vec_env="dummy")
    train.reset()
    for _ in range(50):
        train.step(torch.randint(0, 2, (2, 1)))
    stats = get_vec_normalize(train).state_dict()
    train.close()
    policy = Policy((4,), train.action_space)
    returns = evaluate(policy, stats, "CartPole-v1", 0, 2, str(tmp_path), "cpu", num_episodes=3)
    assert len(returns) == 3 and all(r >= 8 for r in returns)  # raw returns: 1 per step


def test_evaluate_on_atari(tmp_path):
    envs = make_vec_envs("PongNoFrameskip-v4", 0, 1, None, None, "cpu", False, vec_env="dummy")
    policy = Policy(envs.observation_space.shape, envs.action_space)
    envs.close()
    returns = evaluate(policy, None, "PongNoFrameskip-v4", 0, 2, str(tmp_path), "cpu",
                       num_episodes=1)
    assert len(returns) == 1 and -21 <= returns[0] <= 21  # a whole game, unclipped score
