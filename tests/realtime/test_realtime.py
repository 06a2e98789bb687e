"""Real-time env (rtgym semantics): timing, delays, time-outs, config, drone, vectorization."""
import time
import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces
from gymnasium.utils.env_checker import check_env

from a2c_ppo_acktr.realtime import DEFAULT_CONFIG, RealTimeEnv, RealTimeGymInterface
from a2c_ppo_acktr.realtime.drone import DRONE_CONFIG, DroneInterface


class EchoInterface(RealTimeGymInterface):
    """Deterministic device: no delays, the observation is the last control received."""

    target = np.array([0.5, 0.5], np.float32)

    def __init__(self):
        self.last = np.zeros(2, np.float32)
        self.waits = 0

    def get_observation_space(self):
        return spaces.Box(-2.0, 2.0, shape=(2,), dtype=np.float32)

    def get_action_space(self):
        return spaces.Box(-2.0, 2.0, shape=(2,), dtype=np.float32)

    def get_default_action(self):
        return np.zeros(2, np.float32)

    def send_control(self, action):
        self.last = np.array(action, np.float32)

    def reset(self, seed=None, options=None):
        self.last = np.zeros(2, np.float32)
        return self.last.copy(), {}

    def get_obs_rew_terminated_info(self):
        dist = float(np.linalg.norm(self.last - self.target))
        return self.last.copy(), -dist, dist < 0.01, {}

    def wait(self):
        self.waits += 1
        super().wait()


def echo_env(**config):
    return RealTimeEnv(EchoInterface(), {"time_step_duration": 0.01, "start_obs_capture": 0.01,
                                         **config})


def a(x, y=0.0):
    return np.array([x, y], np.float32)


@pytest.mark.slow
def test_step_interval_matches_nominal():
    # A generous timeout factor keeps the clock on its grid even if the loaded machine delays us.
    env = echo_env(time_step_duration=0.02, start_obs_capture=0.02, time_step_timeout_factor=10)
    env.reset(seed=0)
    returns = []
    for _ in range(101):
        env.step(a(0.1))
        returns.append(time.perf_counter())
    mean = (returns[-1] - returns[0]) / 100
    assert env.timeouts == 0
    assert abs(mean - 0.02) < 0.02 * 0.02, mean


def test_observation_reflects_previous_action():
    env = echo_env(act_buf_len=2)
    obs, _ = env.reset(seed=0)
    np.testing.assert_array_equal(obs, np.zeros(6))
    obs, *_ = env.step(a(1.0))
    # captured before a(1) is sent: the default action; the buffer ends with the committed a(1).
    np.testing.assert_array_equal(obs, [0, 0, 0, 0, 1, 0])
    obs, *_ = env.step(a(-1.0))
    np.testing.assert_array_equal(obs, [1, 0, 1, 0, -1, 0])
    assert obs.dtype == np.float32 and obs in env.observation_space


def test_slow_caller_times_out_and_wait_does_not():
    env = echo_env(time_step_timeout_factor=1.0)
    env.reset(seed=0)
    env.step(a(0.1))
    with pytest.warns(RuntimeWarning, match="time-out"):
        time.sleep(0.05)  # > deadline + 1 time step (0.01 + 0.01)
        _, _, _, _, info = env.step(a(0.1))
    assert info["timeout"] is True and info["timeouts"] == 1 and env.timeouts == 1
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # warned once per episode: counted, not warned again
        time.sleep(0.05)
        _, _, _, _, info = env.step(a(0.1))
    assert info["timeouts"] == 2 and env.timeouts == 2

    env.wait()
    assert env.interface.waits == 1
    np.testing.assert_array_equal(env.interface.last, [0, 0])  # default action while paused
    time.sleep(0.05)
    obs, _, _, _, info = env.step(a(0.3))
    assert "timeout" not in info and env.timeouts == 2
    np.testing.assert_array_equal(obs[:2], [0, 0])


