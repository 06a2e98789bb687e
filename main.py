"""Train an on-policy agent: ``python main.py --algo ppo --env-name CartPole-v1 ...``.

The loop is the algorithm box of the papers: collect ``num_steps`` transitions from
``num_processes`` envs, bootstrap from the last observation, compute returns (GAE or n-step),
update the agent, then log / save / evaluate.
"""
import functools
import math
import sys
import time
from collections import deque

import numpy as np
import torch

from a2c_ppo_acktr import utils
from a2c_ppo_acktr.arguments import fail, get_args, program, warn
from a2c_ppo_acktr.build import build_run, make_policy
from a2c_ppo_acktr.checkpoint import (
    CheckpointError,
    checkpoint_state,
    load_checkpoint,
    run_paths,
    save_checkpoint,
)
from a2c_ppo_acktr.distributed import DDP
from a2c_ppo_acktr.envs import get_vec_normalize, normalizer_state
from a2c_ppo_acktr.envs.single import check_env_id
from a2c_ppo_acktr.evaluation import evaluate
from a2c_ppo_acktr.interrupt import StopRequest
from a2c_ppo_acktr.logger import ProgressLine, ScalarLogger
from a2c_ppo_acktr.realtime import mean_benchmarks
from a2c_ppo_acktr.rollout import collect_rollout
from a2c_ppo_acktr.rundir import abandon, check_run, make_run_dirs
from a2c_ppo_acktr.sampler import AsyncSampler
from a2c_ppo_acktr.storage import RolloutStorage

RETURN_COLUMNS = ("mean_return", "median_return", "min_return", "max_return")


def main(argv=None) -> int:
    args = get_args(argv)
    with StopRequest() as stop:  # Ctrl-C / SIGTERM: finish the update, save, exit 130 / 143
        return train(args, stop)


