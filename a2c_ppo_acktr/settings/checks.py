"""What the entry points refuse before anything is built: flag values out of range or not among
their choices (from the flags' declarations in a2c_ppo_acktr/config/; enjoy.py's and
scripts/benchmark.py's flags too), empty paths, flags that exclude each other or that the
``--algo`` does not use, and ``--env-kwargs`` pairs. Each refusal is a ``ConfigError`` of one line
naming the bad value and what would be accepted; ``arguments.get_args`` prints it and exits."""
import argparse
import importlib.util
import os
from collections.abc import Mapping, Sequence
from typing import Any

from a2c_ppo_acktr.config import declarations
from a2c_ppo_acktr.config.env import parse_env_kwargs  # noqa: F401  (the entry points')
from a2c_ppo_acktr.config.flag import COUNT, FINITE, SEED, Takes, count  # noqa: F401  (count too)
from a2c_ppo_acktr.errors import ConfigError
from a2c_ppo_acktr.settings.recipes import option
from a2c_ppo_acktr.speed import bf16_missing

# The numeric flags of enjoy.py and gail_experts/generate.py (deploy/playback.py's included).
PLAYBACK_NUMBERS = {"episodes": COUNT, "max_steps": COUNT, "seed": SEED, "train_seed": SEED}
# scripts/benchmark.py's own (main.py checks the rest of each run's flags).
BENCHMARK_NUMBERS = {"seeds": SEED, "num_env_steps": COUNT, "jobs": COUNT, "thresholds": FINITE}


def _values(args: Any) -> Mapping[str, Any]:
    return args if isinstance(args, Mapping) else vars(args)


def numbers() -> dict[str, Takes]:
    """main.py's numeric flags and the values each takes (its declaration's)."""
    return {spec.dest: spec.takes for spec in declarations() if spec.takes is not None}


def check_numbers(args: Any, takes: Mapping[str, Takes]) -> None:
    """``ConfigError`` naming the first flag of ``takes`` whose value in ``args`` (a Namespace or
    a mapping) it does not accept (a list: each of its values; a flag ``args`` lacks passes)."""
    given = _values(args)
    for name, rule in takes.items():
        values = given.get(name)
        for value in values if isinstance(values, list) else [values]:
            if value is not None and not rule.accepts(value):
                shown = f"{value:g}" if isinstance(value, int) and abs(value) >= 10**16 else value
                raise ConfigError(f"{option(name)} must be {rule.text}, got {shown}")


def check_paths(args: Any, names: Sequence[str]) -> None:
    """``ConfigError`` naming the first flag of ``names`` given as '' in ``args``."""
    given = _values(args)
    for name in names:
        if given.get(name) == "":
            raise ConfigError(f"{option(name)} is empty: give a path"
                              + (" (bare --resume continues the run the other flags name)"
                                 if name == "resume" else ""))


def check_values(values: Mapping[str, Any]) -> None:
    """Each of main.py's flags in ``values`` ({dest: value}, some or all) on its own: a name
    among its choices, a number in range, a path not empty (as declared)."""
    specs = declarations()
    for spec in specs:
        if spec.dest in values and spec.choices is not None and spec.refuse == "check":
            if values[spec.dest] not in (known := spec.names()):
                raise ConfigError(f"unknown {spec.option} {values[spec.dest]!r}; choose one of: "
                                  + ", ".join(known))
    check_numbers(values, numbers())
    check_paths(values, [spec.dest for spec in specs if spec.nonempty])


def _check_combinations(args: argparse.Namespace) -> None:
    if args.num_env_steps < args.num_processes * args.num_steps:
        raise ConfigError(f"--num-env-steps ({args.num_env_steps}) is less than one rollout "
                          "(--num-processes * --num-steps = "
                          f"{args.num_processes * args.num_steps})")
    if args.algo == "acktr" and args.recurrent_policy:
        raise ConfigError("--algo acktr does not support --recurrent-policy: K-FAC here covers "
                          "Linear and Conv2d layers only, not the GRU")
    for spec in declarations():  # a flag set that this --algo does not use, where refused
        if spec.unused and not spec.applies(args.algo) and \
                getattr(args, spec.dest) != spec.default:
            raise ConfigError(f"{spec.option} {spec.unused.format(algo=args.algo)}"
                              + ("" if "{algo}" in spec.unused
                                 else f"; --algo {args.algo} does not use it"))
    if args.desired_kl is not None and args.use_linear_lr_decay:
        raise ConfigError("--desired-kl and --use-linear-lr-decay both set the learning rate: "
                          "drop one")
    if args.recompute_advantages and args.recurrent_policy:
        raise ConfigError("--recompute-advantages needs a feed-forward policy, not "
                          "--recurrent-policy: its values depend on hidden states kept from "
                          "the old weights")
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
    if args.gail and args.scale_actions:
        # The experts' actions are in the env's units, the policy's in [-1, 1].
        raise ConfigError("--gail does not support --scale-actions: the expert data holds "
                          "actions in the env's units; drop --scale-actions")
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


def check_together(args: argparse.Namespace) -> list[str]:
    """How the values of ``args``, each checked on its own (``check_values``), go together:
    ``ConfigError`` (one line) where they would fail deep inside torch or silently misbehave;
    -> warnings about settings that run, but unevenly."""
    _check_combinations(args)
    check_ddp(args)
    # A flag's own check against the others, where its --algo uses it (PPO's minibatches); its
    # warnings wait until all input is checked: bad input gets its one error line only.
    values = vars(args)
    found = [spec.check(values) for spec in declarations()
             if spec.check is not None and spec.applies(args.algo)]
    return [warning for warning in found + [_history_files(args)] if warning]


HISTORY_FILES = 1000  # --save-history copies past which a run is said to fill its directory


def _history_files(args: argparse.Namespace) -> str | None:
    """A warning where ``--save-history N`` keeps more than ``HISTORY_FILES`` checkpoints."""
    if not args.save_history:
        return None
    updates = args.num_env_steps // (args.num_processes * args.num_steps * max(1, args.num_workers))
    copies = updates // args.save_history
    if copies <= HISTORY_FILES:
        return None
    return (f"--save-history {args.save_history} keeps {copies:,} copies of the checkpoint (one "
            f"per {args.save_history} of {updates:,} updates), more than {HISTORY_FILES:,} files: "
            "a larger N keeps fewer")


def check_args(args: argparse.Namespace) -> list[str]:
    """``check_values`` and ``check_together`` of a Namespace of all of main.py's flags (as
    ``build_parser().parse_args`` gives); -> the warnings."""
    check_values(vars(args))
    return check_together(args)
