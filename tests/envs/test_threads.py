"""``--vec-env threads`` (``envs/threads.ThreadVecEnv``): gymnasium's MuJoCo envs stepped as
``DummyVecEnv`` steps them, bit for bit; a failing env in a helper thread named as on the other
backends (a hung one: test_env_faults.py); ``auto``'s choice of it."""
import gymnasium as gym
import numpy as np
import pytest

import tests.fault_envs  # noqa: F401  (registers the ids)
from a2c_ppo_acktr.envs import DummyVecEnv, ThreadVecEnv, make_env, make_vec_envs
from a2c_ppo_acktr.envs import ids as env_ids
from a2c_ppo_acktr.envs import make as make_module
from a2c_ppo_acktr.errors import EnvError
from tests.envs.test_env_faults import CASES, failure


def _fns(env_id, n, log_dir=None, **kwargs):
    return [make_env(env_id, 3, rank, log_dir, False, env_kwargs=kwargs) for rank in range(n)]


@pytest.mark.parametrize("env_id, kwargs", [
    ("Hopper-v5", {}), ("Ant-v5", {"include_cfrc_ext_in_observation": False})])
def test_mujoco_envs_step_as_on_dummy_bit_for_bit(env_id, kwargs, tmp_path):
    """gymnasium's own envs, same seeds and actions: every observation, reward, end flag, final
    observation and episode statistic equal to ``DummyVecEnv``'s, across autoresets."""
    n = 5  # blocks of 2 and 3
    dummy = DummyVecEnv(_fns(env_id, n, str(tmp_path / "dummy"), **kwargs))
    threads = ThreadVecEnv(_fns(env_id, n, str(tmp_path / "threads"), **kwargs), 2)
    assert threads.blocks == [(0, 2), (2, 5)]
    rng = np.random.default_rng(0)
    ends = 0
    try:
        np.testing.assert_array_equal(dummy.reset(), threads.reset())
        for _ in range(150):
            actions = rng.uniform(-1, 1, (n, *dummy.action_space.shape)).astype(np.float32)
            want, got = dummy.step(actions), threads.step(actions)
            for a, b in zip(want[:4], got[:4]):
                np.testing.assert_array_equal(a, b)
            for a, b in zip(want[4], got[4]):
                assert a.keys() == b.keys()
                if "final_obs" in a:
                    ends += 1
                    np.testing.assert_array_equal(a["final_obs"], b["final_obs"])
                    assert (a["episode"]["r"], a["episode"]["l"]) == (b["episode"]["r"], b["episode"]["l"])
    finally:
        dummy.close()
        threads.close()
    assert ends > 0  # some episodes ended (Hopper falls; Ant flips or leaves its healthy range)


@pytest.mark.parametrize("env_id, line, end", CASES, ids=[c[0] for c in CASES])
def test_a_failing_env_is_the_same_line_as_on_dummy(env_id, line, end):
    want = failure(DummyVecEnv, env_id)
    got = failure(lambda f: ThreadVecEnv(f, 2), env_id)
    assert str(got) == str(want) and got.details == want.details


def test_a_failing_env_in_a_helper_thread_is_named_and_the_others_finish_their_step():
    fns = [make_env("tests.fault_envs:RaiseInStep-v0", 0, rank, None, False,
                    env_kwargs={"at": 3, "only": 2}) for rank in range(4)]
    venv = ThreadVecEnv(fns, 2)
    venv.reset()
    try:
        with pytest.raises(EnvError, match=r"^env 2 \(RaiseInStep-v0\) failed in step: "
                                           r"RuntimeError: simulated failure in step"):
            for _ in range(3):
                venv.step(np.zeros(4, np.int64))
        assert venv.envs[1].unwrapped.steps == 3  # the other block finished its step
        assert not any(venv._busy)
    finally:
        venv.close()
    assert not any(t.is_alive() for t in venv._threads)


def test_auto_picks_threads_for_mujoco_on_two_cpus(monkeypatch):
    mujoco, cartpole = env_ids.env_spec("Hopper-v5"), env_ids.env_spec("CartPole-v1")
    for cpus, many, one, cheap in [(2, "threads", "dummy", "dummy"), (1, "dummy", "dummy", "dummy"),
                                   (4, "shmem", "dummy", "dummy")]:
        monkeypatch.setattr(make_module, "num_cpus", lambda cpus=cpus: cpus)
        assert make_module._auto_vec_env(mujoco, 64, None) == many
        assert make_module._auto_vec_env(mujoco, 1, None) == one
        assert make_module._auto_vec_env(cartpole, 8, None) == cheap
    monkeypatch.setattr(make_module, "num_cpus", lambda: 2)
    envs = make_vec_envs("Hopper-v5", 0, 2, 0.99, None, "cpu", False)
    try:
        assert isinstance(envs.venv.venv, ThreadVecEnv)  # under VecNormalize and VecPyTorch
        assert envs.reset().shape == (2, *gym.make("Hopper-v5").observation_space.shape)
    finally:
        envs.close()


def test_it_keeps_the_faster_way_and_the_same_results_either_way(monkeypatch):
    """Every PROBE_EVERY steps it times PROBE_STEPS steps the other way and keeps the faster
    (here a clock on which the threads are slower, then faster); the results stay dummy's."""
    from a2c_ppo_acktr.envs import threads as threads_module
    monkeypatch.setattr(threads_module, "PROBE_EVERY", 20)
    monkeypatch.setattr(threads_module, "PROBE_STEPS", 4)
    clock = {"now": 0.0, "threaded": 2.0, "single": 1.0}  # seconds a step takes each way
    monkeypatch.setattr(threads_module.time, "perf_counter", lambda: clock["now"])
    n = 4
    dummy, venv = DummyVecEnv(_fns("Hopper-v5", n)), ThreadVecEnv(_fns("Hopper-v5", n), 2)
    run = venv._run

    def timed(fn, args, threaded=True):
        clock["now"] += clock["threaded" if threaded else "single"]
        return run(fn, args, threaded)

    venv._run = timed
    rng = np.random.default_rng(1)
    ways = []
    try:
        np.testing.assert_array_equal(dummy.reset(), venv.reset())
        for step in range(80):
            if step == 40:
                clock["threaded"], clock["single"] = 0.5, 1.0
            actions = rng.uniform(-1, 1, (n, 3)).astype(np.float32)
            for a, b in zip(dummy.step(actions)[:4], venv.step(actions)[:4]):
                np.testing.assert_array_equal(a, b)
            ways.append(venv.threaded)
    finally:
        dummy.close()
        venv.close()
    # decisions after steps 8, 28, 48, 68: the caller's thread first, the threads once faster
    assert ways[:7] == [True] * 7 and ways[7:47] == [False] * 40 and ways[47:] == [True] * 33
