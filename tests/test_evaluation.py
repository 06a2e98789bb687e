"""run_episodes (the act loop of evaluation, enjoy.py and generate.py) and evaluate(): frozen
normalization, raw episode returns, and Atari (where the original crashed)."""
import gymnasium as gym
import pytest
import torch

from a2c_ppo_acktr.envs import DummyVecEnv, VecPyTorch, get_vec_normalize, make_env, make_vec_envs
from a2c_ppo_acktr.evaluation import InlineEvaluations, evaluate, run_episodes
from a2c_ppo_acktr.model import Policy


def cartpole_envs(num_envs, log_dir):
    """CartPole behind Monitor (episode returns in infos) and torch conversion, unnormalized."""
    return VecPyTorch(DummyVecEnv([make_env("CartPole-v1", 0, rank, str(log_dir), True)
                                   for rank in range(num_envs)]), "cpu")


def fixed_policy():
    torch.manual_seed(0)
    return Policy((4,), gym.spaces.Discrete(2))


def test_run_episodes_returns_equal_a_manual_loop(tmp_path):
    policy = fixed_policy()
    envs = cartpole_envs(1, tmp_path)
    returns = run_episodes(policy, envs, 3, deterministic=True)
    envs.close()
    env, manual = gym.make("CartPole-v1"), []
    obs, _ = env.reset(seed=0)  # make_env seeds env rank r with seed + r, at its first reset
    hxs, masks = torch.zeros(1, 1), torch.ones(1, 1)
    while len(manual) < 3:
        total, done = 0.0, False
        while not done:
            with torch.inference_mode():
                _, action, _, _ = policy.act(torch.as_tensor(obs)[None], hxs, masks,
                                             deterministic=True)
            obs, reward, terminated, truncated, _ = env.step(int(action))
            total, done = total + reward, terminated or truncated
        manual.append(total)
        obs, _ = env.reset()
    assert returns == manual


def test_run_episodes_counts_episodes_of_all_envs_and_calls_back(tmp_path):
    envs = cartpole_envs(2, tmp_path)
    calls = []
    returns = run_episodes(fixed_policy(), envs, 3, deterministic=False,
                           on_step=lambda action, reward, infos: calls.append((action, infos)))
    assert len(returns) == 3 and all(r >= 8 for r in returns)  # raw returns: 1 per step
    assert calls[0] == (None, [])  # the reset, then one call a step
    assert all(action.shape == (2, 1) and len(infos) == 2 for action, infos in calls[1:])
    finished = [info["episode"]["r"] for _, infos in calls for info in infos if "episode" in info]
    assert returns == finished[:3]
    calls.clear()
    assert run_episodes(fixed_policy(), envs, 3, on_step=lambda *step: calls.append(step),
                        max_steps=5) == [] and len(calls) == 6  # CartPole lasts 8+ steps
    envs.close()


def test_first_per_env_takes_each_envs_first_episode_in_env_order(tmp_path):
    envs = cartpole_envs(3, tmp_path)
    calls = []
    returns = run_episodes(fixed_policy(), envs, 3, deterministic=False, first_per_env=True,
                           on_step=lambda action, reward, infos: calls.append(infos))
    envs.close()
    firsts: dict = {}
    for infos in calls:
        for i, info in enumerate(infos):
            if "episode" in info:
                firsts.setdefault(i, info["episode"]["r"])
    assert returns == [firsts[0], firsts[1], firsts[2]]


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


@pytest.mark.slow
def test_evaluate_on_atari(tmp_path):
    envs = make_vec_envs("PongNoFrameskip-v4", 0, 1, None, None, "cpu", False, vec_env="dummy")
    policy = Policy(envs.observation_space.shape, envs.action_space)
    envs.close()
    returns = evaluate(policy, None, "PongNoFrameskip-v4", 0, 2, str(tmp_path), "cpu",
                       num_episodes=1)
    assert len(returns) == 1 and -21 <= returns[0] <= 21  # a whole game, unclipped score


def test_inline_evaluations_evaluate_now_with_the_statistics_of_then():
    """Training's evaluations in this process: nothing new for None, else one row at once,
    evaluated with the normalizer's statistics read at that moment."""
    seen, stats = [], {"n": 0}
    evaluations = InlineEvaluations(lambda policy, obs_rms: seen.append((policy, obs_rms))
                                    or [1.0, 3.0], lambda: dict(stats))
    assert evaluations.evaluations(None, 0, 8, wait=True) == [] and seen == []
    stats["n"] = 2
    assert evaluations.evaluations("policy", 3, 32) == [
        {"update": 3, "timesteps": 32, "episodes": 2, "mean_return": 2.0, "std_return": 1.0}]
    assert seen == [("policy", {"n": 2})]


def test_the_final_evaluation_plays_one_episode_on_each_env_as_gymnasium_does(tmp_path):
    """final_eval.json holds, for env i seeded ``seed + FINAL_EVAL_SEED + i``, the return of one
    deterministic episode, as a manual loop over gymnasium's own env gives (normalization frozen
    at the training statistics, which the manual loop applies by hand)."""
    import json

    import numpy as np

    from a2c_ppo_acktr.evaluation import FINAL_EVAL_SEED, final_evaluation
    train = make_vec_envs("CartPole-v1", 0, 2, 0.99, None, "cpu", False, vec_env="dummy")
    train.reset()
    for _ in range(30):
        train.step(torch.randint(0, 2, (2, 1)))
    norm = get_vec_normalize(train)
    stats, mean, var, eps, clip = norm.state_dict(), norm.ob_rms.mean, norm.ob_rms.var, \
        norm.epsilon, norm.clip_obs
    train.close()
    policy = fixed_policy()
    result = final_evaluation(policy, stats, 1234, 3, str(tmp_path), "CartPole-v1", 7, "cpu")
    assert json.loads((tmp_path / "final_eval.json").read_text()) == result
    manual = []
    for i in range(3):
        env = gym.make("CartPole-v1")
        obs, _ = env.reset(seed=7 + FINAL_EVAL_SEED + i)
        total, done = 0.0, False
        while not done:
            x = np.clip((obs - mean) / np.sqrt(var + eps), -clip, clip).astype(np.float32)
            with torch.inference_mode():
                _, action, _, _ = policy.act(torch.as_tensor(x)[None], torch.zeros(1, 1),
                                             torch.ones(1, 1), deterministic=True)
            obs, reward, terminated, truncated, _ = env.step(int(action))
            total, done = total + reward, terminated or truncated
        manual.append(total)
    assert result["returns"] == manual and result["timesteps"] == 1234
    assert result["mean_return"] == pytest.approx(np.mean(manual))
