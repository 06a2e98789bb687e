"""What a run is made of, built in one place (``build``), each part from those it needs: its envs,
policy, agent and reward models (GAIL's, an intrinsic reward), restored from its checkpoint on
--resume (``build_run``), the collector that samples for it (``build_collector``), its evaluations,
and on --resume the run put back where it was saved. Bad input raises a ``ConfigError`` or
``CheckpointError`` with one line, what was built closed.

What the checkpoint saves of a run is its components (``checkpoint.run_components``): each one's
``state_dict`` under its name, loaded back by ``checkpoint.restore``. A reward model is added in
``REWARD_MODELS``: the loop then calls it and the checkpoint keeps its state."""
import functools
import inspect
import os
from collections.abc import Callable
from typing import NamedTuple, Optional

import numpy as np
import torch

from a2c_ppo_acktr import algo, speed
from a2c_ppo_acktr.algo import gail
from a2c_ppo_acktr.algo.agent import RewardModel, Stateful
from a2c_ppo_acktr.config import AlgoConfig, Config, GailConfig
from a2c_ppo_acktr.envs import TorchVecEnv, get_vec_normalize, make_vec_envs
from a2c_ppo_acktr.envs.vec_env import space_shape
from a2c_ppo_acktr.errors import CheckpointError, ConfigError
from a2c_ppo_acktr.evaluation import Evaluations, InlineEvaluations, evaluate, final_evaluation
from a2c_ppo_acktr.model import Policy, policy_for
from a2c_ppo_acktr.rollout import Collector
from a2c_ppo_acktr.run.checkpoint import RunPaths, restore, run_components
from a2c_ppo_acktr.run.resume import resume_exactly
from a2c_ppo_acktr.run.tracking import video_prefix
from a2c_ppo_acktr.sampling.async_thread import AsyncCollector
from a2c_ppo_acktr.sampling.ddp import DDP, DDPCollector
from a2c_ppo_acktr.sampling.ray_learner import RayCollector, WorkerGroup

DEFAULT_THREADS = torch.get_num_threads()

# What a run samples with: make_vec_envs' envs, or the Ray workers seen as one vector env.
RunEnvs = WorkerGroup | TorchVecEnv


# --algo's agent classes (settings/checks.py refuses another name).
AGENTS: dict[str, Callable[..., algo.Agent]] = {"a2c": algo.A2C_ACKTR, "ppo": algo.PPO,
                                       "acktr": algo.A2C_ACKTR}


