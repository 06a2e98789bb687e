"""Train an on-policy agent: ``python main.py --algo ppo --env-name CartPole-v1 ...``.

The loop is the algorithm box of the papers: collect ``num_steps`` transitions from
``num_processes`` envs, bootstrap from the last observation, compute returns (GAE or n-step),
update the agent, then log / save / evaluate.
"""
import functools
import glob
import math
import os
import sys
import time
from collections import deque

import numpy as np
import torch

from a2c_ppo_acktr import algo, utils
from a2c_ppo_acktr.algo import gail
from a2c_ppo_acktr.arguments import fail, get_args
from a2c_ppo_acktr.distributed import DDP
from a2c_ppo_acktr.envs import get_vec_normalize, make_vec_envs, normalizer_state
from a2c_ppo_acktr.logger import ProgressLine, ScalarLogger
from a2c_ppo_acktr.model import Policy, policy_kwargs
from a2c_ppo_acktr.realtime import mean_benchmarks
from a2c_ppo_acktr.rollout import collect_rollout
from a2c_ppo_acktr.sampler import AsyncSampler
from a2c_ppo_acktr.storage import RolloutStorage
from evaluation import evaluate

DEFAULT_THREADS = torch.get_num_threads()


def make_policy(args, envs, device):
    return Policy(envs.observation_space.shape, envs.action_space,
                  **policy_kwargs(args)).to(device)


def make_agent(args, actor_critic):
    if args.algo == "ppo":
        return algo.PPO(actor_critic, args.clip_param, args.ppo_epoch, args.num_mini_batch,
                        args.value_loss_coef, args.entropy_coef, lr=args.lr, eps=args.eps,
                        max_grad_norm=args.max_grad_norm,
                        use_clipped_value_loss=not args.no_clipped_value_loss,
                        advantage_norm=args.advantage_norm)
    return algo.A2C_ACKTR(actor_critic, args.value_loss_coef, args.entropy_coef, lr=args.lr,
                          eps=args.eps, alpha=args.alpha, max_grad_norm=args.max_grad_norm,
                          acktr=args.algo == "acktr")


def save_path(args):
    return os.path.join(args.save_dir, args.algo, args.env_name.replace("/", "_") + ".pt")


def checkpoint_state(args, actor_critic, agent, envs, env_steps, obs_rms, discr=None):
    """Everything needed to rebuild and resume the run, as tensors and plain values."""
    return {
        "actor_critic": actor_critic.state_dict(),
        "optimizer": agent.optimizer.state_dict(),
        "obs_rms": obs_rms,
        "env_steps": env_steps,
        "torch_rng": torch.get_rng_state(),
        "env_name": args.env_name,
        "env_kwargs": args.env_kwargs,
        "algo": args.algo,
        "obs_shape": list(envs.observation_space.shape),
        "action_space": str(envs.action_space),
        "recurrent_policy": args.recurrent_policy,
        "policy_kwargs": policy_kwargs(args),  # the network's shape, for enjoy.py
        "gail": discr.full_state_dict() if discr is not None else None,
    }


def make_gail(args, envs, device):
    """GAIL's discriminator and expert batches (raw states); ``gail.GailError`` on bad input."""
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
    return discr, loader


def check_run_dirs(args, log_dir):
    """A new run must not silently replace an old one; --resume needs one to continue."""
    path = save_path(args)
    monitors = glob.glob(os.path.join(log_dir, "*.monitor.csv"))
    if args.resume:
        if not os.path.exists(path):
            fail(f"--resume: no checkpoint at {path}; start a new run without --resume")
    elif not args.overwrite and (os.path.exists(path) or monitors):
        found = path if os.path.exists(path) else log_dir
        fail(f"{found} already holds a run; pass --resume to continue it or --overwrite to "
             "replace it")


