"""RolloutStorage: returns vs plain loops and stable-baselines3's buffer; generators' coverage."""
import copy
import pickle

import numpy as np
import pytest
import torch
from gymnasium import spaces

from a2c_ppo_acktr.storage import Minibatch, RolloutStorage

pytestmark = pytest.mark.research  # the research tier: what a change to the core needs

T, N = 9, 4
GAMMA, LAM = 0.97, 0.9


def filled_storage(seed=0, truncations=True):
    """A storage with random rewards/values and episode ends (some cut by a time limit)."""
    g = torch.Generator().manual_seed(seed)
    r = RolloutStorage(T, N, (3,), spaces.Discrete(2), 1)
    r.rewards.copy_(torch.randn(T, N, 1, generator=g))
    r.value_preds.copy_(torch.randn(T + 1, N, 1, generator=g))
    done = torch.rand(T + 1, N, 1, generator=g) < 0.25
    trunc = done & (torch.rand(T + 1, N, 1, generator=g) < 0.5) if truncations else torch.zeros_like(done)
    r.masks.copy_((~done).float())
    r.bad_masks.copy_((~trunc).float())
    r.bootstrap_values.copy_(torch.randn(T, N, 1, generator=g) * trunc[1:].float())
    return r


def reference_returns(r, next_value, use_gae, proper):
    """Per env, per step, with Python floats: the textbook definitions."""
    out = np.zeros((T + 1, N))
    for n in range(N):
        V = [float(v) for v in r.value_preds[:, n, 0]]
        V[T] = float(next_value[n, 0])
        out[T, n] = V[T]
        gae, ret = 0.0, V[T]
        for t in reversed(range(T)):
            ended = r.masks[t + 1, n, 0] == 0
            truncated = r.bad_masks[t + 1, n, 0] == 0
            if not ended:
                v_next = V[t + 1]
            elif truncated and proper:
                v_next = float(r.bootstrap_values[t, n, 0])
            else:
                v_next = 0.0
            rew = float(r.rewards[t, n, 0])
            if use_gae:
                delta = rew + GAMMA * v_next - V[t]
                gae = delta + (0.0 if ended else GAMMA * LAM * gae)
                out[t, n] = gae + V[t]
            else:
                ret = rew + GAMMA * (ret if not ended else v_next)
                out[t, n] = ret
    return out


