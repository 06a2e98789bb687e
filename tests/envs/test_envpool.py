"""``--vec-env envpool`` against the gymnasium envs it stands for (same id, same version): one step
from the same state, whole episodes with same-step autoreset, and the backend's contract."""
import csv
import os
import warnings

import gymnasium as gym
import numpy as np
import pytest
import torch

from a2c_ppo_acktr.envs import envpool as envpool_module
from a2c_ppo_acktr.envs import make_vec_envs
from a2c_ppo_acktr.envs.envpool import ENVPOOL_IDS, EnvpoolVecEnv
from a2c_ppo_acktr.envs.normalize import VecNormalize
from a2c_ppo_acktr.envs.state import Inexact, vec_env_state
from a2c_ppo_acktr.errors import ConfigError
from tests.test_main import expect_exit_2

envpool = pytest.importorskip("envpool")

# (obs atol, reward atol, obs part compared) for one step from the same (qpos, qvel), 300 random
# steps. EnvPool links MuJoCo 3.6, gymnasium here the installed mujoco; contact-rich bodies (Ant,
# Humanoid) differ more: their solver's result depends on its warm start, which (qpos, qvel) does
# not carry, and their contact forces (cinert, cfrc_ext in the observation) can switch on in one
# build a step before the other, so only their positions and velocities are compared.
TOLERANCE = {"Ant": (5e-2, 1e-1, "state"), "Humanoid": (5e-2, 1e-1, "state"),
             "HalfCheetah": (1e-9, 1e-6, "all"), "Hopper": (1e-6, 1e-6, "all"),
             "InvertedPendulum": (1e-9, 1e-6, "all"), "Swimmer": (1e-9, 1e-6, "all"),
             "Walker2d": (1e-9, 1e-6, "all")}
POSITIONS = ("x_position", "y_position")  # the qpos the observation leaves out, in the info


