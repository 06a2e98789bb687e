"""What a run is made of: its envs, policy, agent and reward model (GAIL's), restored from its
checkpoint on --resume, the collector that samples for it and its evaluations. Bad input raises a
``ConfigError`` or ``CheckpointError`` with one line, the envs closed."""
import argparse
import functools
import os
from typing import Optional

import torch

from a2c_ppo_acktr import algo, speed
from a2c_ppo_acktr.algo import gail
from a2c_ppo_acktr.envs import TorchVecEnv, get_vec_normalize, make_vec_envs
from a2c_ppo_acktr.errors import CheckpointError, ConfigError
from a2c_ppo_acktr.evaluation import Evaluations, InlineEvaluations, evaluate
from a2c_ppo_acktr.model import Policy, make_policy, policy_kwargs
from a2c_ppo_acktr.rollout import Collector
from a2c_ppo_acktr.run.checkpoint import RunPaths, check_checkpoint
from a2c_ppo_acktr.run.checks import KFAC_OPTIONS
from a2c_ppo_acktr.run.tracking import video_prefix
from a2c_ppo_acktr.sampling.async_thread import AsyncCollector
from a2c_ppo_acktr.sampling.ddp import DDP, DDPCollector
from a2c_ppo_acktr.sampling.ray_learner import RayCollector, WorkerGroup
from a2c_ppo_acktr.utils import space_shape

DEFAULT_THREADS = torch.get_num_threads()

# What a run samples with: make_vec_envs' envs, or the Ray workers seen as one vector env.
RunEnvs = WorkerGroup | TorchVecEnv


def run_policy_kwargs(args: argparse.Namespace) -> dict:
    """``policy_kwargs`` and how this run computes (``--precision``): not the network's shape, so
    not in the checkpoint's copy."""
    return {**policy_kwargs(args), "precision": args.precision}


def make_agent(args: argparse.Namespace, actor_critic: Policy) -> algo.Agent:
    """The ``--algo`` agent on ``actor_critic``; ``ConfigError`` for an unknown name."""
    horizon = args.lr_decay_horizon if args.use_linear_lr_decay else None
    if args.algo == "ppo":
        return algo.PPO(actor_critic, args.clip_param, args.ppo_epoch, args.num_mini_batch,
                        args.value_loss_coef, args.entropy_coef, lr=args.lr, eps=args.eps,
                        max_grad_norm=args.max_grad_norm,
                        use_clipped_value_loss=not args.no_clipped_value_loss,
                        advantage_norm=args.advantage_norm, desired_kl=args.desired_kl,
                        lr_decay_horizon=horizon,
                        recompute_advantages=args.recompute_advantages)
    if args.algo in ("a2c", "acktr"):
        return algo.A2C_ACKTR(actor_critic, args.value_loss_coef, args.entropy_coef, lr=args.lr,
                              eps=args.eps, alpha=args.alpha, max_grad_norm=args.max_grad_norm,
                              acktr=args.algo == "acktr", lr_decay_horizon=horizon,
                              kfac=kfac_settings(args))
    raise ConfigError(f"unknown --algo {args.algo!r}; choose one of: {', '.join(algo.ALGOS)}")


def kfac_settings(args: argparse.Namespace) -> dict[str, float | bool]:
    """The K-FAC settings the flags give (``--kfac-lr`` ...); the rest keep K-FAC's defaults."""
    return {name.removeprefix("kfac_"): getattr(args, name) for name in KFAC_OPTIONS
            if getattr(args, name) is not None}


def make_gail(args: argparse.Namespace, envs: RunEnvs, device: torch.device) -> gail.GailReward:
    """GAIL's reward model: its discriminator, expert batches (raw states) and schedule;
    ``gail.GailError`` on bad input."""
    path = gail.expert_path(args.gail_experts_dir, args.env_name)
    discr = gail.Discriminator(envs.observation_space, envs.action_space, reward=args.gail_reward,
                               device=device)
    if not os.path.isfile(path):
        raise gail.GailError(
            f"no expert file at {path}; make one from a policy trained by main.py with "
            f"'python gail_experts/generate.py --env-name {args.env_name} --load-dir <save-dir>' "
            "(or convert openai/imitation data with gail_experts/convert_to_pytorch.py)")
    dataset = gail.ExpertDataset(path, num_trajectories=4, subsample_frequency=20)
    gail.check_expert_data(dataset, path, args.env_name, envs.observation_space, envs.action_space)
    print(f"GAIL: {len(dataset)} expert pairs from {path}, trajectory returns "
          f"{', '.join(f'{r:.1f}' for r in dataset.expert_returns)}")
    loader = torch.utils.data.DataLoader(dataset, batch_size=args.gail_batch_size, shuffle=True,
                                         drop_last=len(dataset) > args.gail_batch_size)
    normalizer = get_vec_normalize(envs)
    assert normalizer is not None  # vector observations (the Discriminator's check) are normalized
    return gail.GailReward(discr, loader, normalizer, args.gamma, args.gail_warmup_updates,
                           args.gail_warmup_epoch, args.gail_epoch)


