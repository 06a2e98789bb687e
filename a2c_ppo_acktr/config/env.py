"""The parts of what a run samples: its envs, the policy's network, and how rollouts are
sampled."""
import ast
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Optional

from a2c_ppo_acktr.config.flag import COUNT, COUNT_0, POSITIVE, PPO, SEED, Takes, flag
from a2c_ppo_acktr.errors import ConfigError

# A dict-valued flag kept in a frozen part: its (key, value) pairs, in their order.
Pairs = tuple[tuple[str, Any], ...]
LOSS, SPEED = "network and loss options", "speed options"  # --help's groups


def _literal(text: str) -> Any:
    """'0.02' -> 0.02, '200' -> 200, 'true'/'True' -> True, 'none' -> None, other text stays text."""
    lowered = {"true": True, "false": False, "none": None, "null": None}
    if text.lower() in lowered:
        return lowered[text.lower()]
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        pass
    try:
        return float(text)  # inf, nan
    except ValueError:
        return text


def parse_env_kwargs(pairs: Sequence[str]) -> dict[str, Any]:
    """``["key=value", ...]`` -> dict with values parsed by ``_literal``."""
    kwargs: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.isidentifier():
            raise ConfigError("--env-kwargs expects KEY=VALUE pairs like ep_max_length=200, "
                              f"got {pair!r}")
        if key in kwargs:
            raise ConfigError(f"--env-kwargs gives {key!r} twice")
        kwargs[key] = _literal(value)
    return kwargs


def env_pairs(value: Sequence[str] | Mapping[str, Any]) -> Pairs:
    """``--env-kwargs``, as given or parsed, as the part's pairs."""
    kwargs = value if isinstance(value, Mapping) else parse_env_kwargs(value)
    return tuple(kwargs.items())


@dataclass(frozen=True)
class EnvConfig:
    """The training envs: what ``make_vec_envs`` (and evaluation) builds them from."""

    env_name: str = flag("PongNoFrameskip-v4",
                         "gymnasium environment id (default: PongNoFrameskip-v4)", at=23)
    seed: int = flag(1, "random seed (default: 1)", type=int, takes=SEED, at=11)
    num_processes: int = flag(16, "how many training environments to run in parallel "
                              "(default: 16)", takes=COUNT, at=13)
    vec_env: str = flag(
        "auto", "vectorization: {choices} (auto: ale for Atari ids, else chosen per env from "
        "measurements; see README, backends)", choices="a2c_ppo_acktr.envs:VEC_ENV_KINDS", at=34,
        may_change="how the envs are stepped, not what they are")
    env_kwargs: Pairs = flag(
        [], "keyword arguments for gym.make, e.g. time_step_duration=0.02 ep_max_length=200 "
        "(values: numbers, True/False, None, or text); saved in the checkpoint, so evaluation and "
        "enjoy.py build the same env", nargs="+", metavar="KEY=VALUE", to_field=env_pairs, at=35)
    scale_actions: bool = flag(
        False, "Box actions: the policy acts in [-1, 1], its action clipped there and mapped "
        "linearly onto the env's bounds (Tianshou's action_scaling); saved in the checkpoint, so "
        "evaluation, enjoy.py and the exported policy map them too (default: off, the policy "
        "acts in the env's units, clipped to its bounds)", at=69)

    env_timeout: Optional[float] = flag(
        None, "stop the run in one line, keeping its last checkpoint, when a step or reset of its "
        "envs has not returned for SECONDS (a hung env; also in Ray workers); without it, one "
        "line says so after 60 s (default: none)", takes=POSITIVE, metavar="SECONDS", at=68,
        may_change="how long a hung env is waited for")

    @property
    def kwargs(self) -> dict[str, Any]:
        """``--env-kwargs`` as ``gym.make``'s keywords (a fresh dict)."""
        return dict(self.env_kwargs)

    @property
    def options(self) -> dict[str, Any]:
        """What else ``make_vec_envs`` builds every env of the run with, by its keywords; the
        checkpoint keeps them under the same names (``run.checkpoint.env_options``)."""
        return {"env_kwargs": self.kwargs, "scale_actions": self.scale_actions}


