"""The one place the frozen ``Config`` (a2c_ppo_acktr/config.py) is built: from main.py's
resolved and checked flags (``arguments.get_args``: defaults, recipe, --config file or a resumed
run's saved flags, command line), with everything derived from them (the device, ``--env-kwargs``
as keywords, the lr decay's horizon, the notes, warnings and config.json's record) computed
before it is frozen."""
import argparse
import json

from a2c_ppo_acktr.config import (
    AlgoConfig,
    Config,
    EnvConfig,
    GailConfig,
    PolicyConfig,
    ReturnsConfig,
    RunConfig,
    SamplingConfig,
)
from a2c_ppo_acktr.run.checks import KFAC_OPTIONS, parse_env_kwargs
from a2c_ppo_acktr.run.config import whole_updates


def algo_config(args: argparse.Namespace) -> AlgoConfig:
    return AlgoConfig(
        algo=args.algo, lr=args.lr, eps=args.eps, alpha=args.alpha,
        value_loss_coef=args.value_loss_coef, entropy_coef=args.entropy_coef,
        max_grad_norm=args.max_grad_norm, ppo_epoch=args.ppo_epoch,
        num_mini_batch=args.num_mini_batch, clip_param=args.clip_param,
        use_clipped_value_loss=not args.no_clipped_value_loss, advantage_norm=args.advantage_norm,
        desired_kl=args.desired_kl, recompute_advantages=args.recompute_advantages,
        lr_decay_horizon=args.lr_decay_horizon if args.use_linear_lr_decay else None,
        kfac=tuple((name.removeprefix("kfac_"), getattr(args, name)) for name in KFAC_OPTIONS
                   if getattr(args, name) is not None))


def policy_config(args: argparse.Namespace) -> PolicyConfig:
    return PolicyConfig(
        recurrent=args.recurrent_policy, hidden_size=args.hidden_size, activation=args.activation,
        log_std_init=args.log_std_init, action_mean_gain=args.action_mean_gain, init=args.init,
        value_norm=args.value_norm, precision=args.precision)


def env_config(args: argparse.Namespace) -> EnvConfig:
    kwargs = args.env_kwargs  # get_args parsed its KEY=VALUE pairs already
    kwargs = kwargs if isinstance(kwargs, dict) else parse_env_kwargs(kwargs)
    return EnvConfig(env_name=args.env_name, seed=args.seed, num_processes=args.num_processes,
                     vec_env=args.vec_env, env_kwargs=tuple(kwargs.items()))


def run_config(args: argparse.Namespace) -> RunConfig:
    return RunConfig(
        algo=args.algo, env_name=args.env_name, seed=args.seed, num_env_steps=args.num_env_steps,
        whole_steps=whole_updates(args), log_interval=args.log_interval,
        save_interval=args.save_interval, save_history=args.save_history,
        eval_interval=args.eval_interval, log_dir=args.log_dir, save_dir=args.save_dir,
        cuda=args.cuda, cuda_deterministic=args.cuda_deterministic, compile=args.compile,
        resume=args.resume, overwrite=args.overwrite, capture_video=args.capture_video,
        track=args.track, wandb_project_name=args.wandb_project_name,
        wandb_entity=args.wandb_entity)


def config_from_args(args: argparse.Namespace) -> Config:
    """The frozen ``Config`` of ``get_args``' Namespace (its ``cuda``, ``notes``, ``warnings``
    and ``config`` included)."""
    return Config(
        algo=algo_config(args),
        returns=ReturnsConfig(use_gae=args.use_gae, gamma=args.gamma, gae_lambda=args.gae_lambda,
                              use_proper_time_limits=args.use_proper_time_limits),
        env=env_config(args), policy=policy_config(args),
        sampling=SamplingConfig(num_steps=args.num_steps, num_workers=args.num_workers,
                                ray_address=args.ray_address, async_rollouts=args.async_rollouts,
                                check_rollouts=args.check_rollouts),
        gail=GailConfig(experts_dir=args.gail_experts_dir, batch_size=args.gail_batch_size,
                        epoch=args.gail_epoch, warmup_updates=args.gail_warmup_updates,
                        warmup_epoch=args.gail_warmup_epoch, reward=args.gail_reward)
        if args.gail else None,
        run=run_config(args),
        notes=tuple(getattr(args, "notes", ())), warnings=tuple(getattr(args, "warnings", ())),
        record_json=json.dumps(getattr(args, "config", {})))