@pytest.mark.slow
def test_late_call_within_tolerance_is_absorbed():
    env = echo_env(time_step_duration=0.1, start_obs_capture=0.1, time_step_timeout_factor=2.0)
    env.reset(seed=0)
    env.step(a(0.1))
    t0 = time.perf_counter()
    time.sleep(0.15)  # 50 ms late: within the 200 ms tolerance, so not a time-out
    env.step(a(0.1))  # returns at once ...
    env.step(a(0.1))  # ... and this shorter step puts the clock back on its grid: t0 + 0.2
    assert env.timeouts == 0
    # On the grid: t0 + 0.2 (re-based would be 0.15 + 0.1). t0 is taken after the first step
    # returned, which a loaded machine can make late, so the grid may lie up to that much
    # earlier; above 0.15 the third step still waited for it.
    assert 0.15 < time.perf_counter() - t0 < 0.225


@pytest.mark.filterwarnings("ignore:.*symmetric and normalized space")  # [-2, 2] by design
def test_check_env_on_registered_drone():
    env = gym.make("RealTimeDrone-v0", time_step_duration=0.01, start_obs_capture=0.01)
    try:
        check_env(env.unwrapped, skip_render_check=True)
    finally:
        env.close()


def test_config_copied_not_mutated_and_unknown_key():
    config = {"time_step_duration": 0.01, "start_obs_capture": 0.01}
    before = dict(config)
    env = RealTimeEnv(EchoInterface(), config)
    assert config == before and env.config is not config
    assert env.config["ep_max_length"] == DEFAULT_CONFIG["ep_max_length"] == 1000
    with pytest.raises(TypeError):
        DEFAULT_CONFIG["ep_max_length"] = 5  # read-only
    with pytest.raises(ValueError, match="'time_step';.*accepted: time_step_duration"):
        RealTimeEnv(EchoInterface(), {"time_step": 0.1})
    with pytest.raises(ValueError, match="bogus"):
        gym.make("RealTimeDrone-v0", bogus=1)
    env = gym.make("RealTimeDrone-v0", ep_max_length=7)
    assert env.unwrapped.config["ep_max_length"] == 7 and DRONE_CONFIG["ep_max_length"] == 100
    assert env.unwrapped.config["act_buf_len"] == 4 and env.observation_space.shape == (12,)
    env.close()


def test_truncation_and_termination():
    env = echo_env(ep_max_length=3)
    env.reset(seed=0)
    results = [env.step(a(0.0))[2:4] for _ in range(3)]
    assert results == [(False, False), (False, False), (False, True)]

    env = echo_env(ep_max_length=10)
    env.reset(seed=0)
    _, _, term, _, _ = env.step(EchoInterface.target)  # sent now, observed next step
    assert not term
    _, reward, term, trunc, info = env.step(EchoInterface.target)
    assert term and not trunc and reward == pytest.approx(0.0) and info["timeouts"] == 0


def test_wait_on_done_pauses():
    env = echo_env(ep_max_length=2, wait_on_done=True)
    env.reset(seed=0)
    env.step(a(1.0))
    env.step(a(1.0))
    assert env.interface.waits == 1


def test_benchmarks():
    env = echo_env(benchmark=True, benchmark_polyak=0.2, ep_max_length=20)
    env.reset(seed=0)
    for _ in range(20):
        time.sleep(0.002)  # "inference"
        *_, info = env.step(a(0.0))
    b = env.benchmarks()
    assert set(b) == {f"{k}_{s}" for k in ("time_step_duration", "step_time", "inference_time")
                      for s in ("mean", "dev")} | {"timeouts"}
    assert b["time_step_duration_mean"] == pytest.approx(0.01, rel=0.5)
    assert 0.0015 < b["inference_time_mean"] < 0.05
    assert 0 < b["step_time_mean"] < 0.01
    assert all(b[k] >= 0 for k in b)
    assert info["benchmark"] == b  # episode end


