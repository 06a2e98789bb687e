"""What ``main.py`` refuses before anything is built: flag values out of range, flags that exclude
each other, and ``--env-kwargs`` pairs. Each refusal is a ``ConfigError`` of one line naming the
bad value and what would be accepted; ``arguments.get_args`` prints it and exits."""
import argparse
import ast
from collections.abc import Sequence
from typing import Any, Optional

from a2c_ppo_acktr.algo import ALGOS
from a2c_ppo_acktr.algo.gail import REWARDS as GAIL_REWARDS
from a2c_ppo_acktr.envs import VEC_ENV_KINDS
from a2c_ppo_acktr.errors import ConfigError
from a2c_ppo_acktr.run.recipes import option

# ACKTR's optimizer flags: --kfac-X sets KFACOptimizer's X (run/build.py's kfac_settings).
KFAC_OPTIONS = ("kfac_lr", "kfac_kl_clip", "kfac_damping", "kfac_split_bias")


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
    for name in ("num_processes", "num_steps", "ppo_epoch", "num_mini_batch", "log_interval",
                 "save_interval", "save_history", "num_env_steps", "eval_interval",
                 "hidden_size", "lr_decay_horizon", "gail_batch_size", "gail_epoch",
                 "gail_warmup_epoch"):
        value = getattr(args, name)
        if value is not None and value <= 0:
            raise ConfigError(f"{option(name)} must be a positive integer, got {value}")
    for name in ("num_workers", "gail_warmup_updates"):
        if getattr(args, name) < 0:
            raise ConfigError(f"{option(name)} must be 0 or a positive integer, "
                              f"got {getattr(args, name)}")
    for name in ("lr", "eps", "max_grad_norm", "clip_param", "action_mean_gain", "desired_kl",
                 *KFAC_OPTIONS):
        value = getattr(args, name)
        if value is not None and not value > 0:
            raise ConfigError(f"{option(name)} must be positive, got {value}")
    for name in ("gamma", "gae_lambda", "alpha"):
        value = getattr(args, name)
        if not 0 <= value <= 1:
            raise ConfigError(f"{option(name)} must be in [0, 1], got {value}")
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


def check_args(args: argparse.Namespace) -> list[str]:
    """Refuse values that would otherwise fail deep inside torch or silently misbehave
    (``ConfigError``, one line); -> warnings about settings that run, but unevenly."""
    _check_ranges(args)
    _check_combinations(args)
    # Warnings wait until all input is checked: bad input gets its one error line only.
    return [w for w in [check_minibatches(args) if args.algo == "ppo" else None] if w]
