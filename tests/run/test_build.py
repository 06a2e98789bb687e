"""run/build.py: the agent the flags ask for, a run's parts (and the envs closed when they do not
fit), and the collector each sampling mode gets."""
import dataclasses
import types

import pytest
import torch
from gymnasium import spaces

from a2c_ppo_acktr.algo import A2C_ACKTR, PPO, KFACOptimizer
from a2c_ppo_acktr.config import AlgoConfig
from a2c_ppo_acktr.envs import get_vec_normalize
from a2c_ppo_acktr.errors import ConfigError
from a2c_ppo_acktr.model import Policy
from a2c_ppo_acktr.rollout import Collector
from a2c_ppo_acktr.run import build
from a2c_ppo_acktr.run.checkpoint import RunPaths
from a2c_ppo_acktr.sampling.async_thread import AsyncCollector
from a2c_ppo_acktr.sampling.ddp import DDPCollector
from a2c_ppo_acktr.settings.arguments import get_args, get_config
from a2c_ppo_acktr.settings.checks import check_args

TINY = ["--env-name", "CartPole-v1", "--num-processes", "2", "--num-steps", "4",
        "--vec-env", "dummy", "--num-mini-batch", "2"]

pytestmark = [pytest.mark.usefixtures("one_thread"), pytest.mark.research]


@pytest.mark.parametrize("algo, cls, optimizer", [
    ("ppo", PPO, torch.optim.Adam), ("a2c", A2C_ACKTR, torch.optim.RMSprop),
    ("acktr", A2C_ACKTR, KFACOptimizer)])
def test_make_agent_builds_the_flags_algorithm(algo, cls, optimizer):
    cfg = get_config(["--algo", algo, "--lr", "3e-4", "--num-mini-batch", "4"]).algo
    agent = build.make_agent(cfg, Policy((3,), spaces.Discrete(2)))
    assert type(agent) is cls and isinstance(agent.optimizer, optimizer)
    if algo != "acktr":  # K-FAC keeps its own lr
        assert agent.optimizer.param_groups[0]["lr"] == 3e-4
    if algo == "ppo":
        assert agent.num_mini_batch == 4 and agent.clip_param == cfg.clip_param


# What make_agent passes each agent by default: the AlgoConfig fields named as its parameters.
SETTINGS = {
    "ppo": {"clip_param": 0.2, "ppo_epoch": 4, "num_mini_batch": 32, "value_loss_coef": 0.5,
            "entropy_coef": 0.01, "lr": 7e-4, "eps": 1e-5, "max_grad_norm": 0.5,
            "use_clipped_value_loss": True, "advantage_norm": "batch", "desired_kl": None,
            "lr_decay_horizon": None, "recompute_advantages": False, "rpo_alpha": 0.0},
    "a2c": {"value_loss_coef": 0.5, "entropy_coef": 0.01, "lr": 7e-4, "eps": 1e-5, "alpha": 0.99,
            "max_grad_norm": 0.5, "acktr": False, "kfac": {}, "lr_decay_horizon": None}}


@pytest.mark.parametrize("algo", ["ppo", "a2c"])
def test_flags_reach_the_agent_by_the_names_of_its_init_parameters(algo, monkeypatch):
    """make_agent is ``AGENTS[algo](actor_critic, **settings)``: these settings, by name."""
    settings = build.agent_settings(AlgoConfig(algo=algo), build.AGENTS[algo])
    # a flag added since (a research edit's, in two files) reaches the agent the same way
    added = {name: value for name, value in settings.items() if name not in SETTINGS[algo]}
    assert {**settings, **SETTINGS[algo]} == settings  # every setting above, at its value
    assert added == {name: getattr(AlgoConfig(algo=algo), name) for name in added}
    calls = []

    class Recording(build.AGENTS[algo]):
        def __init__(self, actor_critic, **kwargs) -> None:
            calls.append(kwargs)
            super().__init__(actor_critic, **kwargs)
    monkeypatch.setitem(build.AGENTS, algo, Recording)
    build.make_agent(AlgoConfig(algo=algo, entropy_coef=0.02), Policy((3,), spaces.Discrete(2)))
    assert calls == [{**settings, "entropy_coef": 0.02, "generator": None}]


