"""What the entry points refuse before anything is built: flag values out of range (``NUMBERS``,
``check_numbers``; enjoy.py's and scripts/benchmark.py's flags too), empty paths, flags that
exclude each other, and ``--env-kwargs`` pairs. Each refusal is a ``ConfigError`` of one line
naming the bad value and what would be accepted; ``arguments.get_args`` prints it and exits."""
import argparse
import ast
import importlib.util
import math
import os
import sys
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple, Optional

from a2c_ppo_acktr.algo import ALGOS
from a2c_ppo_acktr.algo.gail import REWARDS as GAIL_REWARDS
from a2c_ppo_acktr.envs import VEC_ENV_KINDS
from a2c_ppo_acktr.errors import ConfigError
from a2c_ppo_acktr.run.recipes import option
from a2c_ppo_acktr.speed import bf16_missing

# ACKTR's optimizer flags: --kfac-X sets KFACOptimizer's X (run/build.py's kfac_settings).
KFAC_OPTIONS = ("kfac_lr", "kfac_kl_clip", "kfac_damping", "kfac_split_bias")


class Takes(NamedTuple):
    """The values a numeric flag takes: ``low`` to ``high`` (``low`` itself not when ``above``;
    never NaN); ``text`` says so in the refusal."""
    low: float
    high: float
    text: str
    above: bool = False

    def accepts(self, value: float) -> bool:
        return (self.low < value if self.above else self.low <= value) and value <= self.high


# Step counts and intervals are summed and stored as 64-bit integers (torch, numpy).
COUNT = Takes(1, 2**63 - 1, "a positive integer below 2**63")
COUNT_0 = Takes(0, 2**63 - 1, "0 or a positive integer below 2**63")
# numpy's global seed takes [0, 2**32); each env gets seed + its rank (ALE wraps past 2**31).
SEED = Takes(0, 2**32 - 1, "an integer from 0 to 2**32 - 1")
POSITIVE = Takes(0, sys.float_info.max, "positive and finite", above=True)
FRACTION = Takes(0, 1, "in [0, 1]")
FINITE = Takes(-sys.float_info.max, sys.float_info.max, "finite")
# main.py's numeric flags; None (unset) passes.
NUMBERS: dict[str, Takes] = {
    **dict.fromkeys(("num_processes", "num_steps", "ppo_epoch", "num_mini_batch",
                     "log_interval", "save_interval", "save_history", "num_env_steps",
                     "eval_interval", "hidden_size", "lr_decay_horizon", "gail_batch_size",
                     "gail_epoch", "gail_warmup_epoch"), COUNT),
    **dict.fromkeys(("num_workers", "gail_warmup_updates"), COUNT_0),
    "seed": SEED,
    **dict.fromkeys(("lr", "eps", "clip_param", "action_mean_gain", "desired_kl", "kfac_lr",
                     "kfac_kl_clip", "kfac_damping"), POSITIVE),
    "max_grad_norm": Takes(0, math.inf, "positive (inf: no clipping)", above=True),
    **dict.fromkeys(("entropy_coef", "value_loss_coef"),
                    Takes(0, sys.float_info.max, "0 or positive, and finite")),
    **dict.fromkeys(("gamma", "gae_lambda", "alpha"), FRACTION),
    # the initial std is e^x: e^±20 is past any action scale (float32 variances overflow at 44)
    "log_std_init": Takes(-20, 20, "in [-20, 20] (a standard deviation e^-20 to e^20)"),
}
# Paths that must name something: '' would put files in, or read them from, the working directory.
PATHS = ("log_dir", "gail_experts_dir", "ray_address", "resume")
# The numeric flags of enjoy.py and gail_experts/generate.py (run/playback.py's included).
PLAYBACK_NUMBERS = {"episodes": COUNT, "max_steps": COUNT, "seed": SEED, "train_seed": SEED}
# scripts/benchmark.py's own (main.py checks the rest of each run's flags).
BENCHMARK_NUMBERS = {"seeds": SEED, "num_env_steps": COUNT, "jobs": COUNT, "thresholds": FINITE}


