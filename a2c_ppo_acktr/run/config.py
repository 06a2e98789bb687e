"""A run's configuration: the flags it resolves to, kept with the run, and restored on --resume.

The flags resolve in layers, each over the one before: main.py's defaults, then a ``--recipe``,
then the flags of a ``--config`` file (as if given before the command line's; its recipe counts)
or on ``--resume`` the flags saved with the run, then the command line, wherever a flag stands
in it. A resumed run may change only the flags of ``MAY_CHANGE``; another flag given with a value
other than its saved one is refused. What a run resolved to (``run_config``: flags, library
versions, git commit) goes to ``<log dir of the run>/config.json`` at its start and into its
checkpoint (key "config"), plain values only.
"""
import argparse
import importlib.metadata
import json
import os
import platform
import subprocess
import sys
from typing import Any, Optional

from a2c_ppo_acktr.errors import CheckpointError, ConfigError
from a2c_ppo_acktr.run import checks, recipes
from a2c_ppo_acktr.run.checkpoint import load_checkpoint, run_paths
from a2c_ppo_acktr.run.config_file import CONFIG_FILE, file_flags, read_flags
from a2c_ppo_acktr.utils import save_atomic

# How this start treats the run and where its flags come from, not what the run is.
NOT_SAVED = ("resume", "overwrite", "config_file")
PATHS = ("log_dir", "save_dir", "gail_experts_dir")  # saved absolute: --resume works from anywhere
VERSIONS = ("torch", "gymnasium", "ale-py", "mujoco", "numpy")
# The flags a resumed run may change, with the rule its log gives; any other keeps its saved value.
MAY_CHANGE = {
    "num_env_steps": "the run trains on to the new total (none if it is already past it)",
    "lr_decay_horizon": "from here on the learning rate is --lr * (1 - steps / the new horizon), "
                        "a step away from the saved schedule's value",
    "log_interval": "output only", "save_interval": "output only",
    "eval_interval": "output only", "save_history": "output only",
    "no_cuda": "the device only: the weights and optimizer state load onto it",
    "cuda_deterministic": "the device only",
    "vec_env": "how the envs are stepped, not what they are",
    "compile": "how the act step and the loss run, not what they compute",
    "precision": "the network's arithmetic, not its weights (fp32 in the checkpoint)",
    "num_workers": "where the rollouts are sampled: this process or Ray workers of "
                   "--num-processes envs each",
    "ray_address": "where the Ray workers run", "check_rollouts": "a debug check only",
    "log_dir": "the run's files were moved", "save_dir": "the run's files were moved",
    "capture_video": "output only", "track": "output only",
    "wandb_project_name": "output only", "wandb_entity": "output only",
}


def _norm(dest: str, value: Any) -> Any:
    if dest in PATHS and value:
        return os.path.abspath(os.path.expanduser(value))
    if dest == "env_kwargs":
        return sorted(value)
    return value


def given_flags(parser: argparse.ArgumentParser, argv: list[str]) -> dict:
    """{destination: value} of the flags ``argv`` gives, without defaults."""
    unset = object()  # argparse sets defaults only on what the namespace does not hold yet
    namespace = argparse.Namespace(**dict.fromkeys(vars(parser.parse_args([])), unset))
    return {d: v for d, v in vars(parser.parse_args(argv, namespace)).items() if v is not unset}


def versions() -> dict:
    """Python's version and the installed versions of the libraries a run's results depend on."""
    found: dict[str, str | None] = {"python": platform.python_version()}
    for name in VERSIONS:
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            found[name] = None
    return found