def agent_settings(cfg: AlgoConfig, agent: Callable[..., algo.Agent]) -> dict:
    """What ``make_agent`` passes ``agent``: each field (or property) of ``cfg`` whose name is a
    parameter of ``agent.__init__`` (or of its bases', where it passes ``**kwargs`` on), under
    that name. PPO, for one: ``clip_param=cfg.clip_param, ppo_epoch=cfg.ppo_epoch, ...``
    (tests/run/test_build.py lists each agent's)."""
    taken: set[str] = set()
    for cls in inspect.getmro(agent) if isinstance(agent, type) else ():
        if "__init__" not in vars(cls):
            continue
        parameters = inspect.signature(vars(cls)["__init__"]).parameters.values()
        taken |= {p.name for p in parameters if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
        if not any(p.kind is p.VAR_KEYWORD for p in parameters):
            break
    return {name: getattr(cfg, name) for name in sorted(taken - {"self", "actor_critic", "generator"})
            if hasattr(cfg, name)}


def make_agent(cfg: AlgoConfig, actor_critic: Policy,
               generator: Optional[torch.Generator] = None) -> algo.Agent:
    """The ``--algo`` agent on ``actor_critic``, drawing its random numbers (PPO's minibatches,
    ACKTR's sampled Fisher) from ``generator`` (None: torch's global one).

    How flags reach it: by name. ``AGENTS[cfg.algo](actor_critic, **agent_settings(cfg, agent))``
    is ``PPO(actor_critic, clip_param=cfg.clip_param, ppo_epoch=cfg.ppo_epoch, ...)``: each
    parameter of the agent's ``__init__`` that is a field of ``AlgoConfig`` gets that field. A flag
    ``kl_coef`` declared in config/algo.py reaches ``PPO.__init__(..., kl_coef=...)`` with no
    line here; a parameter with no such field keeps its default."""
    agent = AGENTS[cfg.algo]
    settings = agent_settings(cfg, agent)  # {"clip_param": 0.2, "ppo_epoch": 4, ...}
    return agent(actor_critic, **settings, generator=generator)


def learner_generator(cfg: Config, env_steps: int, device: torch.device
                      ) -> Optional[torch.Generator]:
    """The agent's own generator where a sampler thread draws actions from torch's global one
    meanwhile (their order would follow the threads' timing), seeded from the run's seed and
    where it starts; None elsewhere: the learner draws from the global generator, as it always
    has."""
    if not cfg.sampling.in_thread:
        return None
    seed = np.random.SeedSequence([cfg.run.seed, env_steps]).generate_state(1)[0]
    return torch.Generator(device).manual_seed(int(seed))


def make_gail(cfg: GailConfig, env_name: str, gamma: float, envs: RunEnvs, device: torch.device
              ) -> gail.GailReward:
    """GAIL's reward model: its discriminator, expert batches (raw states) and schedule;
    ``gail.GailError`` on bad input."""
    path = gail.expert_path(cfg.experts_dir, env_name)
    discr = gail.Discriminator(envs.observation_space, envs.action_space, reward=cfg.reward,
                               device=device)
    if not os.path.isfile(path):
        raise gail.GailError(
            f"no expert file at {path}; make one from a policy trained by main.py with "
            f"'python gail_experts/generate.py --env-name {env_name} --load-dir <save-dir>' "
            "(or convert openai/imitation data with gail_experts/convert_to_pytorch.py)")
    dataset = gail.ExpertDataset(path, num_trajectories=4, subsample_frequency=20)
    gail.check_expert_data(dataset, path, env_name, envs.observation_space, envs.action_space)
    print(f"GAIL: {len(dataset)} expert pairs from {path}, trajectory returns "
          f"{', '.join(f'{r:.1f}' for r in dataset.expert_returns)}")
    loader = torch.utils.data.DataLoader(dataset, batch_size=cfg.batch_size, shuffle=True,
                                         drop_last=len(dataset) > cfg.batch_size)
    normalizer = get_vec_normalize(envs)
    assert normalizer is not None  # vector observations (the Discriminator's check) are normalized
    return gail.GailReward(discr, loader, normalizer, gamma, cfg.warmup_updates,
                           cfg.warmup_epoch, cfg.epoch)


def gail_reward(cfg: Config, envs: RunEnvs, device: torch.device) -> Optional[gail.GailReward]:
    """``--gail``'s reward model (``make_gail``); None without ``--gail``."""
    if cfg.gail is None:
        return None
    return make_gail(cfg.gail, cfg.env.env_name, cfg.returns.gamma, envs, device)


# The run's reward and auxiliary models by name, beside AGENTS: each entry makes its model from the
# whole Config (its flags: cfg.models, config/models.py), or None where this run has none. An
# intrinsic reward is one more entry; the loop calls each model the run has on every rollout, in
# this order, between the bootstrap and the returns, logs what it returns, and the checkpoint
# keeps its state under its name.
ModelMaker = Callable[[Config, RunEnvs, torch.device], Optional[RewardModel]]
REWARD_MODELS: dict[str, ModelMaker] = {"gail": gail_reward}


def make_reward_models(cfg: Config, envs: RunEnvs, device: torch.device
                       ) -> dict[str, RewardModel]:
    """The run's reward models by name (``algo.agent.RewardModel``): those ``REWARD_MODELS``
    makes for ``cfg``."""
    made = ((name, make(cfg, envs, device)) for name, make in REWARD_MODELS.items())
    return {name: model for name, model in made if model is not None}


def build_run(cfg: Config, paths: RunPaths, device: torch.device,
              resumed: Optional[dict], rank: int) -> tuple:
    """The run's envs, policy, agent and reward models (``make_reward_models``), restored from
    ``resumed``; bad input raises ``ConfigError`` (or ``CheckpointError``), with the envs
    closed."""
    env_steps = resumed["env_steps"] if resumed else 0
    try:
        # A resumed run re-seeds its envs past the seeds already used, not replaying them.
        env = cfg.env
        videos = video_prefix(paths, env_steps) if cfg.run.capture_video else None  # of env 0
        if cfg.sampling.num_workers:  # Ray actors sample; they look like one vector env of N * P
            envs: RunEnvs = WorkerGroup(cfg.workers, paths.log_dir, paths.eval_dir, env_steps,
                                        resumed=bool(resumed))
        else:
            envs = make_vec_envs(env.env_name, env.seed + env_steps, env.num_processes,
                                 cfg.returns.gamma, paths.log_dir, device, False,
                                 vec_env=env.vec_env, monitor_append=bool(resumed),
                                 first_rank=rank * env.num_processes,
                                 video_prefix=videos,
                                 env_timeout=env.env_timeout, **env.options)
    except (ValueError, ImportError) as e:  # unknown env id (with suggestions), bad env kwargs,
        raise ConfigError(str(e)) from None  # unsupported observations, no Ray, ...
    try:
        # Small MLPs: intra-op threads cost more in synchronisation than they gain. Convolutions
        # on image batches do gain (docs/benchmarks.md, "Measured code choices").
        obs_shape = space_shape(envs.observation_space)
        torch.set_num_threads(1 if len(obs_shape) == 1 else DEFAULT_THREADS)
        actor_critic = policy_for(envs.observation_space, envs.action_space, cfg.policy, device)
        agent = make_agent(cfg.algo, actor_critic, learner_generator(cfg, env_steps, device))
        reward_models = make_reward_models(cfg, envs, device)
        if resumed:
            assert paths.checkpoint is not None  # --resume needs one (rundir.check_run)
            restore(resumed, paths.checkpoint, cfg.env.env_name, obs_shape, envs,
                    run_components(actor_critic, agent, reward_models))
        if cfg.run.compile:  # compiled on first use: in the first rollout and the first update
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
    return envs, actor_critic, agent, reward_models


def build_collector(cfg: Config, paths: RunPaths, envs: RunEnvs, actor_critic: Policy,
                    device: torch.device, ddp: Optional[DDP], num_rollouts: int) -> Collector:
    """The sampling mode, chosen once: the loop only calls the ``Collector`` interface.

    Ray workers (``--num-workers``, asynchronous or not: the workers decide), torchrun ranks,
    a sampler thread (``--async-rollouts``), or this process between updates.
    """
    common = (cfg.sampling.num_steps, cfg.returns.use_proper_time_limits, device)
    collector: Collector
    if cfg.sampling.num_workers:
        collector = RayCollector(envs, actor_critic, *common)
    elif ddp is not None:
        collector = DDPCollector(ddp, envs, actor_critic, *common)
    elif cfg.sampling.in_thread:  # the thread acts with a copy of the policy, one update old
        behaviour = policy_for(envs.observation_space, envs.action_space, cfg.policy, device)
        collector = AsyncCollector(envs, actor_critic, behaviour, *common, num_rollouts)
    else:
        collector = Collector(envs, actor_critic, *common)
    return collector


# --final-eval-episodes' evaluation at the run's end: (policy, env steps) -> final_eval.json's dict
FinalEvaluation = Callable[[Policy, int], dict]


def build_evaluations(cfg: Config, paths: RunPaths, collector: Collector, device: torch.device
                      ) -> tuple[Evaluations, Optional[FinalEvaluation]]:
    """The run's evaluations, beside ``collector``: ``--eval-interval``'s, and
    ``--final-eval-episodes``' at the run's end (None when 0), in the Ray workers' Evaluator
    actor (off the learner's path) or in this process, with the statistics of the rollout last
    collected."""
    episodes = cfg.run.final_eval_episodes
    if isinstance(collector.envs, WorkerGroup):
        workers = collector.envs
        return workers, (functools.partial(workers.final_evaluation, episodes=episodes,
                                           log_dir=paths.log_dir) if episodes else None)
    evaluate_fn = functools.partial(evaluate, env_name=cfg.env.env_name, seed=cfg.env.seed,
                                    num_processes=cfg.env.num_processes,
                                    eval_log_dir=paths.eval_dir, device=device,
                                    **cfg.env.options)
    evaluator = InlineEvaluations(evaluate_fn, lambda: collector.obs_rms)
    if not episodes:
        return evaluator, None

    def final(policy: Policy, env_steps: int) -> dict:
        return final_evaluation(policy, collector.obs_rms, env_steps, episodes, paths.log_dir,
                                cfg.env.env_name, cfg.env.seed, device, **cfg.env.options)
    return evaluator, final


class RunParts(NamedTuple):
    """A run as ``build`` makes it, for the loop (``life.Run``)."""
    collector: Collector
    actor_critic: Policy
    agent: algo.Agent
    reward_models: dict[str, RewardModel]
    components: dict[str, Stateful]  # what its checkpoints keep (``run_components``)
    updates: range                   # the updates still to run
    steps_per_update: int            # num_steps * envs of all ranks
    evaluator: Evaluations
    final_eval: Optional[FinalEvaluation]
    sped: list[str]                  # the speed seam's mechanisms applied (``speed.speed_up``)
    inexact: Optional[str]           # why a resumed run goes on approximately; None: exactly


def build(cfg: Config, paths: RunPaths, device: torch.device, resumed: Optional[dict],
          ddp: Optional[DDP]) -> RunParts:
    """The run, each part from those it needs: ``build_run``'s envs, policy, agent and reward
    models (restored from ``resumed``), the ranks made one learner (torchrun: ``ddp``), the
    collector, the speed seam, its evaluations, the run put back where ``resumed`` was saved.
    Bad input raises ``ConfigError`` (or ``CheckpointError``); on any failure what was built is
    closed."""
    rank = ddp.rank if ddp else 0
    env_steps = resumed["env_steps"] if resumed else 0
    envs, actor_critic, agent, reward_models = build_run(cfg, paths, device, resumed, rank)
    collector = None
    try:
        if ddp:
            ddp.average_gradients(actor_critic)  # every backward ends with the ranks' mean gradient
            if resumed and rank:
                torch.manual_seed(cfg.run.seed + rank + env_steps)  # the saved RNG state is rank 0's
        steps_per_update = cfg.sampling.num_steps * envs.num_envs * (ddp.world_size if ddp else 1)
        updates = range(env_steps // steps_per_update, cfg.run.num_env_steps // steps_per_update)
        collector = build_collector(cfg, paths, envs, actor_critic, device, ddp, len(updates))
        # The speed seam, once, on the learner's policy and agent (not on a sampler thread's
        # policy, which is running, nor on the Ray workers'): the same numbers, faster.
        sped = speed.speed_up(actor_critic, agent, compiled=cfg.run.compile)
        evaluator, final_eval = build_evaluations(cfg, paths, collector, device)
        inexact = resume_exactly(collector, resumed) if resumed else None
    except BaseException:
        (collector or envs).close()  # a collector closes its envs
        raise
    return RunParts(collector, actor_critic, agent, reward_models,
                    run_components(actor_critic, agent, reward_models), updates,
                    steps_per_update, evaluator, final_eval, sped, inexact)
