"""A run's configuration in parts, one per layer: frozen, typed, built once from the command line
(``run/settings.py``'s ``config_from_args``) and never changed after. Each layer takes its own
part (or plain arguments), never the whole and never the argparse ``Namespace``; what a Ray actor
needs travels as ``WorkerConfig``, small and picklable. The field names are the flags' (``--lr``:
``lr``) where a part holds a flag as it is. This module imports nothing of the package: every layer
may import it."""
import json
from dataclasses import dataclass
from typing import Any, Optional

# A dict-valued flag kept in a frozen part: its (key, value) pairs, in their order.
Pairs = tuple[tuple[str, Any], ...]


@dataclass(frozen=True)
class AlgoConfig:
    """What ``run.build.make_agent`` builds the ``--algo`` agent from."""

    algo: str
    lr: float
    eps: float
    alpha: float
    value_loss_coef: float
    entropy_coef: float
    max_grad_norm: float
    ppo_epoch: int
    num_mini_batch: int
    clip_param: float
    use_clipped_value_loss: bool
    advantage_norm: str
    desired_kl: Optional[float]
    recompute_advantages: bool
    lr_decay_horizon: Optional[int]  # None: no linear decay (--use-linear-lr-decay off)
    kfac: Pairs = ()                 # the --kfac-* flags given, as KFACOptimizer's keywords

    @property
    def kfac_settings(self) -> dict[str, Any]:
        return dict(self.kfac)


@dataclass(frozen=True)
class ReturnsConfig:
    """What ``RolloutStorage.compute_returns`` takes besides the bootstrap value."""

    use_gae: bool
    gamma: float
    gae_lambda: float
    use_proper_time_limits: bool


@dataclass(frozen=True)
class EnvConfig:
    """The training envs: what ``make_vec_envs`` (and evaluation) builds them from."""

    env_name: str
    seed: int
    num_processes: int
    vec_env: str
    env_kwargs: Pairs = ()

    @property
    def kwargs(self) -> dict[str, Any]:
        """``--env-kwargs`` as ``gym.make``'s keywords (a fresh dict)."""
        return dict(self.env_kwargs)


@dataclass(frozen=True)
class PolicyConfig:
    """The network (``model.policy_kwargs``) and how it computes (``precision``)."""

    recurrent: bool
    hidden_size: Optional[int]  # None: each base's own default
    activation: Optional[str]
    log_std_init: float = 0.0
    action_mean_gain: float = 1.0
    init: str = "orthogonal"
    value_norm: bool = False
    precision: str = "fp32"


@dataclass(frozen=True)
class SamplingConfig:
    """How rollouts are sampled: their length and where (this process, a thread, Ray workers)."""

    num_steps: int
    num_workers: int = 0
    ray_address: Optional[str] = None
    async_rollouts: bool = False
    check_rollouts: bool = False

    @property
    def in_thread(self) -> bool:
        """A sampler thread of this process steps the envs (--async-rollouts without Ray workers,
        which sample in their own processes)."""
        return self.async_rollouts and not self.num_workers


@dataclass(frozen=True)
class GailConfig:
    """GAIL's discriminator and its schedule (``--gail-*``)."""

    experts_dir: str
    batch_size: int
    epoch: int
    warmup_updates: int
    warmup_epoch: int
    reward: str


@dataclass(frozen=True)
class RunConfig:
    """A run's life around the math: which run it is (``algo``, ``env_name``, ``seed``: its
    files), how long, where its files go, the device, output and how this start treats the run."""

    algo: str
    env_name: str
    seed: int
    num_env_steps: int
    whole_steps: int  # --num-env-steps rounded down to whole updates (config.whole_updates)
    log_interval: int
    save_interval: int
    save_history: Optional[int]
    eval_interval: Optional[int]
    log_dir: str
    save_dir: str
    cuda: bool
    cuda_deterministic: bool
    compile: bool
    resume: bool | str
    overwrite: bool
    capture_video: bool
    track: bool
    wandb_project_name: str
    wandb_entity: Optional[str]


@dataclass(frozen=True)
class WorkerConfig:
    """What a Ray rollout worker or evaluator needs: its envs, the policy, rollouts' length."""

    env: EnvConfig
    policy: PolicyConfig
    sampling: SamplingConfig
    gamma: float  # the envs' return normalization
    use_proper_time_limits: bool


@dataclass(frozen=True)
class Config:
    """The whole configuration: the parts, and what the run's start says and saves."""

    algo: AlgoConfig
    returns: ReturnsConfig
    env: EnvConfig
    policy: PolicyConfig
    sampling: SamplingConfig
    gail: Optional[GailConfig]
    run: RunConfig
    notes: tuple[str, ...] = ()     # lines the run's log starts with (recipe, resumed changes)
    warnings: tuple[str, ...] = ()  # settings that run, but not as one might expect
    record_json: str = "{}"         # config.json's content (run/config.py's run_config)

    @property
    def record(self) -> dict:
        """What goes to config.json and the checkpoint's "config": a fresh copy, plain values."""
        return json.loads(self.record_json)

    @property
    def workers(self) -> WorkerConfig:
        return WorkerConfig(self.env, self.policy, self.sampling, self.returns.gamma,
                            self.returns.use_proper_time_limits)