def main(argv=None):
    args = get_args(argv)
    ddp = DDP.from_env(args)  # under torchrun: this process is one rank of one learner
    rank, lead = (ddp.rank, ddp.is_lead) if ddp else (0, True)  # the lead logs, saves, evaluates
    log_dir = os.path.expanduser(args.log_dir)
    eval_log_dir = log_dir + "_eval"
    if lead:
        check_run_dirs(args, log_dir)

    resumed = None
    if args.resume:
        try:
            resumed = utils.load_checkpoint(save_path(args))
        except utils.CheckpointError as e:
            fail(f"--resume: {e}")
    env_steps = resumed["env_steps"] if resumed else 0

    torch.manual_seed(args.seed + rank)  # ranks sample apart; all start from rank 0's weights
    np.random.seed(args.seed)
    torch.cuda.manual_seed_all(args.seed)
    if args.cuda and args.cuda_deterministic:
        torch.backends.cudnn.benchmark = False
        torch.backends.cudnn.deterministic = True
    device = ddp.device if ddp else torch.device("cuda:0" if args.cuda else "cpu")

    for d in (log_dir, eval_log_dir):
        os.makedirs(d, exist_ok=True)
        if not resumed and lead:
            for f in glob.glob(os.path.join(d, "*.monitor.csv")):
                os.remove(f)
    if ddp:
        ddp.barrier()  # the other ranks write monitor files once rank 0 has cleaned the dir

    try:
        # A resumed run re-seeds its envs past the seeds already used, not replaying them.
        if args.num_workers:  # Ray actors sample; they look like one vector env of N * P envs
            from a2c_ppo_acktr.workers import WorkerGroup
            envs = WorkerGroup(args, log_dir, env_steps, resumed=bool(resumed))
        else:
            envs = make_vec_envs(args.env_name, args.seed + env_steps, args.num_processes,
                                 args.gamma, log_dir, device, False, vec_env=args.vec_env,
                                 monitor_append=bool(resumed), env_kwargs=args.env_kwargs,
                                 first_rank=rank * args.num_processes)
    except (ValueError, ImportError) as e:  # unknown env id (with suggestions), bad env kwargs,
        fail(str(e))                        # no Ray, ...
    collect = envs.collect if args.num_workers else functools.partial(collect_rollout, envs)
    # Small MLPs: intra-op threads cost more in synchronisation than they gain. Convolutions
    # on image batches do gain (bench_fps case d: 197 env-steps/s on 1 thread, 277 on 2).
    torch.set_num_threads(1 if len(envs.observation_space.shape) == 1 else DEFAULT_THREADS)
    actor_critic = make_policy(args, envs, device)
    agent = make_agent(args, actor_critic)
    discr = expert_loader = None
    if args.gail:
        try:
            discr, expert_loader = make_gail(args, envs, device)
        except gail.GailError as e:
            envs.close()
            if not resumed:  # leave no monitor files of a run that never started
                for f in glob.glob(os.path.join(log_dir, "*.monitor.csv")):
                    os.remove(f)
            fail(str(e))
    if resumed:
        try:
            utils.check_checkpoint(resumed, save_path(args), args.env_name,
                                   envs.observation_space.shape, envs.action_space)
            actor_critic.load_state_dict(resumed["actor_critic"])
            agent.optimizer.load_state_dict(resumed["optimizer"])
            if discr is not None:
                if resumed.get("gail") is None:
                    raise utils.CheckpointError(f"{save_path(args)} was trained without --gail")
                discr.load_full_state_dict(resumed["gail"])
        except (utils.CheckpointError, RuntimeError, ValueError, KeyError) as e:
            envs.close()
            fail(f"--resume: {str(e).splitlines()[0]}")
        if resumed["obs_rms"] is not None:
            get_vec_normalize(envs).load_state_dict(resumed["obs_rms"])
        torch.set_rng_state(resumed["torch_rng"])
    if ddp:
        ddp.average_gradients(actor_critic)  # every backward ends with the ranks' mean gradient
        ddp.share_normalizer(envs)
        if resumed and rank:
            torch.manual_seed(args.seed + rank + env_steps)  # the saved RNG state is rank 0's

    obs = envs.reset()
    rollouts = RolloutStorage(args.num_steps, envs.num_envs, envs.observation_space.shape,
                              envs.action_space, actor_critic.recurrent_hidden_state_size,
                              obs_dtype=obs.dtype).to(device)
    rollouts.obs[0].copy_(obs)

    if lead:
        logger = ScalarLogger(log_dir, append=bool(resumed))
        eval_logger = ScalarLogger(log_dir, "eval.csv", tensorboard=False, append=bool(resumed))
    progress = ProgressLine(args.num_env_steps)
    progress.enabled = progress.enabled and lead
    episode_rewards = deque(maxlen=10)
    timeouts = [None] * envs.num_envs  # real-time envs only: late steps per env
    realtime = any(b is not None for b in envs.benchmarks())
    start, start_steps = time.time(), env_steps
    steps_per_update = args.num_steps * envs.num_envs * (ddp.world_size if ddp else 1)
    num_updates = args.num_env_steps // steps_per_update
    first_update = env_steps // steps_per_update
    envs.pause()  # real-time envs hold still until the first step: the set-up above took a while
    sampler = None
    if args.async_rollouts and not args.num_workers:  # from now on a thread steps the envs, one
        # update behind the learner (Ray workers run ahead on their own: workers.py)
        sampler = AsyncSampler(envs, actor_critic, make_policy(args, envs, device), rollouts,
                               num_updates - first_update, args.use_proper_time_limits)
    for j in range(first_update, num_updates):
        if args.use_linear_lr_decay:
            # ACKTR decays K-FAC's own lr (--lr is not used by it).
            utils.update_linear_schedule(agent.optimizer, j, num_updates,
                                         agent.optimizer.defaults["lr"] if args.algo == "acktr"
                                         else args.lr)

        if sampler is not None:  # collected while the previous update ran, by older weights
            rollouts = sampler.next_rollout(episode_rewards, timeouts)
        else:
            collect(actor_critic, rollouts, episode_rewards, args.use_proper_time_limits, timeouts)
            if ddp:
                ddp.sync_normalizer(envs)  # all ranks' statistics merged, as one normalizer's
            # Real-time envs cannot wait for the update: they hold still (default action, clock
            # stopped) until the next step instead of timing out. No-op for other envs.
            envs.pause()

        # Async: the learner's current weights bootstrap, one update newer than the rollout's
        # value_preds; PPO's clipped value loss needs those old predictions anyway.
        with torch.inference_mode():
            next_value = actor_critic.get_value(
                rollouts.obs[-1], rollouts.recurrent_hidden_states[-1], rollouts.masks[-1])

        gail_stats = {}
        if discr is not None:  # GAIL: the discriminator's reward replaces the env's
            vec_norm = get_vec_normalize(envs)
            if j >= args.gail_warmup_updates:
                vec_norm.eval()  # as the original: D's inputs keep one scale after warm-up
            epochs = args.gail_warmup_epoch if j < args.gail_warmup_updates else args.gail_epoch
            gail_stats = discr.update(expert_loader, rollouts, vec_norm.normalize_obs, epochs)
            for step in range(args.num_steps):
                rollouts.rewards[step] = discr.predict_reward(
                    rollouts.obs[step], rollouts.actions[step], args.gamma, rollouts.masks[step])

        rollouts.compute_returns(next_value, args.use_gae, args.gamma, args.gae_lambda,
                                 args.use_proper_time_limits)

        value_loss, action_loss, dist_entropy = agent.update(rollouts)
        if not all(math.isfinite(x) for x in (value_loss, action_loss, dist_entropy)):
            progress.clear()
            print(f"{os.path.basename(sys.argv[0])}: error: non-finite loss at update {j} (value "
                  f"{value_loss}, action {action_loss}, entropy {dist_entropy}); stopped, "
                  f"keeping the last saved checkpoint {save_path(args)}", file=sys.stderr)
            if sampler is not None:
                sampler.close()
            envs.close()
            if lead:
                logger.close()
                eval_logger.close()
            return 1
        if sampler is None:
            rollouts.after_update()
        else:  # the buffer goes back, with the weights for the rollout after the next one
            sampler.release(rollouts, actor_critic)

        env_steps = (j + 1) * steps_per_update
        last = j == num_updates - 1
        # Async: the sampler keeps stepping the envs; its snapshot is from this rollout's end.
        obs_rms = normalizer_state(envs) if sampler is None else sampler.obs_rms
        if lead and (j % args.save_interval == 0 or last) and args.save_dir != "":
            utils.save_checkpoint(checkpoint_state(args, actor_critic, agent, envs, env_steps,
                                                   obs_rms, discr), save_path(args))

        fps = int((env_steps - start_steps) / (time.time() - start))
        recent = float(np.mean(episode_rewards)) if episode_rewards else float("nan")
        progress.update(env_steps, fps, recent)
        if lead and (j % args.log_interval == 0 or last):
            rewards = np.array(episode_rewards) if episode_rewards else np.full(1, np.nan)
            row = {"update": j, "timesteps": env_steps, "fps": fps,
                   "mean_return": recent, "median_return": float(np.median(rewards)),
                   "min_return": float(np.min(rewards)), "max_return": float(np.max(rewards)),
                   "value_loss": value_loss, "action_loss": action_loss, "entropy": dist_entropy,
                   "approx_kl": agent.stats.get("approx_kl", float("nan")),
                   "clip_fraction": agent.stats.get("clip_fraction", float("nan")),
                   "lr": agent.optimizer.param_groups[0]["lr"], "time": time.time() - start,
                   "timeouts": sum(t for t in timeouts if t is not None), **gail_stats}
            if realtime:  # rtgym's timing statistics, seconds, mean over envs
                row.update(mean_benchmarks(envs.benchmarks() if sampler is None
                                           else sampler.benchmarks))
            # Always both columns, so that a run resumed in another mode appends to the same CSV.
            row["policy_lag"] = (sampler.policy_lag if sampler is not None
                                 else envs.policy_lag if args.num_workers else 0)
            row["sampler_stalls"] = sampler.stalls if sampler is not None else 0
            logger.log(row, env_steps)
            progress.clear()
            print(f"Updates {j}, num timesteps {env_steps}, FPS {fps} \n"
                  f" Last {len(episode_rewards)} training episodes: mean/median reward "
                  f"{row['mean_return']:.1f}/{row['median_return']:.1f}, min/max reward "
                  f"{row['min_return']:.1f}/{row['max_return']:.1f}\n"
                  f" entropy {dist_entropy:.4f}, value loss {value_loss:.4f}, "
                  f"action loss {action_loss:.4f}"
                  + (f", approx kl {row['approx_kl']:.4f}, clip fraction {row['clip_fraction']:.3f}"
                     if args.algo == "ppo" else "")
                  + (f"\n real-time time-outs {row['timeouts']}, time step "
                     f"{1e3 * row['time_step_duration_mean']:.1f}±"
                     f"{1e3 * row['time_step_duration_dev']:.1f} ms, in step "
                     f"{1e3 * row['step_time_mean']:.1f} ms, inference "
                     f"{1e3 * row['inference_time_mean']:.1f} ms" if realtime else "")
                  + (f"\n policy lag {row['policy_lag']} update(s)" if args.async_rollouts else "")
                  + (f", sampler stalls {sampler.stalls}" if sampler is not None else "")
                  + (f"\n gail loss {gail_stats['gail_loss']:.4f}, expert / policy accuracy "
                     f"{gail_stats['gail_expert_acc']:.2f} / {gail_stats['gail_policy_acc']:.2f}"
                     if gail_stats else ""), flush=True)

        due = (lead and args.eval_interval is not None and len(episode_rewards) > 1
               and j % args.eval_interval == 0)
        if args.num_workers:  # in a Ray actor, on a snapshot; logged once done
            for row in envs.evaluations(actor_critic if due else None, j, env_steps, wait=last):
                progress.clear()
                print(f" Evaluation at update {row['update']}: mean reward {row['mean_return']:.5f}")
                eval_logger.log(row, row["timesteps"])
        elif due:
            progress.clear()
            returns = evaluate(actor_critic, obs_rms, args.env_name, args.seed, args.num_processes,
                               eval_log_dir, device, env_kwargs=args.env_kwargs)
            eval_logger.log({"update": j, "timesteps": env_steps, "episodes": len(returns),
                             "mean_return": float(np.mean(returns)),
                             "std_return": float(np.std(returns))}, env_steps)

    progress.clear()
    if sampler is not None:
        sampler.close()
    envs.close()
    if lead:
        logger.close()
        eval_logger.close()
    if ddp:
        ddp.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
