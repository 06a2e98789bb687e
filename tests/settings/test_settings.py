"""The frozen ``Config`` built once from main.py's resolved flags (``arguments.config_from_args``,
from the declarations in a2c_ppo_acktr/config/): its parts hold the flags' values (defaults, a
recipe's, a resumed run's saved ones), it cannot be changed, and the Ray workers' part pickles."""
import dataclasses
import pickle

import pytest

from a2c_ppo_acktr import config as parts
from a2c_ppo_acktr.run.checkpoint import run_paths, write_config
from a2c_ppo_acktr.settings import recipes
from a2c_ppo_acktr.settings.arguments import config_from_args, get_args, get_config


def test_default_flags_give_the_originals_defaults_in_parts():
    cfg = get_config([])
    assert cfg.algo == parts.AlgoConfig(
        algo="a2c", lr=7e-4, eps=1e-5, alpha=0.99, value_loss_coef=0.5, entropy_coef=0.01,
        max_grad_norm=0.5, ppo_epoch=4, num_mini_batch=32, clip_param=0.2,
        use_clipped_value_loss=True, advantage_norm="batch", desired_kl=None,
        recompute_advantages=False, use_linear_lr_decay=False, lr_decay_horizon=None)
    assert cfg.algo == parts.AlgoConfig()  # the declared defaults are the original's
    assert cfg.returns == parts.ReturnsConfig(use_gae=False, gamma=0.99, gae_lambda=0.95,
                                              use_proper_time_limits=False)
    assert cfg.env == parts.EnvConfig("PongNoFrameskip-v4", 1, 16, "auto", ())
    assert cfg.policy == parts.PolicyConfig(recurrent=False, hidden_size=None, activation=None)
    assert cfg.sampling == parts.SamplingConfig(num_steps=5)
    assert cfg.gail is None
    assert (cfg.run.num_env_steps, cfg.run.whole_steps, cfg.run.save_dir) == (
        10_000_000, 10_000_000 // 80 * 80, "./trained_models/")
    assert cfg.record["flags"]["lr"] == 7e-4 and cfg.notes == () and cfg.warnings == ()


def test_derived_values_are_resolved_before_it_is_frozen():
    cfg = get_config(["--env-name", "CartPole-v1", "--algo", "acktr", "--use-linear-lr-decay",
                      "--num-processes", "3", "--num-steps", "10", "--num-env-steps", "100",
                      "--env-kwargs", "max_episode_steps=50", "--kfac-lr", "0.1", "--gail"])
    assert cfg.algo.lr_decay_horizon == 90  # whole updates of the budget
    assert cfg.algo.kfac == {"lr": 0.1} and cfg.algo.acktr
    assert cfg.env.env_kwargs == (("max_episode_steps", 50),)
    assert cfg.env.kwargs == {"max_episode_steps": 50}
    assert cfg.gail is not None and cfg.gail.warmup_updates == 10


def test_a_recipe_sets_its_parts_and_its_note():
    cfg = get_config(["--env-name", "HalfCheetah-v5", "--recipe", "tuned"])
    values = recipes.settings("HalfCheetah-v5", "tuned")
    assert cfg.algo.algo == values["algo"] and cfg.algo.lr == values["lr"]
    assert cfg.sampling.num_steps == values["num_steps"]
    assert cfg.run.num_env_steps == values["num_env_steps"]
    assert cfg.notes[0].startswith("recipe tuned for HalfCheetah-v5: ")
    assert cfg.record["flags"]["recipe"] == "tuned"


def test_a_resumed_run_gets_the_parts_of_its_saved_flags(tmp_path):
    argv = ["--env-name", "CartPole-v1", "--algo", "ppo", "--lr", "3e-4", "--num-processes", "2",
            "--num-steps", "8", "--num-mini-batch", "2", "--hidden-size", "16", "--num-env-steps",
            "64", "--log-dir", str(tmp_path / "logs"), "--save-dir", str(tmp_path / "models")]
    first = get_args(argv)
    write_config(first.config, run_paths(first).log_dir)
    resumed = get_config(["--resume", run_paths(first).log_dir])
    started = config_from_args(first)
    assert resumed.algo == started.algo and resumed.policy == started.policy
    assert resumed.env == started.env and resumed.sampling == started.sampling
    assert resumed.run.resume == run_paths(first).log_dir
    assert resumed.notes[0].startswith("resume: with the flags saved in ")


def test_the_configuration_cannot_be_changed():
    cfg = get_config([])
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.algo.lr = 1.0  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.notes = ("more",)  # type: ignore[misc]
    cfg.record["flags"]["lr"] = 1.0  # a copy: config.json's content stays
    assert cfg.record["flags"]["lr"] == 7e-4


def test_the_workers_part_pickles_and_holds_what_they_need():
    cfg = get_config(["--env-name", "CartPole-v1", "--num-workers", "2",
                      "--env-kwargs", "max_episode_steps=50", "--use-proper-time-limits"])
    part = pickle.loads(pickle.dumps(cfg.workers))
    assert part == cfg.workers
    assert (part.env.kwargs, part.sampling.num_workers, part.gamma, part.use_proper_time_limits) == (
        {"max_episode_steps": 50}, 2, 0.99, True)