def test_mean_benchmarks_over_envs():
    from a2c_ppo_acktr.realtime import BENCHMARK_KEYS, mean_benchmarks

    fast = {k: 0.01 for k in BENCHMARK_KEYS}
    slow = {k: 0.03 for k in BENCHMARK_KEYS}
    slow["inference_time_mean"] = float("nan")  # no sample yet in that env
    m = mean_benchmarks([fast, None, slow])
    assert set(m) == set(BENCHMARK_KEYS)
    assert m["time_step_duration_mean"] == pytest.approx(0.02)
    assert m["inference_time_mean"] == pytest.approx(0.01)
    assert all(np.isnan(v) for v in mean_benchmarks([None, None]).values())
    # benchmark=False: nothing measured, so NaN rather than a spread of 0
    env = echo_env()
    env.reset(seed=0)
    env.step(a(0.0))
    env.step(a(0.0))
    assert all(np.isnan(v) for k, v in env.benchmarks().items() if k != "timeouts")


@pytest.mark.slow
def test_drone_dynamics_render_and_seeding():
    drone = DroneInterface()
    try:
        obs, _ = drone.reset(seed=3)
        obs2, _ = drone.reset(seed=3)
        np.testing.assert_array_equal(obs, obs2)
        assert np.all(np.abs(obs[2:]) <= 0.5) and np.all(obs[:2] == 0)
        t0 = time.perf_counter()
        drone.send_control(a(10.0, 10.0))  # clipped to norm 2: speed sqrt(2) per axis
        time.sleep(0.25)
        obs, reward, _, _ = drone.get_obs_rew_terminated_info()
        elapsed = time.perf_counter() - t0
        # moving for the elapsed time minus the 20-50 ms control and observation delays
        assert 0.02 < obs[0] < (elapsed - 0.04) * 2 ** 0.5 + 0.02
        assert obs[0] == pytest.approx(obs[1], abs=1e-5)
        assert reward == pytest.approx(-np.linalg.norm(obs[:2] - obs[2:]), abs=1e-6)
        frame = drone.render()
        assert frame.shape == (200, 200, 3) and frame.dtype == np.uint8
        assert (frame == [255, 0, 0]).all(-1).any() and (frame == [0, 0, 255]).all(-1).any()
    finally:
        drone.close()


def test_drone_stale_messages_dropped():
    msgs = [(1.0, 0.5, "new"), (1.0, 0.2, "old"), (9.0, 0.9, "future")]
    stamp, value = DroneInterface._deliver(msgs, now=2.0, stamp=0.3, value="start")
    assert (stamp, value) == (0.5, "new") and msgs == [(9.0, 0.9, "future")]
    stamp, value = DroneInterface._deliver([(1.0, 0.1, "stale")], now=2.0, stamp=0.3, value="x")
    assert (stamp, value) == (0.3, "x")


@pytest.mark.slow
def test_shmem_vec_env_workers_build_it():
    import torch

    from a2c_ppo_acktr.envs import ShmemVecEnv, make_vec_envs

    envs = make_vec_envs("RealTimeDrone-v0", 0, 2, 0.99, None, "cpu", False, vec_env="shmem",
                         env_kwargs={"ep_max_length": 10})
    try:
        assert isinstance(envs.venv.venv, ShmemVecEnv) and len(envs.venv.venv.pids) >= 1
        obs = envs.reset()
        assert obs.shape == (2, 12)
        t0 = time.perf_counter()
        for _ in range(10):
            obs, reward, terminated, truncated, infos = envs.step(torch.zeros(2, 2))
        # each worker process keeps its own 50 ms clock: 10 real-time steps take ~0.5 s
        assert 0.45 < time.perf_counter() - t0 < 2.0
        assert obs.shape == (2, 12) and reward.shape == (2, 1)
        assert truncated.all()  # the env kwargs reached the workers' gym.make
        benchmarks = envs.benchmarks()  # read from the workers at any time
        assert len(benchmarks) == 2
        assert all(b["time_step_duration_mean"] == pytest.approx(0.05, abs=0.01) for b in benchmarks)
    finally:
        envs.close()