def _gym(env_id, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # v4 ids' deprecation
        return gym.make(env_id, **kwargs)


@pytest.mark.parametrize("env_id", ENVPOOL_IDS)
def test_one_step_from_the_same_state_as_gymnasium(env_id):
    """Set gymnasium's env to EnvPool's state (its observation's qpos and qvel, the x/y it
    leaves out from the info), take the same action in both, compare; again each step."""
    obs_atol, reward_atol, part = TOLERANCE[env_id.split("-")[0]]
    pool = envpool.make_gymnasium(env_id, num_envs=1, seed=3)
    env = _gym(env_id).unwrapped
    env.reset(seed=3)
    nq, nv = env.model.nq, env.model.nv
    obs, info = pool.reset()
    rng = np.random.default_rng(0)
    compared = 0
    for _ in range(300):
        pos = [info[k][0] for k in POSITIONS if k in info]
        k = nq - len(pos)
        qvel = obs[0, k:k + nv]
        env.set_state(np.concatenate([pos, obs[0, :k]]), qvel)
        action = rng.uniform(env.action_space.low, env.action_space.high)
        obs, reward, term, trunc, info = pool.step(action[None])
        want, want_reward, want_term, _, _ = env.step(action)
        n = k + nv if part == "state" else want.size
        np.testing.assert_allclose(obs[0, :n], want[:n], rtol=0, atol=obs_atol)
        assert abs(float(reward[0]) - float(np.float32(want_reward))) <= reward_atol
        assert bool(term[0]) == want_term
        compared += 1
        # Hopper's and Walker2d's observations clip qvel at +-10: the state is not in them then.
        if term[0] or trunc[0] or np.abs(obs[0, k:k + nv]).max() >= 10:
            obs, info = pool.reset(np.array([0], np.int32))
    assert compared == 300


@pytest.mark.parametrize("env_id,kwargs,steps", [
    ("Hopper-v5", {}, 300), ("Hopper-v4", {}, 300), ("Walker2d-v5", {}, 300),
    ("InvertedPendulum-v5", {}, 300), ("HalfCheetah-v5", {"max_episode_steps": 20}, 100)])
def test_episodes_and_autoreset_as_gymnasium(env_id, kwargs, steps, tmp_path):
    """Without reset noise every episode starts in the same state in both: the backend's
    observations, rewards, ends, final observations and episode statistics, step for step,
    against gymnasium envs reset at once where their episodes end (same-step autoreset)."""
    n = 2
    kwargs = {"reset_noise_scale": 0.0, **kwargs}
    venv = EnvpoolVecEnv(env_id, n, 0, log_dir=str(tmp_path), env_kwargs=kwargs)
    envs = [_gym(env_id, **kwargs) for _ in range(n)]
    rng = np.random.default_rng(1)
    space = venv.action_space
    sums, lengths, rows = np.zeros(n), np.zeros(n, int), {i: [] for i in range(n)}
    try:
        obs = venv.reset()
        for i, env in enumerate(envs):
            np.testing.assert_allclose(obs[i], env.reset(seed=i)[0], rtol=0, atol=1e-9)
        for _ in range(steps):
            actions = rng.uniform(space.low, space.high, size=(n, *space.shape))
            obs, rewards, term, trunc, infos = venv.step(actions)
            assert rewards.dtype == np.float32 and obs.dtype == np.float64
            for i, env in enumerate(envs):
                o, r, te, tr, _ = env.step(actions[i])
                assert (bool(term[i]), bool(trunc[i])) == (te, tr)
                assert rewards[i] == pytest.approx(r, abs=1e-5)
                sums[i] += rewards[i]
                lengths[i] += 1
                if te or tr:
                    np.testing.assert_allclose(infos[i]["final_obs"], o, rtol=0, atol=1e-6)
                    assert infos[i]["episode"]["l"] == lengths[i]
                    assert infos[i]["episode"]["r"] == pytest.approx(sums[i], abs=1e-4)
                    rows[i].append(infos[i]["episode"]["l"])
                    sums[i], lengths[i] = 0.0, 0
                    o, _ = env.reset()
                else:
                    assert "final_obs" not in infos[i] and "episode" not in infos[i]
                np.testing.assert_allclose(obs[i], o, rtol=0, atol=1e-6)
    finally:
        venv.close()
    assert sum(map(len, rows.values())) >= 2
    for i in range(n):
        with open(tmp_path / f"{i}.monitor.csv") as f:
            assert [int(row["l"]) for row in csv.DictReader(f.read().splitlines()[1:])] == rows[i]


@pytest.mark.parametrize("env_id", envpool_module.CONTACT_IDS)
def test_without_contact_forces_the_observation_is_gymnasiums_with_its_reward(env_id):
    """``include_cfrc_ext_in_observation=False`` (the tuned Ant and Humanoid recipes): the
    observation space is gymnasium's with that kwarg; the observation is the full one's first part
    (gymnasium's contact forces come last, and EnvPool's: the one-step test above compares the
    full ones), the reward the full env's (v5 keeps the contact cost), step for step."""
    cut = {envpool_module.CONTACT_FORCES: False}
    env = _gym(env_id, **cut)
    keep = env.observation_space.shape[0]
    full = _gym(env_id)
    obs_cut, obs_full = env.reset(seed=1)[0], full.reset(seed=1)[0]
    assert keep < obs_full.size and np.array_equal(obs_cut, obs_full[:keep])
    limit = {"max_episode_steps": 100}  # episodes end within the test, also Ant's
    a = EnvpoolVecEnv(env_id, 3, 5, env_kwargs={**cut, **limit})
    b = EnvpoolVecEnv(env_id, 3, 5, env_kwargs=limit)
    try:
        assert (a.observation_space, a.action_space) == (env.observation_space, env.action_space)
        assert np.array_equal(a.reset(), b.reset()[:, :keep])
        actions = np.random.default_rng(2).uniform(-0.4, 0.4, (250, 3, *a.action_space.shape))
        ends = 0
        for action in actions:
            (oa, ra, ta, ua, ia), (ob, rb, tb, ub, ib) = a.step(action), b.step(action)
            assert oa.shape == (3, keep) and np.array_equal(oa, ob[:, :keep])
            assert np.array_equal(ra, rb) and np.array_equal(ta, tb) and np.array_equal(ua, ub)
            for i, info in enumerate(ia):
                if "final_obs" in info:
                    assert np.array_equal(info["final_obs"], ib[i]["final_obs"][:keep])
                    ends += 1
        assert ends > 0  # the cut also holds for the next episode's first observation
    finally:
        a.close()
        b.close()


def test_an_episode_that_ends_on_its_last_step_is_terminated_and_truncated():
    """As gymnasium's TimeLimit says of it: no bootstrap from its final observation."""
    actions = np.random.default_rng(0).uniform(-1, 1, (200, 1, 3))
    env = _gym("Hopper-v5", reset_noise_scale=0.0)
    env.reset(seed=0)
    steps = next(t + 1 for t, a in enumerate(actions) if env.step(a[0])[2])
    venv = EnvpoolVecEnv("Hopper-v5", 1, 0, env_kwargs={"reset_noise_scale": 0.0,
                                                        "max_episode_steps": steps})
    try:
        venv.reset()
        ends = [venv.step(a)[2:4] for a in actions[:steps]]
    finally:
        venv.close()
    assert [(bool(te[0]), bool(tr[0])) for te, tr in ends] == [(False, False)] * (steps - 1) + [
        (True, True)]


def test_seeds_and_the_stack():
    """Same seed, same run; env i of rank r is seeded seed + r; observations are normalized
    (VecNormalize) and come as torch; the envs' state cannot be saved: one clause says so."""
    def trace(seed, num, first_rank=0):
        envs = make_vec_envs("Hopper-v5", seed, num, 0.99, None, "cpu", False, vec_env="envpool",
                             first_rank=first_rank)
        actions = torch.from_numpy(np.random.default_rng(0).uniform(-1, 1, (30, 2, 3)))
        try:
            assert isinstance(envs.venv, VecNormalize)
            assert isinstance(envs.venv.venv, EnvpoolVecEnv)
            with pytest.raises(Inexact, match="--vec-env envpool: EnvPool cannot save"):
                vec_env_state(envs)
            out = [envs.venv.venv.reset()]
            out += [envs.venv.venv.step(a.numpy())[0] for a in actions[:, first_rank:first_rank + num]]
        finally:
            envs.close()
        return np.stack(out)

    for env_id in ("Hopper-v5", "Walker2d-v4"):  # gymnasium's spaces: checkpoints load on both
        venv, env = EnvpoolVecEnv(env_id, 1, 0), _gym(env_id)
        venv.close()
        assert (venv.observation_space, venv.action_space) == (env.observation_space,
                                                                env.action_space)
    a = trace(7, 2)
    assert np.array_equal(a, trace(7, 2)) and not np.array_equal(a, trace(8, 2))
    assert np.array_equal(a[:, 1:], trace(7, 1, first_rank=1))


def test_what_it_refuses_is_one_line(tmp_path, capsys, monkeypatch):
    argv = ["--env-name", "Hopper-v5", "--log-dir", str(tmp_path / "l"), "--save-dir",
            str(tmp_path / "s"), "--num-env-steps", "80", "--num-processes", "2",
            "--vec-env", "envpool"]
    err = expect_exit_2(capsys, argv + ["--env-name", "Pusher-v5"], "not Pusher-v5")
    assert all(env_id in err for env_id in ENVPOOL_IDS)
    expect_exit_2(capsys, argv + ["--env-kwargs", "xml_file=x.xml"], "not xml_file")
    expect_exit_2(capsys, argv + ["--env-kwargs", "reset_noise_scale=high"], "EnvPool rejects")
    expect_exit_2(capsys, argv + ["--env-kwargs", "include_cfrc_ext_in_observation=False"],
                  "not include_cfrc_ext_in_observation")  # Hopper has no contact forces
    expect_exit_2(capsys, argv + ["--env-name", "Ant-v5", "--env-kwargs",
                                  "include_cfrc_ext_in_observation=2"], "True or False; not 2")
    expect_exit_2(capsys, argv + ["--capture-video"], "does not render")
    monkeypatch.setattr(envpool_module, "envpool_available", lambda: False)
    expect_exit_2(capsys, argv, "needs envpool")
    assert not (tmp_path / "l").exists() and not (tmp_path / "s").exists()
    with pytest.raises(ConfigError, match="not CartPole-v1"):
        envpool_module.envpool_kwargs("CartPole-v1")
    assert os.listdir(tmp_path) == []