def train(args, stop: StopRequest) -> int:
    """The run ``args`` describes; -> its exit status (0, 1 on a failure mid-run, 128 + signal)."""
    ddp = DDP.from_env(args)  # under torchrun: this process is one rank of one learner
    rank, lead = (ddp.rank, ddp.is_lead) if ddp else (0, True)  # the lead logs, saves, evaluates
    paths = run_paths(args)
    if lead:
        check_run(args, paths)
    try:
        check_env_id(args.env_name)
    except ValueError as e:
        fail(str(e))
    resumed = None
    if args.resume:
        try:
            resumed = load_checkpoint(paths.checkpoint)
        except CheckpointError as e:
            fail(f"--resume: {e}")
    env_steps = resumed["env_steps"] if resumed else 0

    # Seeds the CUDA generators too, lazily: a CPU run never initializes CUDA.
    torch.manual_seed(args.seed + rank)  # ranks sample apart; all start from rank 0's weights
    np.random.seed(args.seed)
    if args.cuda and args.cuda_deterministic:
        torch.backends.cudnn.benchmark = False
        torch.backends.cudnn.deterministic = True
    device = ddp.device if ddp else torch.device("cuda:0" if args.cuda else "cpu")

    # Inputs are valid: from here on this run's directories exist, until it fails to start.
    created = make_run_dirs(args, paths, bool(resumed)) if lead else []
    if ddp:
        ddp.barrier()  # the other ranks write monitor files once rank 0 has cleaned the dir
    try:
        envs, actor_critic, agent, discr, expert_loader = build_run(args, paths, device, resumed,
                                                                    rank)
        if ddp:
            ddp.average_gradients(actor_critic)  # every backward ends with the ranks' mean gradient
            ddp.share_normalizer(envs)
            if resumed and rank:
                torch.manual_seed(args.seed + rank + env_steps)  # the saved RNG state is rank 0's
        obs = envs.reset()
    except BaseException:
        if lead:
            abandon(paths, created, bool(resumed))
        raise
    if lead:  # the run has started: what it should know, then where its files go
        for warning in args.warnings:
            warn(warning)
        print(f"run files: logs {paths.log_dir}/, checkpoint "
              f"{paths.checkpoint or 'none (--save-dir is empty)'}", flush=True)
    collect = envs.collect if args.num_workers else functools.partial(collect_rollout, envs)
    rollouts = RolloutStorage(args.num_steps, envs.num_envs, envs.observation_space.shape,
                              envs.action_space, actor_critic.recurrent_hidden_state_size,
                              obs_dtype=obs.dtype).to(device)
    rollouts.obs[0].copy_(obs)

    steps_per_update = args.num_steps * envs.num_envs * (ddp.world_size if ddp else 1)
    num_updates = args.num_env_steps // steps_per_update
    first_update = env_steps // steps_per_update
    total = num_updates * steps_per_update
    if lead:
        print(f"training {total:,} steps: {num_updates:,} updates of {steps_per_update:,}"
              + (f" (--num-env-steps {args.num_env_steps:,} rounded down to whole updates)"
                 if total != args.num_env_steps else "")
              + (f", resumed after {env_steps:,}" if resumed else ""), flush=True)
        logger = ScalarLogger(paths.log_dir, append=bool(resumed))
        eval_logger = (ScalarLogger(paths.eval_dir, "eval.csv", tensorboard=False,
                                    append=bool(resumed))
                       if args.eval_interval is not None else None)
    progress = ProgressLine(total)
    progress.enabled = progress.enabled and lead
    episode_rewards = deque(maxlen=10)
    timeouts = [None] * envs.num_envs  # real-time envs only: late steps per env
    realtime = any(b is not None for b in envs.benchmarks())
    start, start_steps, saved_steps = time.time(), env_steps, env_steps
    envs.pause()  # real-time envs hold still until the first step: the set-up above took a while
    sampler = None
    if args.async_rollouts and not args.num_workers:  # from now on a thread steps the envs, one
        # update behind the learner (Ray workers run ahead on their own: workers.py)
        sampler = AsyncSampler(envs, actor_critic, make_policy(args, envs, device), rollouts,
                               num_updates - first_update, args.use_proper_time_limits)

    def finish(status, message=None, stream=sys.stderr):
        """Stop the sampler, close envs and logs, print ``message`` (one line); -> ``status``."""
        progress.clear()
        if message and lead:
            print(message, file=stream, flush=True)
        if sampler is not None:
            sampler.close()
        envs.close()
        if lead:
            logger.close()
            if eval_logger is not None:
                eval_logger.close()
        if ddp:
            ddp.close()
        return status

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
            return finish(1, f"{program()}: error: non-finite loss at update {j} (value "
                          f"{value_loss}, action {action_loss}, entropy {dist_entropy}); stopped, "
                          f"keeping the last saved checkpoint {paths.checkpoint}")
        if sampler is None:
            rollouts.after_update()
        else:  # the buffer goes back, with the weights for the rollout after the next one
            sampler.release(rollouts, actor_critic)

        env_steps = (j + 1) * steps_per_update
        last = j == num_updates - 1
        # Async: the sampler keeps stepping the envs; its snapshot is from this rollout's end.
        obs_rms = normalizer_state(envs) if sampler is None else sampler.obs_rms
        stopping = stop.requested if ddp is None else ddp.any(stop.requested)
        if lead and (j % args.save_interval == 0 or last or stopping) and paths.checkpoint:
            try:
                save_checkpoint(checkpoint_state(args, actor_critic, agent, envs, env_steps,
                                                 obs_rms, discr), paths.checkpoint)
                saved_steps = env_steps
            except CheckpointError as e:
                # Stop rather than train on: what cannot be saved is lost however long the run
                # goes on. The atomic write kept the previous checkpoint, which --resume continues.
                return finish(1, f"{program()}: error: {e}; stopped at {env_steps:,} steps, "
                              f"keeping the previous checkpoint ({saved_steps:,} steps)")
        if stopping:
            return finish(stop.exit_status, f"interrupted at {env_steps:,} steps; " + (
                f"saved {paths.checkpoint}; --resume to continue" if paths.checkpoint
                else "nothing saved (--save-dir is empty)"))

        fps = int((env_steps - start_steps) / (time.time() - start))
        recent = float(np.mean(episode_rewards)) if episode_rewards else float("nan")
        progress.update(env_steps, fps, recent)
        if lead and (j % args.log_interval == 0 or last):
            # No episode ended yet (e.g. just after --resume): empty cells rather than NaN.
            rewards = np.array(episode_rewards)
            returns = {"mean_return": recent, "median_return": float(np.median(rewards)),
                       "min_return": float(np.min(rewards)), "max_return": float(np.max(rewards))
                       } if episode_rewards else dict.fromkeys(RETURN_COLUMNS, "")
            row = {"update": j, "timesteps": env_steps, "fps": fps, **returns,
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
                  + (f" Last {len(episode_rewards)} training episodes: mean/median reward "
                     f"{row['mean_return']:.1f}/{row['median_return']:.1f}, min/max reward "
                     f"{row['min_return']:.1f}/{row['max_return']:.1f}\n" if episode_rewards
                     else " No training episode has ended yet\n")
                  + f" entropy {dist_entropy:.4f}, value loss {value_loss:.4f}, "
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
                               paths.eval_dir, device, env_kwargs=args.env_kwargs)
            eval_logger.log({"update": j, "timesteps": env_steps, "episodes": len(returns),
                             "mean_return": float(np.mean(returns)),
                             "std_return": float(np.std(returns))}, env_steps)

    return finish(0, f"done: {env_steps:,} steps; checkpoint {paths.checkpoint} "
                     f"({saved_steps:,} steps)" if paths.checkpoint else None, sys.stdout)


if __name__ == "__main__":
    sys.exit(main())