@pytest.mark.slow
@pytest.mark.parametrize("vec_env", ["dummy", "shmem"])
def test_vec_env_pause_prevents_time_outs(vec_env):
    """What main.py does around an update: pause, take longer than a step, resume on time."""
    import torch

    from a2c_ppo_acktr.envs import make_vec_envs

    envs = make_vec_envs("RealTimeDrone-v0", 0, 2, 0.99, None, "cpu", False, vec_env=vec_env)
    try:
        envs.reset()
        envs.step(torch.zeros(2, 2))
        envs.pause()
        time.sleep(0.15)  # three time steps of "update"
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # a time-out would warn
            _, _, _, _, infos = envs.step(torch.zeros(2, 2))
        assert not any(info.get("timeout") for info in infos)
        time.sleep(0.15)  # the same delay without a pause is a time-out
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            _, _, _, _, infos = envs.step(torch.zeros(2, 2))
        assert any(info.get("timeout") for info in infos)
    finally:
        envs.close()


def test_vec_env_pause_is_a_no_op_for_other_envs():
    import torch

    from a2c_ppo_acktr.envs import make_vec_envs

    envs = make_vec_envs("CartPole-v1", 0, 2, 0.99, None, "cpu", False, vec_env="shmem")
    try:
        envs.reset()
        envs.pause()
        obs, _, _, _, _ = envs.step(torch.zeros(2, 1, dtype=torch.long))
        assert obs.shape == (2, 4)
        assert envs.benchmarks() == [None, None]  # how main.py tells real-time envs apart
    finally:
        envs.close()


def test_readme_motor_example_runs():
    """The README's worked example of plugging in a device, with a simulated motor."""
    from a2c_ppo_acktr.realtime import RealTimeGymInterface

    class FakeMotor:
        def __init__(self):
            self.pos, self.speed = 0.0, 0.0

        def set_speed(self, v):
            self.speed = v

        def home(self):
            self.pos = 0.0

        def position(self):
            self.pos += 0.01 * self.speed  # advances each time it is read: good enough here
            return self.pos

    class MotorInterface(RealTimeGymInterface):
        def __init__(self, motor):
            self.motor = motor

        def get_observation_space(self):
            return spaces.Box(-np.inf, np.inf, (1,), np.float32)

        def get_action_space(self):
            return spaces.Box(-1.0, 1.0, (1,), np.float32)

        def get_default_action(self):
            return np.zeros(1, np.float32)

        def send_control(self, action):
            self.motor.set_speed(float(action[0]))

        def reset(self, seed=None, options=None):
            self.motor.home()
            return np.array([self.motor.position()], np.float32), {}

        def get_obs_rew_terminated_info(self):
            pos = self.motor.position()
            return np.array([pos], np.float32), -abs(pos - 0.5), abs(pos - 0.5) < 0.01, {}

    if "TestMotor-v0" not in gym.registry:
        gym.register("TestMotor-v0", entry_point=lambda **cfg: RealTimeEnv(
            MotorInterface(FakeMotor()), cfg))
    env = gym.make("TestMotor-v0", time_step_duration=0.01, start_obs_capture=0.01,
                   ep_max_length=5)
    obs, _ = env.reset(seed=0)
    assert obs.shape == (2,)  # position + an action buffer of 1
    for _ in range(5):
        obs, reward, terminated, truncated, info = env.step(np.ones(1, np.float32))
    assert truncated and obs[0] > 0 and obs[1] == 1.0
    env.close()


@pytest.mark.parametrize("package, env_id", [("a2c_ppo_acktr", "RealTimeDrone-v0"),
                                             ("gymnasium", "a2c_ppo_acktr:RealTimeDrone-v0")])
def test_drone_id_registered_on_import(package, env_id):
    """As ale-py's ids: ``import a2c_ppo_acktr`` registers the id, and gymnasium's ``module:Id``
    form imports the package itself; the env made by name passes gymnasium's checker."""
    import subprocess
    import sys

    code = f"""if True:
        import warnings
        import gymnasium as gym
        from gymnasium.utils.env_checker import check_env
        warnings.simplefilter("ignore")  # the drone's [-2, 2] actions are asymmetric by design
        import {package}
        env = gym.make("{env_id}", time_step_duration=0.01, start_obs_capture=0.01)
        check_env(env.unwrapped, skip_render_check=True)
        print(env.spec.id, env.observation_space.shape)
        env.close()
    """
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split()[0] == "RealTimeDrone-v0"