def restore(args: argparse.Namespace, paths: RunPaths, resumed: dict, envs: RunEnvs,
            actor_critic: Policy, agent: algo.Agent, discr: Optional[gail.Discriminator]) -> None:
    """Load the checkpoint ``resumed`` into the run; ``CheckpointError`` if it does not fit."""
    assert paths.checkpoint is not None  # --resume needs one (rundir.check_run)
    try:
        check_checkpoint(resumed, paths.checkpoint, args.env_name, space_shape(envs.observation_space),
                         envs.action_space)
        actor_critic.load_state_dict(resumed["actor_critic"])
        agent.optimizer.load_state_dict(resumed["optimizer"])
        if discr is not None:
            if resumed.get("gail") is None:
                raise CheckpointError(f"{paths.checkpoint} was trained without --gail")
            discr.load_full_state_dict(resumed["gail"])
    except (CheckpointError, RuntimeError, ValueError, KeyError) as e:
        raise CheckpointError(f"--resume: {str(e).splitlines()[0]}") from None
    if resumed["obs_rms"] is not None:
        vec_norm = get_vec_normalize(envs)
        assert vec_norm is not None  # the checkpoint's env (checked above) normalizes
        vec_norm.load_state_dict(resumed["obs_rms"])
    torch.set_rng_state(resumed["torch_rng"])


def build_run(args: argparse.Namespace, paths: RunPaths, device: torch.device,
              resumed: Optional[dict], rank: int) -> tuple:
    """The run's envs, policy, agent and reward model (GAIL's, or None), restored from
    ``resumed``; bad input raises ``ConfigError`` (or ``CheckpointError``), with the envs
    closed."""
    env_steps = resumed["env_steps"] if resumed else 0
    try:
        # A resumed run re-seeds its envs past the seeds already used, not replaying them.
        if args.num_workers:  # Ray actors sample; they look like one vector env of N * P envs
            envs: RunEnvs = WorkerGroup(args, paths.log_dir, paths.eval_dir, env_steps,
                                        resumed=bool(resumed))
        else:
            envs = make_vec_envs(args.env_name, args.seed + env_steps, args.num_processes,
                                 args.gamma, paths.log_dir, device, False, vec_env=args.vec_env,
                                 monitor_append=bool(resumed), env_kwargs=args.env_kwargs,
                                 first_rank=rank * args.num_processes,
                                 video_prefix=video_prefix(paths, env_steps)
                                 if args.capture_video else None)
    except (ValueError, ImportError) as e:  # unknown env id (with suggestions), bad env kwargs,
        raise ConfigError(str(e)) from None  # unsupported observations, no Ray, ...
    try:
        # Small MLPs: intra-op threads cost more in synchronisation than they gain. Convolutions
        # on image batches do gain (docs/benchmarks.md, "Measured code choices").
        obs_shape = space_shape(envs.observation_space)
        torch.set_num_threads(1 if len(obs_shape) == 1 else DEFAULT_THREADS)
        actor_critic = make_policy(obs_shape, envs.action_space,
                                   run_policy_kwargs(args), device)
        agent = make_agent(args, actor_critic)
        reward_model = make_gail(args, envs, device) if args.gail else None
        if resumed:
            restore(args, paths, resumed, envs, actor_critic, agent,
                    reward_model.discr if reward_model else None)
        if args.compile:  # compiled on first use: in the first rollout and the first update
            speed.compile_policy(actor_critic, device)
            speed.compile_agent(agent, device)
    except CheckpointError:
        envs.close()
        raise
    except ValueError as e:  # spaces the policy does not handle, GailError
        envs.close()
        raise ConfigError(str(e)) from None
    except BaseException:
        envs.close()
        raise
    return envs, actor_critic, agent, reward_model


def build_collector(args: argparse.Namespace, paths: RunPaths, envs: RunEnvs, actor_critic: Policy,
                    device: torch.device, ddp: Optional[DDP], num_rollouts: int) -> Collector:
    """The sampling mode, chosen once: the loop only calls the ``Collector`` interface.

    Ray workers (``--num-workers``, asynchronous or not: the workers decide), torchrun ranks,
    a sampler thread (``--async-rollouts``), or this process between updates.
    """
    common = (args.num_steps, args.use_proper_time_limits, device)
    if args.num_workers:
        return RayCollector(envs, actor_critic, *common)
    if ddp is not None:
        return DDPCollector(ddp, envs, actor_critic, *common)
    if args.async_rollouts:
        behaviour = make_policy(space_shape(envs.observation_space), envs.action_space,
                                run_policy_kwargs(args), device)
        return AsyncCollector(envs, actor_critic, behaviour, *common, num_rollouts)
    return Collector(envs, actor_critic, *common)


def build_evaluations(args: argparse.Namespace, paths: RunPaths, collector: Collector,
                      device: torch.device) -> Evaluations:
    """Where ``--eval-interval``'s evaluations run, beside ``collector``: in the Ray workers'
    Evaluator actor, off the learner's path, or in this process with the statistics of the
    rollout last collected."""
    if isinstance(collector.envs, WorkerGroup):
        return collector.envs
    evaluate_fn = functools.partial(evaluate, env_name=args.env_name, seed=args.seed,
                                    num_processes=args.num_processes, eval_log_dir=paths.eval_dir,
                                    device=device, env_kwargs=args.env_kwargs)
    return InlineEvaluations(evaluate_fn, lambda: collector.obs_rms)
