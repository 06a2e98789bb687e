"""AsyncCollector: which weights collect which rollout, buffer hand-over, recurrent state, shutdown;
a run with it is reproducible from its seed."""
import contextlib
import io
import threading
import time

import pytest
import torch

import main
from a2c_ppo_acktr.envs import make_vec_envs
from a2c_ppo_acktr.model import Policy
from a2c_ppo_acktr.run.checkpoint import load_checkpoint, run_paths
from a2c_ppo_acktr.sampling.async_thread import AsyncCollector
from a2c_ppo_acktr.settings.arguments import get_args

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


@pytest.mark.slow
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


@pytest.mark.slow
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


ASYNC = ["--env-name", "CartPole-v1", "--num-processes", "2", "--num-steps", "16",
         "--num-mini-batch", "2", "--num-env-steps", "320", "--vec-env", "dummy", "--seed", "3",
         "--async-rollouts"]


def trained_weights(tmp_path, argv, name):
    argv = argv + ["--log-dir", str(tmp_path / name / "logs"),
                   "--save-dir", str(tmp_path / name / "models")]
    with contextlib.redirect_stdout(io.StringIO()):
        assert main.main(argv) == 0
    return load_checkpoint(run_paths(get_args(argv)).checkpoint)["actor_critic"]


@pytest.mark.slow
@pytest.mark.parametrize("algo", ["ppo", "acktr"])  # minibatch orders; K-FAC's sampled Fisher
def test_async_runs_from_one_seed_end_with_the_same_weights(tmp_path, algo):
    """The learner draws from its own generator while the sampler thread draws actions from
    torch's global one: which draw goes to whom no longer follows the threads' timing."""
    a = trained_weights(tmp_path, ASYNC + ["--algo", algo], "a")
    b = trained_weights(tmp_path, ASYNC + ["--algo", algo], "b")
    for key in a:
        assert torch.equal(a[key], b[key]), key


@pytest.mark.slow
@pytest.mark.parametrize("async_rollouts", [False, True])
def test_only_a_sampler_thread_moves_ppos_minibatches_off_the_global_generator(
        tmp_path, monkeypatch, async_rollouts):
    """A synchronous run draws its permutations from torch's global generator, as it always has
    (so its weights stay what they were); an asynchronous one from one generator of its own."""
    randperm, generators = torch.randperm, []

    def recorded(*args, generator=None, **kwargs):
        if threading.current_thread() is threading.main_thread():
            generators.append(generator)
        return randperm(*args, generator=generator, **kwargs)

    monkeypatch.setattr(torch, "randperm", recorded)
    argv = ASYNC[:-1] + ["--algo", "ppo"] + (["--async-rollouts"] if async_rollouts else [])
    trained_weights(tmp_path, argv, "run")
    assert len(generators) == 10 * 4  # updates * --ppo-epoch
    if async_rollouts:
        assert isinstance(generators[0], torch.Generator)
        assert all(g is generators[0] for g in generators)
    else:
        assert generators == [None] * 40