def test_make_agent_gives_kfac_the_flags_settings_and_its_defaults_otherwise():
    def group(*flags):
        cfg = get_config(["--algo", "acktr", *flags]).algo
        return build.make_agent(cfg, Policy((3,), spaces.Discrete(2))).optimizer.param_groups[0]
    defaults = group()
    assert (defaults["lr"], defaults["kl_clip"], defaults["damping"]) == (0.25, 0.001, 0.01)
    given = group("--kfac-lr", "0.1", "--kfac-kl-clip", "0.01", "--kfac-damping", "0.001")
    assert (given["lr"], given["kl_clip"], given["damping"]) == (0.1, 0.01, 0.001)
    assert given["momentum"] == defaults["momentum"] == 0.9
    cfg = get_config(["--algo", "acktr"]).algo
    assert build.make_agent(cfg, Policy((3,), spaces.Discrete(2))).optimizer.split_bias is False
    cfg = get_config(["--algo", "acktr", "--kfac-split-bias"]).algo
    assert build.make_agent(cfg, Policy((3,), spaces.Discrete(2))).optimizer.split_bias is True


def test_an_unknown_algorithm_is_refused_with_the_flags_before_make_agent():
    args = get_args([])
    args.algo = "trpo"  # past the parser, as a caller building args by hand could
    with pytest.raises(ConfigError, match=r"unknown --algo 'trpo'; choose one of: a2c, ppo, acktr"):
        check_args(args)


def test_build_run_makes_the_flags_envs_policy_and_agent(tmp_path):
    cfg = get_config(TINY + ["--algo", "ppo", "--hidden-size", "16", "--recurrent-policy"])
    paths = RunPaths(str(tmp_path), str(tmp_path / "eval"), None)
    envs, policy, agent, reward_models = build.build_run(cfg, paths, "cpu", None, rank=0)
    try:
        assert envs.num_envs == 2 and get_vec_normalize(envs) is not None
        assert policy.is_recurrent and policy.recurrent_hidden_state_size == 16
        assert isinstance(agent, PPO) and agent.actor_critic is policy
        assert reward_models == {}
    finally:
        envs.close()


def test_build_run_closes_its_envs_when_the_policy_does_not_fit(tmp_path, monkeypatch):
    closed = []
    original = build.make_vec_envs

    def make_vec_envs(*args, **kwargs):
        envs = original(*args, **kwargs)
        close = envs.close
        envs.close = lambda: (closed.append(True), close())
        return envs

    monkeypatch.setattr(build, "make_vec_envs", make_vec_envs)
    cfg = get_config(TINY + ["--init", "default"])
    # past the checks: Policy itself refuses it
    cfg = dataclasses.replace(cfg, policy=dataclasses.replace(cfg.policy, action_mean_gain=0.5))
    paths = RunPaths(str(tmp_path), str(tmp_path / "eval"), None)
    with pytest.raises(ConfigError, match="action mean gain"):
        build.build_run(cfg, paths, "cpu", None, rank=0)
    assert closed == [True]


@pytest.mark.parametrize("flags, ddp, cls", [
    ([], None, Collector),
    (["--async-rollouts"], None, AsyncCollector),
    # A rank's collector: the stand-in holds what DDPCollector asks of the rank at start.
    ([], types.SimpleNamespace(share_normalizer=lambda envs: None), DDPCollector)])
def test_build_collector_picks_the_sampling_mode(tmp_path, flags, ddp, cls):
    cfg = get_config(TINY + ["--algo", "ppo"] + flags)
    paths = RunPaths(str(tmp_path), str(tmp_path / "eval"), None)
    envs, policy, agent, _ = build.build_run(cfg, paths, "cpu", None, rank=0)
    collector = build.build_collector(cfg, paths, envs, policy, torch.device("cpu"), ddp,
                                      num_rollouts=2)
    try:
        assert type(collector) is cls
        assert collector.rollouts.obs.shape == (4 + 1, 2, 4)
        if cls is AsyncCollector:  # a second policy of the same shape acts in the thread
            assert collector.behaviour is not policy
            assert collector.behaviour.state_dict().keys() == policy.state_dict().keys()
    finally:
        collector.close()


def test_the_agent_has_its_own_generator_only_beside_a_sampler_thread():
    """Synchronous, torchrun and Ray runs (asynchronous or not: the workers sample in their own
    processes) keep drawing from torch's global generator; a sampler thread's run gets one of its
    own, the same for the same seed and start."""
    cpu = torch.device("cpu")
    for flags in ([], ["--num-workers", "2"], ["--num-workers", "2", "--async-rollouts"]):
        assert build.learner_generator(get_config(TINY + flags), 0, cpu) is None, flags

    def draws(seed, env_steps):
        cfg = get_config(TINY + ["--async-rollouts", "--seed", str(seed)])
        return torch.rand(4, generator=build.learner_generator(cfg, env_steps, cpu))

    assert torch.equal(draws(3, 0), draws(3, 0))
    assert not torch.equal(draws(3, 0), draws(4, 0))
    assert not torch.equal(draws(3, 0), draws(3, 640))  # a resumed run draws anew
    torch.manual_seed(3)  # not the global generator's stream of the same seed
    assert not torch.equal(draws(3, 0), torch.rand(4))
