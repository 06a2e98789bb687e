"""An env's saved state (a2c_ppo_acktr/envs/state.py) put into another env, built with another
seed, makes it go on exactly as the env it was read from: the reference is that env itself."""
import io

import gymnasium as gym
import numpy as np
import pytest
import torch

from a2c_ppo_acktr.envs import DummyVecEnv, ShmemVecEnv, make_env
from a2c_ppo_acktr.envs.state import (
    capture_envs,
    decode,
    encode,
    env_state,
    inexact_reason,
    load_env_state,
    restore_envs,
)


def weights_only(state):
    """``state`` through torch.save / torch.load(weights_only=True), as a checkpoint holds it."""
    buf = io.BytesIO()
    torch.save(state, buf)
    buf.seek(0)
    return torch.load(buf, weights_only=True)


def steps(env, actions):
    """(obs, reward, terminated, truncated, Monitor's episode (r, l) or None) per action;
    episodes restart as in a vector env."""
    out = []
    for a in actions:
        obs, reward, terminated, truncated, info = env.step(a)
        if terminated or truncated:
            obs, _ = env.reset()
        episode = (info["episode"]["r"], info["episode"]["l"]) if "episode" in info else None
        out.append((obs, reward, terminated, truncated, episode))
    return out


def same(a, b):
    return all(np.array_equal(x[0], y[0]) and x[1:] == y[1:] for x, y in zip(a, b, strict=True))


# Ant and Humanoid read body positions left by the previous step before stepping: the integration
# state alone would not do. Pong: the emulator with its sticky-action RNG, the Atari wrappers.
@pytest.mark.slow
@pytest.mark.parametrize("env_id, before, after", [("CartPole-v1", 30, 300), ("Blackjack-v1", 5, 50),
                                                   ("HalfCheetah-v5", 50, 100), ("Ant-v5", 50, 100),
                                                   ("Hopper-v5", 20, 150), ("ALE/Pong-v5", 100, 200)])
def test_restored_env_goes_on_as_the_original(tmp_path, env_id, before, after):
    """Episodes end and restart in the stretch compared for CartPole, Blackjack and Hopper: the
    Monitor's running episode carries over."""
    env = make_env(env_id, 0, 2, str(tmp_path), False)()  # rank 0 would announce flattening
    env.reset()
    actions = [env.action_space.sample() for _ in range(before + after)]
    steps(env, actions[:before])
    state = weights_only(env_state(env))
    reference = steps(env, actions[before:])
    if env_id in ("CartPole-v1", "Blackjack-v1", "Hopper-v5"):
        assert any(r[4] for r in reference)
    other = make_env(env_id, 7, 1, str(tmp_path), False)()
    other.reset()
    load_env_state(other, state)
    assert same(steps(other, actions[before:]), reference)
    assert inexact_reason(env) is None


def test_numpy_values_keep_their_type_through_a_weights_only_load():
    values = [np.float64(0.1), np.float32(2.5), np.int64(-3), np.bool_(True), np.str_("a"),
              np.arange(6, dtype=np.uint32).reshape(2, 3), (1, [2.0, None], "x"),
              np.random.default_rng(5)]
    decoded = [decode(v) for v in weights_only([encode(v) for v in values])]
    for v, d in zip(values[:6], decoded):
        assert type(d) is type(v) and np.array_equal(d, v) and np.asarray(d).dtype == np.asarray(v).dtype
    assert decoded[6] == values[6]
    assert decoded[7].integers(1 << 30) == np.random.default_rng(5).integers(1 << 30)


def test_unknown_wrappers_and_simulators_are_named():
    wrapped = gym.wrappers.RecordEpisodeStatistics(gym.make("CartPole-v1"))
    assert "RecordEpisodeStatistics may keep state" in inexact_reason(wrapped)
    import tests.toy_envs  # noqa: F401  (registers the toy ids)
    assert "tests.toy_envs.DictObs cannot be saved" in inexact_reason(gym.make("DictObs-v0"))


@pytest.mark.slow
def test_shmem_workers_read_and_write_their_envs_as_dummy_does(tmp_path):
    """States read by the shmem workers go into a DummyVecEnv (and back), which then steps as the
    shmem env does: the two backends' states are one format."""
    fns = [make_env("HalfCheetah-v5", 0, i, None, False) for i in range(3)]
    shmem = ShmemVecEnv(fns, num_workers=2)
    try:
        shmem.reset()
        actions = np.random.default_rng(0).uniform(-1, 1, (40, 3, 6)).astype(np.float32)
        for a in actions[:20]:
            shmem.step(a)
        states = weights_only(shmem.env_states())
        dummy = DummyVecEnv([make_env("HalfCheetah-v5", 9, i, None, False) for i in range(3)])
        dummy.reset()
        restore_envs(dummy.envs, states)
        for a in actions[20:]:
            got, want = dummy.step(a), shmem.step(a)
            assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])
        shmem.load_env_states(weights_only([{"layers": env_state(e)} for e in dummy.envs]))
        assert np.array_equal(shmem.step(actions[0])[0], dummy.step(actions[0])[0])
        with pytest.raises(ValueError, match="holds 2 envs' states, this run has 3"):
            shmem.load_env_states(states[:2])
        with pytest.raises(ValueError, match="the saved env is SeedFirstReset < Monitor < TimeLimit"):
            restore_envs(dummy.envs, weights_only(capture_envs(
                [make_env("HalfCheetah-v5", 0, i, str(tmp_path), False)() for i in range(3)])))
    finally:
        shmem.close()
