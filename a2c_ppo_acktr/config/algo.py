"""The algorithm's parts: what ``run.build.make_agent`` builds the ``--algo`` agent from, and
what ``RolloutStorage.compute_returns`` takes."""
import operator
from dataclasses import dataclass
from typing import Any, Optional

from a2c_ppo_acktr.config.flag import (
    A2C_PPO,
    ACKTR,
    COUNT,
    FRACTION,
    NON_NEGATIVE,
    POSITIVE,
    PPO,
    Takes,
    flag,
)
from a2c_ppo_acktr.errors import ConfigError

LOSS, KFAC = "network and loss options", "ACKTR (K-FAC) options"  # --help's groups


def minibatches(values: dict) -> Optional[str]:
    """PPO cuts each rollout into minibatches of ``units // num_mini_batch`` samples (whole envs
    when recurrent), as many as fit, the rest left out: the original's ``BatchSampler(...,
    drop_last=True)``. Refuse what gives empty minibatches; -> a warning when the cut is uneven."""
    v, n = values, values["num_mini_batch"]
    envs = v["num_processes"] * max(1, v["num_workers"])  # Ray workers fill one storage
    if v["recurrent_policy"]:
        units, what, unit = envs, f"the number of envs ({envs})", "envs"
    else:
        units, unit = envs * v["num_steps"], "samples"
        what = f"--num-processes * --num-steps ({envs} * {v['num_steps']} = {units})"
    if units < n:
        raise ConfigError(f"{what} must be at least --num-mini-batch ({n})"
                          + (" for recurrent PPO" if v["recurrent_policy"] else ""))
    if units % n:
        size = units // n
        count, dropped = units // size, units % size
        return (f"{what} is not a multiple of --num-mini-batch ({n}): each PPO epoch takes "
                f"{count} minibatches of {size} {unit}, as the original did"
                + (f", leaving {dropped} out" if dropped else ""))
    return None


