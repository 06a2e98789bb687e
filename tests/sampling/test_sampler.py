"""AsyncCollector: which weights collect which rollout, buffer hand-over, recurrent state, shutdown."""
import threading
import time

import pytest
import torch

from a2c_ppo_acktr.envs import make_vec_envs
from a2c_ppo_acktr.model import Policy
from a2c_ppo_acktr.sampling.async_thread import AsyncCollector

T, N = 8, 2


pytestmark = pytest.mark.usefixtures("one_thread")  # as main.py runs MLPs


def setup(recurrent=False, num_rollouts=5, log_dir=None, step=None):
    """CartPole envs, a learner policy and a started sampler; ``step`` replaces the numpy vector
    env's step (called with it and the actions)."""
    torch.manual_seed(0)
    envs = make_vec_envs("CartPole-v1", 0, N, 0.99, log_dir, "cpu", False, vec_env="dummy")
    if step is not None:
        dummy = envs.venv.venv
        original = dummy.step
        dummy.step = lambda actions: step(original, actions)
    kwargs = {"recurrent": recurrent}
    learner = Policy(envs.observation_space.shape, envs.action_space, base_kwargs=kwargs)
    behaviour = Policy(envs.observation_space.shape, envs.action_space, base_kwargs=kwargs)
    sampler = AsyncCollector(envs, learner, behaviour, T, False, "cpu", num_rollouts)
    return envs, learner, sampler


def log_probs_under(weights, envs, recurrent, rollouts):
    """Log-probabilities of the stored actions under ``weights`` (each env's rollout replayed as
    one sequence, as the recurrent minibatches do) -> (T, N, 1)."""
    policy = Policy(envs.observation_space.shape, envs.action_space,
                    base_kwargs={"recurrent": recurrent})
    policy.load_state_dict(weights)
    with torch.no_grad():
        _, log_probs, _, _ = policy.evaluate_actions(
            rollouts.obs[:-1].reshape(T * N, -1), rollouts.recurrent_hidden_states[0],
            rollouts.masks[:-1].reshape(T * N, 1), rollouts.actions.reshape(T * N, -1))
    return log_probs.reshape(T, N, 1)


def snapshot(policy):
    return {k: v.clone() for k, v in policy.state_dict().items()}


@pytest.mark.parametrize("recurrent", [False, True])
def test_rollout_k_is_collected_by_the_weights_after_k_minus_1_updates(recurrent):
    envs, learner, sampler = setup(recurrent)
    weights = [snapshot(learner)]  # weights[i]: the learner's after i updates
    previous = None
    try:
        for k in range(5):
            rollouts = sampler.collect(learner)
            acted = log_probs_under(weights[max(k - 1, 0)], envs, recurrent, rollouts)
            torch.testing.assert_close(rollouts.action_log_probs, acted, atol=1e-4, rtol=1e-4)
            if k >= 1:  # ... and not by the learner's current weights (the test can tell them apart)
                current = log_probs_under(weights[k], envs, recurrent, rollouts)
                assert not torch.allclose(rollouts.action_log_probs, current, atol=1e-2)
            if previous is not None:  # the two buffers alternate; each starts where the last ended
                assert rollouts is not previous[0]
                for name, last in previous[1].items():
                    assert torch.equal(getattr(rollouts, name)[0], last), name
            if recurrent and k >= 1:  # the GRU state goes on across rollouts, not reset to zero
                assert rollouts.recurrent_hidden_states[0].abs().sum() > 0
            with torch.no_grad():  # the "update": a large, known change of every weight that
                for name, p in learner.named_parameters():  # keeps the policy stochastic
                    p.copy_(weights[0][name] + torch.randn_like(p) * 0.3)
            weights.append(snapshot(learner))
            previous = rollouts, {name: getattr(rollouts, name)[-1].clone()
                                  for name in ("obs", "recurrent_hidden_states", "masks")}
            sampler.sync(learner, rollouts)  # from now on the sampler refills it
        assert sampler.lags == [0, 1, 1, 1, 1]
    finally:
        sampler.close()
    assert not sampler._thread.is_alive()


def test_episode_stats_reach_the_learner(tmp_path):
    envs, learner, sampler = setup(num_rollouts=40, log_dir=str(tmp_path))  # Monitor: returns
    try:
        for _ in range(40):  # 640 random-policy CartPole steps: dozens of episodes end
            sampler.sync(learner, sampler.collect(learner))
    finally:
        sampler.close()
    returns = list(sampler.episode_returns)  # the last 10
    assert len(returns) == 10 and all(r >= 1 for r in returns)
    assert sampler.timeouts == [None] * N  # not real-time envs
    assert sampler.obs_rms is not None and not sampler.realtime  # no real-time columns
    assert set(sampler.stats()) == {"timeouts", "policy_lag", "sampler_stalls"}


def test_close_ends_the_thread_mid_rollout_and_env_errors_reach_the_learner():
    envs, learner, sampler = setup(num_rollouts=1000)
    sampler.collect(learner)  # the sampler now waits for a buffer: never released
    t0 = time.perf_counter()
    sampler.close()
    assert not sampler._thread.is_alive() and time.perf_counter() - t0 < 5

    calls = []

    def failing_step(step, actions):
        calls.append(1)
        if len(calls) == T + 3:  # in the middle of the second rollout
            raise RuntimeError("env 1 broke")
        return step(actions)

    envs, learner, sampler = setup(num_rollouts=1000, step=failing_step)
    try:
        rollouts = sampler.collect(learner)
        sampler.sync(learner, rollouts)
        with pytest.raises(RuntimeError, match="env 1 broke"):
            sampler.collect(learner)
        assert not sampler._thread.is_alive()
    finally:
        sampler.close()
    assert not [t for t in threading.enumerate() if t.name == "sampler" and t.is_alive()]