def git_commit() -> dict:
    """{"commit", "dirty"} of the checkout this package runs from; None where it is not in one
    (an installed copy) or git is missing."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

    def git(*argv: str) -> str:
        return subprocess.run(["git", "-C", root, *argv], capture_output=True, text=True,
                              timeout=10, check=True).stdout.strip()
    try:
        top, commit = git("rev-parse", "--show-toplevel", "HEAD").splitlines()
        if os.path.realpath(top) != os.path.realpath(root):  # a repository around an installed copy
            return {"commit": None, "dirty": None}
        return {"commit": commit,
                "dirty": bool(git("status", "--porcelain", "--untracked-files=no"))}
    except (OSError, subprocess.SubprocessError, ValueError):
        return {"commit": None, "dirty": None}


def run_config(flags: dict, argv: list[str]) -> dict:
    """What a run is: its resolved ``flags`` (paths absolute), the command line (and directory)
    it was started or last resumed with, the library versions and the git commit; plain values."""
    return {"flags": {dest: _norm(dest, value) if dest in PATHS else value
                      for dest, value in flags.items()},
            "argv": list(argv), "cwd": os.getcwd(), "versions": versions(), "git": git_commit()}


def write_config(config: dict, log_dir: str) -> str:
    """Write ``config`` to ``<log_dir>/config.json`` atomically; -> its path."""
    path = os.path.join(log_dir, CONFIG_FILE)
    save_atomic(config, path, save=lambda obj, f: f.write(json.dumps(obj, indent=1).encode()))
    return path


def _checkpoint_config(path: Optional[str], named: bool) -> Optional[dict]:
    """The config saved in the checkpoint at ``path``; None where there is none, and start-up then
    says why (missing, unreadable), unless the command line ``named`` the file: then one line."""
    try:
        if not named and not (path and os.path.isfile(path)):
            return None
        assert path is not None  # the command line named it
        config = load_checkpoint(path).get("config")
    except CheckpointError as e:
        if named:
            raise ConfigError(f"--resume: {e}") from None
        return None
    if config is None and named:
        raise ConfigError(f"--resume: {path} was saved before runs kept their flags: resume it "
                          "with its full command and a bare --resume")
    return config


def _run_dir_config(run_dir: str) -> dict:
    """The config.json of a run's log directory (``--resume RUN_DIR``)."""
    if not os.path.isfile(os.path.join(run_dir, CONFIG_FILE)):
        raise ConfigError(f"--resume: {run_dir} holds no {CONFIG_FILE}: give a run's log "
                          "directory (<log-dir>/<algo>/<env>_seed<seed>) or its checkpoint "
                          "file")
    return {"flags": read_flags(run_dir, "--resume")}


def _check_changes(saved: dict, given: dict, source: Optional[str]) -> list[str]:
    """The log lines of the flags ``given`` that change ``saved`` ones (``MAY_CHANGE``);
    ``ConfigError`` naming the first other flag given a value other than its saved one."""
    notes = []
    for dest, value in given.items():
        old = saved[dest]
        if dest in NOT_SAVED or _norm(dest, value) == _norm(dest, old):
            continue
        flag = recipes.option(dest)
        if dest not in MAY_CHANGE:
            raise ConfigError(
                f"--resume: {flag} {value!r} differs from the run's saved {old!r} ({source}); "
                f"a resumed run may change only {', '.join(map(recipes.option, MAY_CHANGE))}")
        notes.append(f"resume: {flag} {value} (saved {old}): {MAY_CHANGE[dest]}")
    return notes