def count(text: str) -> int:
    """argparse type: integers that may be written as floats, like the original's
    ``--num-env-steps 10e6``."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid number: {text!r}") from None
    if not math.isfinite(value) or value != int(value):
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}")
    return int(value)


def check_numbers(args: argparse.Namespace, takes: Mapping[str, Takes]) -> None:
    """``ConfigError`` naming the first flag of ``takes`` whose value in ``args`` it does not
    accept (a list: each of its values; a flag ``args`` lacks passes)."""
    for name, rule in takes.items():
        values = getattr(args, name, None)
        for value in values if isinstance(values, list) else [values]:
            if value is not None and not rule.accepts(value):
                shown = f"{value:g}" if isinstance(value, int) and abs(value) >= 10**16 else value
                raise ConfigError(f"{option(name)} must be {rule.text}, got {shown}")


def check_paths(args: argparse.Namespace, names: Sequence[str]) -> None:
    """``ConfigError`` naming the first flag of ``names`` given as ''."""
    for name in names:
        if getattr(args, name) == "":
            raise ConfigError(f"{option(name)} is empty: give a path"
                              + (" (bare --resume continues the run the other flags name)"
                                 if name == "resume" else ""))


def check_values(args: argparse.Namespace) -> None:
    """Each of main.py's flags on its own: numbers in range, paths not empty."""
    check_numbers(args, NUMBERS)
    check_paths(args, PATHS)


def _literal(text):
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


def check_minibatches(args: argparse.Namespace) -> Optional[str]:
    """PPO cuts each rollout into minibatches of ``units // num_mini_batch`` samples (whole envs
    when recurrent), as many as fit, the rest left out: the original's ``BatchSampler(...,
    drop_last=True)``. Refuse what gives empty minibatches; -> a warning when the cut is uneven."""
    envs = args.num_processes * max(1, args.num_workers)  # Ray workers fill one storage
    if args.recurrent_policy:
        units, what, unit = envs, f"the number of envs ({envs})", "envs"
    else:
        units, unit = envs * args.num_steps, "samples"
        what = f"--num-processes * --num-steps ({envs} * {args.num_steps} = {units})"
    if units < args.num_mini_batch:
        raise ConfigError(f"{what} must be at least --num-mini-batch ({args.num_mini_batch})"
                          + (" for recurrent PPO" if args.recurrent_policy else ""))
    if units % args.num_mini_batch:
        size = units // args.num_mini_batch
        count, dropped = units // size, units % size
        return (f"{what} is not a multiple of --num-mini-batch ({args.num_mini_batch}): each PPO "
                f"epoch takes {count} minibatches of {size} {unit}, as the original did"
                + (f", leaving {dropped} out" if dropped else ""))
    return None


def _check_ranges(args: argparse.Namespace) -> None:
    for name, known in (("algo", ALGOS), ("vec_env", VEC_ENV_KINDS),
                        ("gail_reward", GAIL_REWARDS)):
        if getattr(args, name) not in known:
            raise ConfigError(f"unknown {option(name)} {getattr(args, name)!r}; choose one of: "
                              + ", ".join(known))
    check_values(args)
    if args.num_env_steps < args.num_processes * args.num_steps:
        raise ConfigError(f"--num-env-steps ({args.num_env_steps}) is less than one rollout "
                          "(--num-processes * --num-steps = "
                          f"{args.num_processes * args.num_steps})")