@pytest.mark.parametrize("use_gae", [True, False])
@pytest.mark.parametrize("proper", [True, False])
def test_compute_returns_matches_reference_loop(use_gae, proper):
    r = filled_storage()
    next_value = torch.randn(N, 1)
    r.compute_returns(next_value, use_gae, GAMMA, LAM, use_proper_time_limits=proper)
    expected = reference_returns(r, next_value, use_gae, proper)
    np.testing.assert_allclose(r.returns.squeeze(-1).numpy(), expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("truncations", [False, True])
def test_gae_matches_stable_baselines3(truncations):
    """SB3 folds the truncation bootstrap into the reward (r + gamma * V(final_obs)); same returns."""
    from stable_baselines3.common.buffers import RolloutBuffer

    r = filled_storage(seed=1, truncations=truncations)
    next_value = torch.randn(N, 1)
    r.compute_returns(next_value, True, GAMMA, LAM, use_proper_time_limits=True)

    sb3 = RolloutBuffer(T, spaces.Box(-1, 1, (3,)), spaces.Discrete(2), device="cpu",
                        gae_lambda=LAM, gamma=GAMMA, n_envs=N)
    truncated = (1 - r.bad_masks[1:]).squeeze(-1)
    for t in range(T):
        reward = r.rewards[t, :, 0] + GAMMA * r.bootstrap_values[t, :, 0] * truncated[t]
        sb3.add(np.zeros((N, 3)), np.zeros((N, 1)), reward.numpy(),
                (1 - r.masks[t, :, 0]).numpy(), r.value_preds[t, :, 0].clone(), torch.zeros(N))
    sb3.compute_returns_and_advantage(next_value.squeeze(1), (1 - r.masks[T, :, 0]).numpy())
    np.testing.assert_allclose(r.returns[:-1, :, 0].numpy(), sb3.returns, rtol=1e-5, atol=1e-5)


def test_insert_and_after_update():
    r = RolloutStorage(2, 3, (2,), spaces.Box(-1, 1, (2,), np.float32), 4)
    for s in range(2):
        r.insert(torch.full((3, 2), s + 1.0), torch.full((3, 4), s + 1.0), torch.ones(3, 2),
                 torch.zeros(3, 1), torch.zeros(3, 1), torch.ones(3, 1), torch.zeros(3, 1),
                 torch.ones(3, 1))
    assert r.step == 0
    assert torch.all(r.obs[2] == 2.0) and torch.all(r.masks[2] == 0)
    r.after_update()
    assert torch.all(r.obs[0] == 2.0) and torch.all(r.recurrent_hidden_states[0] == 2.0)
    assert torch.all(r.masks[0] == 0)


def test_a_copy_writes_into_its_own_tensors():
    """deepcopy and pickle give a storage whose writes land in its own tensors (the
    asynchronous sampler alternates two buffers, one a deepcopy of the other)."""
    r = RolloutStorage(2, 1, (1,), spaces.Discrete(2), 1)
    for c in (copy.deepcopy(r), pickle.loads(pickle.dumps(r))):
        c.insert(torch.ones(1, 1), torch.ones(1, 1), torch.ones(1, 1, dtype=torch.long),
                 torch.ones(1, 1), torch.ones(1, 1), torch.ones(1, 1), torch.ones(1, 1),
                 torch.ones(1, 1))
        assert c.obs[1].item() == 1 and c.rewards[0].item() == 1 and r.obs[1].item() == 0


@pytest.mark.parametrize("num_mini_batch", [1, 4, 6])
def test_feed_forward_generator_visits_every_sample_once(num_mini_batch):
    r = RolloutStorage(T, N, (1,), spaces.Discrete(2), 1)
    r.obs[:T] = torch.arange(T * N, dtype=torch.float32).view(T, N, 1)
    advantages = torch.arange(T * N, dtype=torch.float32).view(T, N, 1)
    seen = []
    for b in r.feed_forward_generator(advantages, num_mini_batch=num_mini_batch):
        assert isinstance(b, Minibatch)
        assert b.obs.shape == (T * N // num_mini_batch, 1)
        torch.testing.assert_close(b.obs, b.advantages)  # rows stay aligned across fields
        seen += b.obs.squeeze(1).long().tolist()
    assert sorted(seen) == list(range(T * N))


def test_recurrent_generator_yields_whole_env_columns():
    r = RolloutStorage(T, N, (1,), spaces.Discrete(2), 5)
    r.obs[:T] = torch.arange(T * N, dtype=torch.float32).view(T, N, 1)
    r.recurrent_hidden_states[0] = torch.arange(N, dtype=torch.float32).view(N, 1).expand(N, 5)
    advantages = torch.zeros(T, N, 1)
    seen = []
    for b in r.recurrent_generator(advantages, num_mini_batch=2):
        envs = b.recurrent_hidden_states[:, 0].long()
        assert b.recurrent_hidden_states.shape == (2, 5)
        # Time-major flattening: row t * n + k is step t of the k-th env of the batch.
        expected = (torch.arange(T).view(T, 1) * N + envs.view(1, -1)).reshape(-1)
        assert torch.equal(b.obs.squeeze(1).long(), expected)
        seen += b.obs.squeeze(1).long().tolist()
    assert sorted(seen) == list(range(T * N))


def test_generators_refuse_impossible_splits():
    r = RolloutStorage(2, 2, (1,), spaces.Discrete(2), 1)
    with pytest.raises(ValueError, match="num_mini_batch"):
        next(r.recurrent_generator(torch.zeros(2, 2, 1), num_mini_batch=3))
    with pytest.raises(ValueError, match="num_mini_batch"):
        next(r.feed_forward_generator(torch.zeros(2, 2, 1), num_mini_batch=5))


@pytest.mark.parametrize("use_gae, proper", [(True, True), (True, False), (False, True)])
def test_recompute_returns_uses_the_current_values(use_gae, proper):
    """recompute_returns: value_preds become the policy's values of each stored observation (the
    bootstrap slot too), and the returns the textbook ones with them and the last settings."""
    from a2c_ppo_acktr.model import Policy
    torch.manual_seed(0)
    r = filled_storage(truncations=proper)
    r.obs.normal_()
    r.compute_returns(torch.randn(N, 1), use_gae, GAMMA, LAM, proper)
    policy = Policy((3,), spaces.Discrete(2), base_kwargs={"hidden_size": 8})
    r.recompute_returns(policy, chunk=7)  # chunks that do not divide (T + 1) * N
    with torch.no_grad():
        expected = torch.stack([policy.get_value(r.obs[t], r.recurrent_hidden_states[t],
                                                 r.masks[t]) for t in range(T + 1)])
    torch.testing.assert_close(r.value_preds, expected)
    reference = reference_returns(r, expected[-1], use_gae, proper)
    np.testing.assert_allclose(r.returns[:, :, 0].numpy(), reference, rtol=1e-5, atol=1e-5)


def test_recompute_returns_needs_settings_and_a_feed_forward_policy():
    from a2c_ppo_acktr.model import Policy
    r = filled_storage()
    with pytest.raises(RuntimeError, match="compute_returns first"):
        r.recompute_returns(Policy((3,), spaces.Discrete(2)))
    r.compute_returns(torch.zeros(N, 1), True, GAMMA, LAM)
    recurrent = Policy((3,), spaces.Discrete(2), base_kwargs={"recurrent": True})
    with pytest.raises(ValueError, match="feed-forward"):
        RolloutStorage(T, N, (3,), spaces.Discrete(2), 64).recompute_returns(recurrent)


def test_compute_returns_takes_its_settings_as_one_returns_config_too():
    from a2c_ppo_acktr.config import ReturnsConfig
    settings = ReturnsConfig(use_gae=True, gamma=GAMMA, gae_lambda=LAM, use_proper_time_limits=True)
    by_part, one_by_one = filled_storage(), filled_storage()
    by_part.compute_returns(torch.ones(N, 1), settings)
    one_by_one.compute_returns(torch.ones(N, 1), True, GAMMA, LAM, True)
    assert torch.equal(by_part.returns, one_by_one.returns)
    assert by_part.returns_settings == one_by_one.returns_settings == settings


@pytest.mark.parametrize("recurrent", [False, True])
def test_generators_draw_from_the_global_generator_unless_given_one(recurrent):
    """The original's call draws its order (one randperm) from torch's global generator, where a
    synchronous run's PPO has always drawn it; a given generator draws it instead, the global
    one untouched."""
    r = RolloutStorage(T, N, (1,), spaces.Discrete(2), 1)
    r.obs[:T] = torch.arange(T * N, dtype=torch.float32).view(T, N, 1)
    method = r.recurrent_generator if recurrent else r.feed_forward_generator

    def order(*generator):
        return torch.cat([b.obs for b in method(torch.zeros(T, N, 1), 2, *generator)])

    torch.manual_seed(3)
    by_global = order()
    after = torch.get_rng_state()
    torch.manual_seed(3)
    torch.randperm(N if recurrent else T * N)
    assert torch.equal(after, torch.get_rng_state())  # one randperm of the global generator
    torch.manual_seed(3)
    assert torch.equal(order(None), by_global)

    torch.manual_seed(5)
    state = torch.get_rng_state()
    own = order(torch.Generator().manual_seed(3))
    assert torch.equal(torch.get_rng_state(), state)  # the global generator drew nothing
    assert torch.equal(own, by_global)  # the same seed, the same order