def whole_updates(args: argparse.Namespace) -> int:
    """``--num-env-steps`` rounded down to whole updates (of all envs, workers and ranks)."""
    ranks = int(os.environ.get("WORLD_SIZE", 1)) if "RANK" in os.environ else 1
    per_update = args.num_steps * args.num_processes * max(1, args.num_workers) * ranks
    return max(per_update, args.num_env_steps // per_update * per_update)


def _horizon_note(args: argparse.Namespace) -> list[str]:
    """What a resumed run's linear lr decay does past its kept horizon."""
    horizon, total = args.lr_decay_horizon, whole_updates(args)
    if not args.use_linear_lr_decay or total <= horizon:
        return []
    return [f"resume: the learning rate keeps its linear decay to 0 at {horizon:,} steps "
            f"(--lr-decay-horizon, saved); from there to {total:,} it stays 0, so those updates "
            f"leave the policy as it is (--lr-decay-horizon {total} decays it to the new total)"]


def _apply_config_file(parser, argv, args, given: dict, known: dict
                       ) -> tuple[argparse.Namespace, dict, str]:
    """``args`` with the flags of the file ``args.config_file`` under the command line's; -> (args,
    the file's flags, the log line saying where they came from)."""
    if args.resume:
        raise ConfigError("--config starts a new run from a file's flags, --resume continues a run "
                          "with its own: give one of them")
    path = args.config_file
    flags = file_flags(parser, path, NOT_SAVED)
    horizon = flags.get("lr_decay_horizon")
    if horizon is not None and horizon == whole_updates(argparse.Namespace(**{**known, **flags})):
        del flags["lr_decay_horizon"]  # the file's budget's own horizon: this run's budget sets it
    parser.set_defaults(**flags)
    args = parser.parse_args(argv)
    changed = [f"{recipes.option(d)} {given[d]} (config: {flags[d]})" for d in flags
               if d in given and _norm(d, given[d]) != _norm(d, flags[d])]
    return args, flags, (f"config: the flags of {path}"
                         + (f"; from the command line: {', '.join(changed)}" if changed else ""))


def _apply_recipe(parser, argv, args, given: dict, from_file: dict
                  ) -> tuple[argparse.Namespace, str]:
    """``args`` with recipe ``args.recipe``'s values under the flags ``given`` (on the command line
    or ``from_file``, ``--config``); -> (args, the log line saying what it set)."""
    try:
        values = recipes.settings(args.env_name, args.recipe)
    except KeyError as e:
        raise ConfigError(f"--recipe {args.recipe}: {e.args[0]}") from None
    parser.set_defaults(**values)
    parser.set_defaults(**from_file)
    args = parser.parse_args(argv)
    kept = {d: v for d, v in values.items() if d not in given}
    changed = [f"{recipes.option(d)} {given[d]} (recipe: {values[d]})" for d in values
               if d in given and given[d] != values[d]]
    return args, (f"recipe {args.recipe} for {args.env_name}: "
                  f"{' '.join(recipes.flags(kept)) or 'nothing'}"
                  + (f"; from the command line{' and --config' if from_file else ''}: "
                     f"{', '.join(changed)}" if changed else ""))


def resolve(parser: argparse.ArgumentParser, argv: Optional[list[str]]) -> argparse.Namespace:
    """``parser``'s flags for ``argv`` with the recipe and saved layers applied (see the
    module's docstring); ``ConfigError`` where they cannot be, before anything is written. Adds
    ``notes`` (the lines the run's log starts with) and ``config`` (``run_config``)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parser.parse_args(argv)
    checks.check_values(args)  # the command line's own, before it is read below
    given = given_flags(parser, argv)
    known = vars(parser.parse_args([]))  # every destination, at its default
    notes, checkpoint, saved, source, recipe_note = [], None, None, None, None
    from_file: dict = {}
    config_note = None
    if args.config_file is not None:  # as if the file's flags were given before the command line's
        args, from_file, config_note = _apply_config_file(parser, argv, args, given, known)
        given = {**from_file, **given}
    run_dir = args.resume if isinstance(args.resume, str) and os.path.isdir(args.resume) else None
    if isinstance(args.resume, str):  # --resume PATH: the flags come from what the run saved
        if run_dir:  # its config.json says where its checkpoint is
            flags = _run_dir_config(run_dir)["flags"]
            checkpoint = run_paths(argparse.Namespace(**{**known, **flags, **given})).checkpoint
            saved, source = _checkpoint_config(checkpoint, named=False), checkpoint
            if saved is None:  # no checkpoint yet (start-up says so), or an unreadable one
                saved, source = {"flags": flags}, os.path.join(run_dir, CONFIG_FILE)
        elif os.path.exists(args.resume):
            checkpoint = source = args.resume
            saved = _checkpoint_config(checkpoint, named=True)
        else:
            raise ConfigError(f"--resume: no checkpoint or run directory at {args.resume}")
    else:
        if args.recipe is not None:
            args, recipe_note = _apply_recipe(parser, argv, args, given, from_file)
        if args.resume:  # the original's style: the run's full command, plus --resume
            checkpoint = source = run_paths(args).checkpoint
            given.update(log_dir=args.log_dir, save_dir=args.save_dir)  # where it was found
            saved = _checkpoint_config(checkpoint, named=False)
            if saved is None and checkpoint and os.path.isfile(checkpoint):
                notes.append(f"resume: {checkpoint} holds no saved flags (written before runs "
                             "kept them): continuing with the flags given")
    if saved is not None:
        flags = saved["flags"]
        unknown = sorted(set(flags) - set(known))
        if unknown:
            raise ConfigError(f"--resume: {source} was saved with flags this version does not "
                              f"know ({', '.join(map(recipes.option, unknown))}); update a2c_ppo_acktr")
        notes += _check_changes({**known, **flags}, given, source)
        parser.set_defaults(**flags)
        args = parser.parse_args(argv)
        paths = run_paths(args)
        if os.path.abspath(paths.checkpoint or "") != os.path.abspath(checkpoint or "") or (
                run_dir and os.path.realpath(paths.log_dir) != os.path.realpath(run_dir)):
            raise ConfigError(f"--resume: the run's flags put its files at {paths.log_dir} and "
                              f"{paths.checkpoint}, not where --resume found them ({args.resume}"
                              f", {checkpoint}): give --log-dir and --save-dir if it was moved")
        if "lr_decay_horizon" not in given:
            notes += _horizon_note(args)
        notes.insert(0, f"resume: with the flags saved in {source}"
                     + (f" (recipe {args.recipe})" if args.recipe else ""))
    elif recipe_note:
        notes.insert(0, recipe_note)
    if config_note:
        notes.insert(0, config_note)
    if args.use_linear_lr_decay and args.lr_decay_horizon is None:
        # Fixed at the run's start and saved with it: the original's schedule, 0 right after the
        # last whole update of this budget (a GAIL CartPole run lands elsewhere with 40,000 for
        # 39,936: tests/algo/test_gail.py).
        checks.check_values(args)  # every layer's values (a recipe, a saved run), first
        args.lr_decay_horizon = whole_updates(args)
    args.notes = notes
    args.config = run_config({d: getattr(args, d) for d in known if d not in NOT_SAVED}, argv)
    return args