@dataclass(frozen=True)
class PolicyConfig:
    """The network (``model.policy_kwargs``) and how it computes (``precision``)."""

    recurrent: bool = flag(False, "use a recurrent (GRU) policy", dest="recurrent_policy", at=28)
    hidden_size: Optional[int] = flag(  # None: each base's own default
        None, "width of the hidden layers (default: 64 for the MLP, 512 for the CNN)",
        takes=COUNT, group=LOSS, at=47)
    activation: Optional[str] = flag(
        None, "hidden activation (default: tanh for the MLP, relu for the CNN)",
        choices="a2c_ppo_acktr.model:ACTIVATIONS", refuse="parser", group=LOSS, at=48)
    log_std_init: float = flag(
        0.0, "initial log standard deviation of Box (Gaussian) actions (default: 0)",
        # the initial std is e^x: e^±20 is past any action scale (float32 variances overflow at 44)
        takes=Takes(-20, 20, "in [-20, 20] (a standard deviation e^-20 to e^20)"), group=LOSS,
        at=49)
    layer_norm: bool = flag(
        False, "MLP: a LayerNorm after each hidden layer's linear map, before its activation "
        "(default: off)", group=LOSS, at=72)
    action_mean_gain: float = flag(
        1.0, "orthogonal-init gain of the layer giving the mean of Box (Gaussian) actions "
        "(default: 1, the original's; SB3 and CleanRL use 0.01)", takes=POSITIVE, group=LOSS,
        at=50)
    init: str = flag(
        "orthogonal", "layer initialization: orthogonal (the original's) or default (PyTorch's, "
        "as SB3's ortho_init=False) (default: orthogonal)", choices="a2c_ppo_acktr.model:INITS",
        refuse="parser", group=LOSS, at=51)
    value_norm: bool = flag(
        False, "PPO: the value head predicts in units of the returns' running standard deviation, "
        "its loss computed there (DI-engine's value_norm) (default: off)", algos=PPO,
        unused="scales PPO's value loss", group=LOSS, at=55)
    precision: str = flag(
        "fp32", "bf16: the policy's network (not its heads, losses, optimizer or checkpoints) "
        "runs in bfloat16 autocast, acting and updating; needs a CPU with AVX512-BF16 or AMX, or "
        "a GPU of compute capability 8.0+ (default: fp32)",
        choices="a2c_ppo_acktr.model:PRECISIONS", refuse="parser", group=SPEED, at=61,
        may_change="the network's arithmetic, not its weights (fp32 in the checkpoint)")


@dataclass(frozen=True)
class SamplingConfig:
    """How rollouts are sampled: their length and where (this process, a thread, Ray workers)."""

    num_steps: int = flag(5, "number of forward steps per environment per update (default: 5)",
                          takes=COUNT, at=14)
    num_workers: int = flag(
        0, "sample on this many Ray rollout workers, each with --num-processes envs (default: 0, "
        "sample in this process; needs pip install -r requirements-ray.txt)", takes=COUNT_0,
        at=44, may_change="where the rollouts are sampled: this process or Ray workers of "
                          "--num-processes envs each")
    ray_address: Optional[str] = flag(
        None, "join this Ray cluster (e.g. 10.0.0.5:6379) instead of starting a local Ray on "
        "127.0.0.1", nonempty=True, at=45, may_change="where the Ray workers run")
    async_rollouts: bool = flag(
        False, "sample the next rollout while the learner updates on the previous one (policy "
        "lag of one update; real-time envs never pause): in a background thread, or with "
        "--num-workers on the Ray workers. In a thread, runs are reproducible from --seed", at=36)
    check_rollouts: bool = flag(
        False, "debug: workers also send a checksum of each rollout as they saw it and the "
        "learner checks the one it rebuilt against it", at=46, may_change="a debug check only")

    @property
    def in_thread(self) -> bool:
        """A sampler thread of this process steps the envs (--async-rollouts without Ray workers,
        which sample in their own processes)."""
        return self.async_rollouts and not self.num_workers