def _check_combinations(args: argparse.Namespace) -> None:
    if args.algo == "acktr" and args.recurrent_policy:
        raise ConfigError("--algo acktr does not support --recurrent-policy: K-FAC here covers "
                          "Linear and Conv2d layers only, not the GRU")
    if args.desired_kl is not None:
        if args.algo != "ppo":
            raise ConfigError(f"--desired-kl adapts PPO's learning rate; --algo {args.algo} does "
                              "not use it")
        if args.use_linear_lr_decay:
            raise ConfigError("--desired-kl and --use-linear-lr-decay both set the learning "
                              "rate: drop one")
    if args.recompute_advantages:
        if args.algo != "ppo":
            raise ConfigError(f"--recompute-advantages recomputes them between PPO's epochs; "
                              f"--algo {args.algo} has no epochs")
        if args.recurrent_policy:
            raise ConfigError("--recompute-advantages needs a feed-forward policy, not "
                              "--recurrent-policy: its values depend on hidden states kept from "
                              "the old weights")
    for name in KFAC_OPTIONS:
        if getattr(args, name) is not None and args.algo != "acktr":
            raise ConfigError(f"{option(name)} sets ACKTR's K-FAC optimizer; --algo {args.algo} "
                              "does not use it")
    if args.value_norm and args.algo != "ppo":
        raise ConfigError(f"--value-norm scales PPO's value loss; --algo {args.algo} does not "
                          "use it")
    if args.lr_decay_horizon is not None and not args.use_linear_lr_decay:
        raise ConfigError("--lr-decay-horizon is the horizon of --use-linear-lr-decay, which is "
                          "off")
    if args.action_mean_gain != 1.0 and args.init == "default":
        raise ConfigError(f"--action-mean-gain {args.action_mean_gain:g} sets a gain of the "
                          "orthogonal init; it does nothing with --init default")
    for name in ("ray_address", "check_rollouts"):
        if getattr(args, name) and not args.num_workers:
            raise ConfigError(f"{option(name)} needs --num-workers N (Ray rollout workers)")
    if args.save_history is not None and args.save_dir == "":
        raise ConfigError("--save-history needs a --save-dir to keep the copies in (it is empty)")
    if args.resume and args.overwrite:
        raise ConfigError("--resume and --overwrite exclude each other: continue the run or "
                          "replace it")
    if args.gail and args.async_rollouts:
        # The discriminator would train on the sampler's normalizer while that thread updates it.
        raise ConfigError("--gail does not support --async-rollouts: drop one of them")
    if args.compile and args.algo == "acktr":
        raise ConfigError("--compile does not support --algo acktr: K-FAC records each layer's "
                          "inputs and output gradients with Python hooks, which torch.compile "
                          "cannot trace")
    for flag in ("async_rollouts", "num_workers"):
        if args.compile and getattr(args, flag):
            raise ConfigError(f"--compile compiles this process's act step; with {option(flag)} "
                              "another thread or process acts: drop one of them")
    if args.precision == "bf16" and args.num_workers:
        raise ConfigError("--precision bf16 and --num-workers: the Ray workers would act in fp32 "
                          "while the learner updates in bf16; drop one of them")


def check_ddp(args: argparse.Namespace) -> None:
    """Under torchrun (RANK and WORLD_SIZE set): what the ranks cannot run together."""
    if "RANK" not in os.environ or "WORLD_SIZE" not in os.environ:
        return
    if args.algo == "acktr":
        raise ConfigError("--algo acktr cannot run under torchrun: K-FAC's curvature "
                          "statistics would differ per rank; use a2c or ppo, or Ray workers "
                          "(--num-workers)")
    if args.value_norm:
        raise ConfigError("--value-norm cannot run under torchrun: each rank's statistics "
                          "of the returns would differ; drop it, or use Ray workers "
                          "(--num-workers)")
    if args.num_workers:
        raise ConfigError("--num-workers (Ray rollout workers) and torchrun exclude each "
                          "other: use one or the other")
    if args.async_rollouts or args.gail:
        # The sampler thread owns the normalizer the ranks merge; GAIL's discriminator would
        # be trained apart on each rank.
        flag = "--async-rollouts" if args.async_rollouts else "--gail"
        raise ConfigError(f"{flag} cannot run under torchrun; drop it, or use Ray workers "
                          "(--num-workers)")


def check_outputs(args: argparse.Namespace) -> None:
    """``ConfigError`` where ``--capture-video`` or ``--track`` cannot run, before anything is on
    disk: a package missing, videos asked of envs on Ray workers."""
    if args.capture_video and importlib.util.find_spec("moviepy") is None:
        raise ConfigError("--capture-video needs moviepy, which gymnasium's RecordVideo writes "
                          "with: pip install -e .[video]")
    if args.capture_video and args.num_workers:
        raise ConfigError("--capture-video records env 0 of this process's envs; with "
                          "--num-workers the envs are on Ray workers: record a checkpoint with "
                          "enjoy.py --record instead")
    if args.track and importlib.util.find_spec("wandb") is None:
        raise ConfigError("--track needs wandb: pip install -e .[wandb]")


def check_precision(precision: str, cuda: bool) -> None:
    """``--precision bf16`` on hardware that would emulate it (slower than fp32): refused."""
    if precision == "bf16" and (missing := bf16_missing(cuda)):
        raise ConfigError(f"--precision bf16 needs {missing}")


def check_args(args: argparse.Namespace) -> list[str]:
    """Refuse values that would otherwise fail deep inside torch or silently misbehave
    (``ConfigError``, one line); -> warnings about settings that run, but unevenly."""
    _check_ranges(args)
    _check_combinations(args)
    check_ddp(args)
    # Warnings wait until all input is checked: bad input gets its one error line only.
    return [w for w in [check_minibatches(args) if args.algo == "ppo" else None] if w]
