"""Tests of a2c_ppo_acktr.envs: vectorization, autoreset, Monitor, VecNormalize, Atari, errors."""
import csv
import json
import os

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium import spaces
from gymnasium.wrappers import TimeLimit
from stable_baselines3.common.vec_env import DummyVecEnv as SB3DummyVecEnv
from stable_baselines3.common.vec_env import VecNormalize as SB3VecNormalize

from a2c_ppo_acktr.envs import (
    DummyVecEnv,
    Normalizer,
    ShmemVecEnv,
    ThreadVecEnv,
    VecNormalize,
    VecPyTorch,
    VecPyTorchFrameStack,
    get_vec_normalize,
    make_env,
    make_vec_envs,
)
from a2c_ppo_acktr.errors import ConfigError

# 2 workers (threads) for 3 envs: blocks of 2 and 1 envs, so the block bookkeeping is exercised too.
VEC_ENVS = {"dummy": DummyVecEnv, "shmem": lambda env_fns: ShmemVecEnv(env_fns, num_workers=2),
            "threads": lambda env_fns: ThreadVecEnv(env_fns, num_threads=2)}


class CountEnv(gym.Env):
    """obs = [episode number, step in episode]; reward = step; terminates after ``length`` steps.

    ``fail_at``: on that (total) step raise ValueError("boom"), or exit the process if ``hard``.
    """

    observation_space = gym.spaces.Box(0, np.inf, (2,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, length, fail_at=None, hard=False, fail_init=False):
        if fail_init:
            raise ValueError("cannot build")
        self.length, self.fail_at, self.hard = length, fail_at, hard
        self.episode = self.t = self.total = 0

    def _obs(self):
        return np.array([self.episode, self.t], np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.episode += 1
        self.t = 0
        return self._obs(), {}

    def step(self, action):
        self.t += 1
        self.total += 1
        if self.total == self.fail_at:
            if self.hard:
                os._exit(3)
            raise ValueError("boom")
        return self._obs(), float(self.t), self.t >= self.length, False, {}


def count_env(length, max_steps=None, **kwargs):
    def thunk():
        env = CountEnv(length, **kwargs)
        return TimeLimit(env, max_steps) if max_steps else env
    return thunk


def random_actions(space, steps, n, seed=0):
    space.seed(seed)
    return np.array([[space.sample() for _ in range(n)] for _ in range(steps)])


@pytest.mark.slow
@pytest.mark.parametrize("kind", VEC_ENVS)
def test_same_step_autoreset(kind):
    # env 0 terminates at t=4 (TimeLimit 10); env 1 is truncated at t=3; env 2 terminates at t=2.
    venv = VEC_ENVS[kind]([count_env(4, 10), count_env(100, 3), count_env(2)])
    try:
        np.testing.assert_array_equal(venv.reset(), [[1, 0]] * 3)
        expected = {  # step -> {env: (final_obs, terminated, truncated)}
            2: {2: ([1, 2], True, False)},
            3: {1: ([1, 3], False, True)},
            4: {0: ([1, 4], True, False), 2: ([2, 2], True, False)},
        }
        for t in range(1, 5):
            obs, rew, term, trunc, infos = venv.step(np.zeros(3, np.int64))
            assert obs.shape == (3, 2) and rew.dtype == np.float32
            assert term.dtype == bool and trunc.dtype == bool and len(infos) == 3
            ends = expected.get(t, {})
            for i in range(3):
                if i in ends:
                    final, te, tr = ends[i]
                    np.testing.assert_array_equal(infos[i]["final_obs"], final)  # true last obs
                    assert obs[i, 1] == 0 and obs[i, 0] == final[0] + 1  # first obs of the next one
                    assert rew[i] == final[1]
                    assert (term[i], trunc[i]) == (te, tr)
                else:
                    assert "final_obs" not in infos[i]
                    assert not term[i] and not trunc[i]
    finally:
        venv.close()


@pytest.mark.slow
@pytest.mark.parametrize("env_id", ["CartPole-v1", "Hopper-v5"])
def test_dummy_shmem_and_threads_identical(env_id, tmp_path):
    n, steps = 3, 300
    runs = {}
    for kind, make in VEC_ENVS.items():
        env_fns = [make_env(env_id, 1, rank, str(tmp_path / kind), False) for rank in range(n)]
        venv = make(env_fns)
        try:
            actions = random_actions(venv.action_space, steps, n)
            trace = [venv.reset()]
            for a in actions:
                obs, rew, term, trunc, infos = venv.step(a)
                trace += [obs, rew, term, trunc]
                for i, info in enumerate(infos):
                    if "final_obs" in info:
                        ep = info["episode"]
                        trace += [i, info["final_obs"], ep["r"], ep["l"]]
        finally:
            venv.close()
        runs[kind] = trace
    assert len(runs["dummy"]) > 1 + 4 * steps  # some episodes ended
    for kind in ("shmem", "threads"):
        assert len(runs["dummy"]) == len(runs[kind])
        for a, b in zip(runs["dummy"], runs[kind]):
            np.testing.assert_array_equal(a, b)  # bit-identical


def test_monitor_csv_holds_raw_episodes(tmp_path):
    def run(steps, append):
        envs = make_vec_envs("CartPole-v1", 0, 2, 0.99, str(tmp_path), "cpu", False, vec_env="dummy",
                             monitor_append=append)
        episodes = {0: [], 1: []}
        envs.reset()
        try:
            for _ in range(steps):
                obs, reward, term, trunc, infos = envs.step(torch.randint(0, 2, (2, 1)))
                assert not torch.all(reward == 1)  # the caller sees normalized rewards
                for i, info in enumerate(infos):
                    if "episode" in info:
                        episodes[i].append(info["episode"])
        finally:
            envs.close()
        return episodes

    first = run(150, append=False)
    second = run(60, append=True)
    for rank in (0, 1):
        with open(tmp_path / f"{rank}.monitor.csv") as f:
            lines = f.read().splitlines()
        assert lines[0].startswith("#")
        header = json.loads(lines[0][1:])
        assert header["env_id"] == "CartPole-v1" and "t_start" in header
        assert lines[1] == "r,l,t"
        rows = list(csv.DictReader(lines[1:]))
        episodes = first[rank] + second[rank]
        assert len(first[rank]) >= 3 and len(rows) == len(episodes)  # appended, one header
        for row, ep in zip(rows, episodes):
            assert float(row["r"]) == ep["r"] == int(row["l"]) == ep["l"]  # raw reward: 1 a step


def test_vec_normalize_matches_sb3_and_round_trips(tmp_path):
    env_fns = [make_env("Hopper-v5", 0, rank, None, True) for rank in range(2)]
    ours = VecNormalize(DummyVecEnv(env_fns), gamma=0.99)
    theirs = SB3VecNormalize(SB3DummyVecEnv(env_fns), gamma=0.99)
    try:
        np.testing.assert_allclose(ours.reset(), theirs.reset(), rtol=1e-6)
        ends = 0
        for t, a in enumerate(random_actions(ours.action_space, 200, 2)):
            if t == 150:  # frozen statistics from here on
                ours.eval()
                theirs.training = False
                frozen = ours.state_dict()
            obs, rew, term, trunc, infos = ours.step(a)
            obs2, rew2, done2, infos2 = theirs.step(a)
            np.testing.assert_allclose(obs, obs2, rtol=1e-6)
            np.testing.assert_allclose(rew, rew2, rtol=1e-6)
            np.testing.assert_array_equal(term | trunc, done2)
            for i in np.flatnonzero(done2):
                ends += 1
                np.testing.assert_allclose(infos[i]["final_obs"], infos2[i]["terminal_observation"],
                                           rtol=1e-6)
        assert ends > 0
        for name, value in ours.state_dict().items():
            torch.testing.assert_close(value, frozen[name])  # eval() did not update them

        torch.save(ours.state_dict(), tmp_path / "vn.pt")
        loaded = VecNormalize(DummyVecEnv(env_fns[:1]))
        loaded.load_state_dict(torch.load(tmp_path / "vn.pt", weights_only=True))
        torch.testing.assert_close(loaded.state_dict(), ours.state_dict())
        np.testing.assert_array_equal(loaded.normalize_obs(obs), ours.normalize_obs(obs))
        loaded.close()
        # The statistics alone (what the Ray learner keeps): the same state, the same scaling
        # as SB3's frozen normalizer.
        alone = Normalizer(ours.observation_space.shape)
        alone.load_state_dict(torch.load(tmp_path / "vn.pt", weights_only=True))
        assert get_vec_normalize(alone) is alone
        torch.testing.assert_close(alone.state_dict(), ours.state_dict())
        np.testing.assert_allclose(alone.normalize_obs(obs), theirs.normalize_obs(obs), rtol=1e-6)
    finally:
        ours.close()
        theirs.close()


def test_vector_obs_stack():
    envs = make_vec_envs("CartPole-v1", 0, 2, None, None, "cpu", True, vec_env="dummy")
    try:
        vn = get_vec_normalize(envs)
        assert isinstance(vn, VecNormalize) and vn.ret_rms is None  # gamma=None: obs only
        obs = envs.reset()
        assert obs.shape == (2, 4) and obs.dtype == torch.float32
        obs, reward, term, trunc, infos = envs.step(torch.zeros(2, 1, dtype=torch.long))
        assert reward.shape == (2, 1) and reward.dtype == torch.float32 and torch.all(reward == 1)
        assert term.shape == trunc.shape == (2,) and term.dtype == trunc.dtype == np.bool_
        assert isinstance(term, np.ndarray)  # host flags, never a tensor
    finally:
        envs.close()
    envs = make_vec_envs("Pendulum-v1", 0, 2, 0.99, None, "cpu", True, vec_env="shmem")
    try:
        assert get_vec_normalize(envs).ret_rms is not None
        envs.reset()
        obs, reward, _, _, _ = envs.step(torch.zeros(2, 1))  # Box actions (N, dim)
        assert obs.shape == (2, 3) and obs.dtype == torch.float32 and reward.shape == (2, 1)
    finally:
        envs.close()


def test_frame_stack_final_obs():
    # episodes of 2 steps; obs = [episode, t]; a stack of 3 along dim 1
    envs = VecPyTorchFrameStack(VecPyTorch(DummyVecEnv([count_env(2)]), "cpu"), 3, "cpu")
    assert envs.observation_space.shape == (6,)
    first = envs.reset()
    assert first.tolist() == [[0, 0, 0, 0, 1, 0]]
    obs, _, _, _, infos = envs.step(torch.zeros(1, 1, dtype=torch.long))
    assert obs.tolist() == [[0, 0, 1, 0, 1, 1]] and "final_obs" not in infos[0]
    obs, _, term, _, infos = envs.step(torch.zeros(1, 1, dtype=torch.long))
    assert term.tolist() == [True]
    assert infos[0]["final_obs"].tolist() == [1, 0, 1, 1, 1, 2]  # previous stack shifted + final frame
    assert obs.tolist() == [[0, 0, 0, 0, 2, 0]]  # zeroed but for the new first frame
    assert first.tolist() == [[0, 0, 0, 0, 1, 0]]  # returned tensors are never modified later


@pytest.mark.slow
@pytest.mark.parametrize("env_id,kind", [("PongNoFrameskip-v4", "shmem"), ("ALE/Pong-v5", "dummy")])
def test_atari_preprocessing(env_id, kind):
    envs = make_vec_envs(env_id, 0, 2, 0.99, None, "cpu", False, vec_env=kind)
    try:
        assert get_vec_normalize(envs) is None and envs.observation_space.shape == (4, 84, 84)
        obs = envs.reset()
        assert obs.shape == (2, 4, 84, 84) and obs.dtype == torch.uint8
        for _ in range(3):
            obs, reward, _, _, _ = envs.step(torch.ones(2, 1, dtype=torch.long))
        assert obs.shape == (2, 4, 84, 84) and obs.dtype == torch.uint8 and reward.shape == (2, 1)
        assert obs[:, -1].float().mean() > 0  # a real frame, not zeros
    finally:
        envs.close()
    env = make_env(env_id, 0, 0, None, False)()
    chain = []
    while isinstance(env, gym.Wrapper):
        chain.append(type(env).__name__)
        env = env.env
    assert chain[:chain.index("NoopResetEnv") + 1] == [
        "SeedFirstReset", "TransposeImage", "ClipRewardEnv", "WarpFrameGray", "FireResetEnv",
        "EpisodicLifeEnv", "MaxAndSkipEnv", "NoopResetEnv"]
    assert env.spec.kwargs["frameskip"] == 1
    env.close()


def test_bad_names_raise_one_line_value_errors():
    with pytest.raises(ValueError, match="CartPole-v1") as err:  # suggests the close match
        make_vec_envs("CartPol-v1", 0, 1, 0.99, None, "cpu", True)
    assert "CartPol-v1" in str(err.value) and "\n" not in str(err.value)
    with pytest.raises(ValueError, match="'thread'.*dummy") as err:
        make_vec_envs("CartPole-v1", 0, 1, 0.99, None, "cpu", True, vec_env="thread")
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("failure,match", [
    ({"fail_at": 3}, r"env 2 \(CountEnv\) failed in step: ValueError: boom"),
    ({"fail_at": 2, "hard": True}, r"envs 2\.\.2 died \(exit status 3\)"),
    ({"fail_init": True}, r"env 2 failed .*ValueError: cannot build"),
])
def test_worker_crash_raises(failure, match):
    env_fns = [count_env(100), count_env(100), count_env(100, **failure)]
    with pytest.raises(RuntimeError, match=match):
        venv = ShmemVecEnv(env_fns, num_workers=2)
        venv.reset()
        for _ in range(5):
            venv.step(np.zeros(3, np.int64))
    if not failure.get("fail_init"):
        assert venv.closed  # workers were shut down, nothing left hanging


class RecordActionEnv(gym.Env):
    """Box(-1, 1) actions; the observation echoes the action the env received."""

    observation_space = spaces.Box(-np.inf, np.inf, (2,), np.float32)
    action_space = spaces.Box(-1.0, 1.0, (2,), np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return np.zeros(2, np.float32), {}

    def step(self, action):
        return np.asarray(action, np.float32), 0.0, False, False, {}


def test_box_actions_are_clipped_to_the_space():
    envs = VecPyTorch(DummyVecEnv([RecordActionEnv]), "cpu")
    envs.reset()
    actions = torch.tensor([[3.0, -0.5]])
    obs, _, _, _, _ = envs.step(actions)
    assert obs.tolist() == [[1.0, -0.5]]
    assert actions.tolist() == [[3.0, -0.5]]  # the caller's (stored) sample is untouched


class AsymmetricBoxEnv(RecordActionEnv):
    """RecordActionEnv with bounds that are neither symmetric nor of one width."""

    action_space = spaces.Box(np.array([-2.0, 0.0], np.float32), np.array([4.0, 0.5], np.float32))


def test_scaled_box_actions_land_where_gymnasiums_rescale_action_puts_them():
    envs = VecPyTorch(DummyVecEnv([AsymmetricBoxEnv]), "cpu", scale_actions=True)
    reference = gym.wrappers.RescaleAction(AsymmetricBoxEnv(), np.full(2, -1, np.float32),
                                            np.full(2, 1, np.float32))
    envs.reset()
    reference.reset()
    for action in ([-1.0, 1.0], [0.25, -0.5], [0.9, 0.1], [3.0, -7.0]):
        obs, _, _, _, _ = envs.step(torch.tensor([action]))
        expected, _, _, _, _ = reference.step(np.clip(np.array(action, np.float32), -1.0, 1.0))
        np.testing.assert_allclose(obs[0].numpy(), expected, rtol=1e-6)
    assert obs.tolist() == [[4.0, 0.0]]  # past [-1, 1]: clipped there, then mapped


def test_scale_actions_refuses_actions_without_bounds_in_one_line():
    class Unbounded(RecordActionEnv):
        action_space = spaces.Box(-np.inf, np.inf, (2,), np.float32)

    with pytest.raises(ConfigError, match=r"^--scale-actions .* Discrete\(2\): drop"):
        make_vec_envs("CartPole-v1", 0, 1, None, None, "cpu", False, vec_env="dummy",
                      scale_actions=True)
    with pytest.raises(ConfigError, match=r"Box\(-inf, inf"):
        VecPyTorch(DummyVecEnv([Unbounded]), "cpu", scale_actions=True)


def test_merged_normalizer_deltas_equal_one_normalizer_fed_all_data():
    """Copies of a VecNormalize (Ray workers, DDP ranks) start from the shared statistics, each
    sees its own data; merging their deltas gives what one RunningMeanStd fed everything has."""
    from a2c_ppo_acktr.envs import RunningMeanStd, merge_normalizer, normalizer_delta

    rng = np.random.default_rng(0)
    reference = RunningMeanStd(shape=(3,))
    shared = {"ob_rms": RunningMeanStd(shape=(3,)).state_dict()}
    for _ in range(4):  # updates
        deltas = []
        for copy in range(3):  # workers, each several batches per rollout
            rms = RunningMeanStd(shape=(3,))
            rms.load_state_dict(shared["ob_rms"])
            before = {"ob_rms": rms.state_dict()}
            for _ in range(5):
                batch = rng.normal(3.0 * copy, 1.0 + copy, size=(8, 3))
                rms.update(batch)
                reference.update(batch)
            deltas.append(normalizer_delta(before, {"ob_rms": rms.state_dict()}))
        shared = merge_normalizer(shared, deltas)
    np.testing.assert_allclose(shared["ob_rms"]["mean"].numpy(), reference.mean, rtol=1e-10)
    np.testing.assert_allclose(shared["ob_rms"]["var"].numpy(), reference.var, rtol=1e-10)
    assert shared["ob_rms"]["count"] == pytest.approx(reference.count)
    # Nothing seen: an empty delta, and merging it changes nothing.
    assert normalizer_delta(shared, shared) == {}
    assert torch.equal(merge_normalizer(shared, [{}])["ob_rms"]["mean"], shared["ob_rms"]["mean"])


@pytest.mark.slow
@pytest.mark.parametrize("kind, kwargs, again", [
    ("dummy", "None", False), ("shmem", "None", False),
    # issue #52: the shmem worker of env 0 said them, then the evaluation envs or the env kwargs'
    # check in this process said them again
    ("dummy", "None", True), ("shmem", "None", True), ("shmem", "{'ctrl_cost_weight': 0.2}", False)])
def test_mujoco_warnings_once_and_no_log_file(tmp_path, kind, kwargs, again):
    """MuJoCo warns at every model load (gymnasium's HalfCheetah XML uses a deprecated attribute)
    and writes MUJOCO_LOG.TXT into the working directory; here: one line a run, no file."""
    import subprocess
    import sys

    code = ("from a2c_ppo_acktr.envs import make_vec_envs\n"
            "def make():\n"
            "    return make_vec_envs('HalfCheetah-v5', 0, 4, 0.99, None, 'cpu', False, "
            f"vec_env='{kind}', env_kwargs={kwargs})\n"
            "e = make(); e.reset(); e.close()\n"
            + ("e = make(); e.reset(); e.close()\n" if again else ""))
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if "mujoco" in line.lower()]
    assert len(lines) <= 1, lines  # 4 without the handler (one per env), today's MuJoCo warns
    assert all(line.startswith("mujoco: warning: ") for line in lines)
    assert not (tmp_path / "MUJOCO_LOG.TXT").exists()