@dataclass(frozen=True)
class AlgoConfig:
    """What ``run.build.make_agent`` builds the ``--algo`` agent from: each field (or property)
    named as a parameter of the agent's ``__init__`` is passed to it by that name."""

    algo: str = flag(
        "a2c", "algorithm: {choices} (acktr uses K-FAC's own lr 0.25, momentum 0.9, kl-clip 0.001 "
        "(the --kfac-* options) and ignores --lr, --eps, --alpha, --max-grad-norm)",
        choices="a2c_ppo_acktr.algo:ALGOS", at=1)
    lr: float = flag(7e-4, "learning rate (default: 7e-4)", takes=POSITIVE, algos=A2C_PPO, at=2)
    eps: float = flag(1e-5, "RMSprop / Adam optimizer epsilon (default: 1e-5)", takes=POSITIVE,
                      algos=A2C_PPO, at=3)
    alpha: float = flag(0.99, "RMSprop optimizer alpha (default: 0.99)", takes=FRACTION,
                        algos=("a2c",), at=4)
    entropy_coef: float = flag(0.01, "entropy term coefficient (default: 0.01)",
                               takes=NON_NEGATIVE, at=8)
    value_loss_coef: float = flag(0.5, "value loss coefficient (default: 0.5)",
                                  takes=NON_NEGATIVE, at=9)
    max_grad_norm: float = flag(0.5, "max norm of the gradients (default: 0.5)",
                                takes=Takes(0, float("inf"), "positive (inf: no clipping)",
                                            above=True), algos=A2C_PPO, at=10)
    ppo_epoch: int = flag(4, "number of PPO epochs (default: 4)", takes=COUNT, algos=PPO, at=15)
    num_mini_batch: int = flag(32, "number of PPO minibatches (default: 32)", takes=COUNT,
                               algos=PPO, check=minibatches, at=16)
    clip_param: float = flag(0.2, "PPO clip parameter (default: 0.2)", takes=POSITIVE, algos=PPO,
                             at=17)
    use_linear_lr_decay: bool = flag(
        False, "decay the learning rate linearly to 0 at --lr-decay-horizon", at=29)
    # None unless --use-linear-lr-decay (settings/checks.py); resolved to the budget's when not given
    lr_decay_horizon: Optional[int] = flag(
        None, "env steps at which --use-linear-lr-decay reaches 0 (default: the run's "
        "--num-env-steps when it started; kept when a resumed run is extended)", takes=COUNT,
        metavar="STEPS", at=30,
        may_change="from here on the learning rate is --lr * (1 - steps / the new horizon), a "
                   "step away from the saved schedule's value")
    advantage_norm: str = flag(
        "batch", "PPO: standardize advantages over the whole rollout (the original's), over each "
        "minibatch (SB3, CleanRL) or not at all (default: batch)",
        choices="a2c_ppo_acktr.algo.ppo:ADVANTAGE_NORMS", refuse="parser", algos=PPO, group=LOSS,
        at=52)
    desired_kl: Optional[float] = flag(
        None, "PPO: adapt the learning rate after each epoch to keep the approximate KL near KL "
        "(x1.5 below KL/2, /1.5 above 2 KL; rl_games' adaptive schedule), starting from --lr "
        "(default: none, --lr as given or decayed)", takes=POSITIVE, metavar="KL", algos=PPO,
        unused="adapts PPO's learning rate", group=LOSS, at=53)
    recompute_advantages: bool = flag(
        False, "PPO: before each epoch after the first, compute the values, returns and "
        "advantages again with the current network (DI-engine's and Tianshou's recompute_adv); "
        "feed-forward policies only (default: once per update)", algos=PPO,
        unused="recomputes them between PPO's epochs; --algo {algo} has no epochs", group=LOSS,
        at=54)
    rpo_alpha: float = flag(
        0.0, "PPO: Robust Policy Optimization (Rahman & Xue 2022, CleanRL's ppo_rpo): in the "
        "update, the Gaussian's mean is shifted by noise drawn uniformly from [-A, A] before the "
        "log-probabilities of the taken actions are computed (default: 0, off)",
        takes=NON_NEGATIVE, metavar="A", algos=PPO, unused="perturbs PPO's update", group=LOSS,
        at=71)
    use_clipped_value_loss: bool = flag(
        False, "PPO: plain squared value error instead of the original's value loss clipped by "
        "--clip-param (SB3's default)", dest="no_clipped_value_loss", to_field=operator.not_,
        algos=PPO, group=LOSS, at=56)
    # ACKTR's optimizer (algo/kfac.py): --kfac-X sets KFACOptimizer's X; the defaults are its own.
    kfac_lr: Optional[float] = flag(
        None, "ACKTR: K-FAC's learning rate; --use-linear-lr-decay decays it (default: 0.25; --lr "
        "is A2C's and PPO's)", takes=POSITIVE, algos=ACKTR, unused="sets ACKTR's K-FAC optimizer",
        group=KFAC, at=57)
    kfac_kl_clip: Optional[float] = flag(
        None, "ACKTR: the trust region: a step whose predicted KL, lr^2 * the natural gradient . "
        "the gradient, exceeds KL is scaled down to it (default: 0.001)", takes=POSITIVE,
        metavar="KL", algos=ACKTR, unused="sets ACKTR's K-FAC optimizer", group=KFAC, at=58)
    kfac_damping: Optional[float] = flag(
        None, "ACKTR: added to the Fisher factors' eigenvalue products before they are inverted "
        "(default: 0.01)", takes=POSITIVE, algos=ACKTR, unused="sets ACKTR's K-FAC optimizer",
        group=KFAC, at=59)
    kfac_split_bias: Optional[bool] = flag(
        None, "ACKTR: each layer's bias in a Fisher block of its own, as the original's K-FAC "
        "(default: one more input of its layer's block, as OpenAI baselines')", algos=ACKTR,
        unused="sets ACKTR's K-FAC optimizer", group=KFAC, at=60)

    @property
    def acktr(self) -> bool:
        return self.algo == "acktr"

    @property
    def kfac(self) -> dict[str, Any]:
        """The --kfac-* flags given, as ``KFACOptimizer``'s keywords (the others: its defaults)."""
        given = {"lr": self.kfac_lr, "kl_clip": self.kfac_kl_clip, "damping": self.kfac_damping,
                 "split_bias": self.kfac_split_bias}
        return {name: value for name, value in given.items() if value is not None}


@dataclass(frozen=True)
class ReturnsConfig:
    """What ``RolloutStorage.compute_returns`` takes besides the bootstrap value."""

    use_gae: bool = flag(False, "use generalized advantage estimation", at=6)
    gamma: float = flag(0.99, "discount factor (default: 0.99)", takes=FRACTION, at=5)
    gae_lambda: float = flag(0.95, "GAE lambda (default: 0.95)", takes=FRACTION, at=7)
    use_proper_time_limits: bool = flag(
        False, "bootstrap episodes cut by a time limit from their final observation", at=27)
