"""A run's configuration: the flags it resolves to, kept with the run, and restored on --resume.

The flags resolve in layers, each over the one before: main.py's defaults, then a ``--recipe``,
then the flags of a ``--config`` file (as if given before the command line's; its recipe counts)
or on ``--resume`` the flags saved with the run, then the command line, wherever a flag stands
in it; each layer's values are checked once, as it is read. A resumed run may change only the
flags declared with a rule for it (``may_change``); another flag given with a value other than
its saved one is refused. What a run resolved to (``run_config``: flags, library
versions, git commit) goes to ``<log dir of the run>/config.json`` at its start and into its
checkpoint (key "config"), plain values only.
"""
import argparse
import importlib.metadata
import os
import platform
import subprocess
import sys
from typing import Any, Optional

from a2c_ppo_acktr.config import declarations
from a2c_ppo_acktr.errors import CheckpointError, ConfigError
from a2c_ppo_acktr.run.checkpoint import CONFIG_FILE, load_checkpoint, run_paths
from a2c_ppo_acktr.settings import checks, recipes
from a2c_ppo_acktr.settings.config_file import file_flags, read_flags

VERSIONS = ("torch", "gymnasium", "ale-py", "mujoco", "numpy")


def not_saved() -> list[str]:
    """How this start treats the run and where its flags come from, not what the run is."""
    return [spec.dest for spec in declarations() if not spec.saved]


def may_change() -> dict[str, str]:
    """The flags a resumed run may change, with the rule its log gives (their declarations');
    any other keeps its saved value."""
    return {spec.dest: spec.may_change for spec in declarations() if spec.may_change}


def _norm(dest: str, value: Any) -> Any:
    if value and any(spec.dest == dest and spec.absolute for spec in declarations()):
        return os.path.abspath(os.path.expanduser(value))  # saved absolute
    if dest == "env_kwargs":
        return sorted(value)
    return value


def defaults_of(parser: argparse.ArgumentParser) -> dict:
    """{destination: default} of ``parser``'s flags (a caller may have changed some)."""
    return {a.dest: parser.get_default(a.dest) for a in parser._actions
            if a.option_strings and a.dest != "help"}


def given_flags(parser: argparse.ArgumentParser, argv: list[str]) -> dict:
    """{destination: value} of the flags ``argv`` gives, without defaults: its one parse."""
    unset = object()  # argparse sets defaults only on what the namespace does not hold yet
    namespace = argparse.Namespace(**dict.fromkeys(defaults_of(parser), unset))
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
    return {"flags": {dest: value if dest == "env_kwargs" else _norm(dest, value)
                      for dest, value in flags.items()},
            "argv": list(argv), "cwd": os.getcwd(), "versions": versions(), "git": git_commit()}


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
    """The log lines of the flags ``given`` that change ``saved`` ones (``may_change``);
    ``ConfigError`` naming the first other flag given a value other than its saved one."""
    notes, rules, kept = [], may_change(), not_saved()
    for dest, value in given.items():
        old = saved[dest]
        if dest in kept or _norm(dest, value) == _norm(dest, old):
            continue
        flag = recipes.option(dest)
        if dest not in rules:
            raise ConfigError(
                f"--resume: {flag} {value!r} differs from the run's saved {old!r} ({source}); "
                f"a resumed run may change only {', '.join(map(recipes.option, rules))}")
        notes.append(f"resume: {flag} {value} (saved {old}): {rules[dest]}")
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


def _config_file(parser: argparse.ArgumentParser, given: dict, defaults: dict
                 ) -> tuple[dict, str]:
    """The flags of the file ``--config`` names, checked; -> (them, the log line saying where they
    came from and what the command line changed)."""
    if given.get("resume", defaults["resume"]):
        raise ConfigError("--config starts a new run from a file's flags, --resume continues a run "
                          "with its own: give one of them")
    path = given["config_file"]
    flags = file_flags(parser, path, tuple(not_saved()))
    checks.check_values(flags)
    horizon = flags.get("lr_decay_horizon")
    if horizon is not None and horizon == whole_updates(argparse.Namespace(**{**defaults, **flags})):
        del flags["lr_decay_horizon"]  # the file's budget's own horizon: this run's budget sets it
    changed = [f"{recipes.option(d)} {given[d]} (config: {flags[d]})" for d in flags
               if d in given and _norm(d, given[d]) != _norm(d, flags[d])]
    return flags, (f"config: the flags of {path}"
                   + (f"; from the command line: {', '.join(changed)}" if changed else ""))


def _recipe(values: dict, given: dict, from_file: dict) -> tuple[dict, str]:
    """Recipe ``values["recipe"]``'s values for ``values["env_name"]`` (checked), to go under the
    flags ``given`` (on the command line or ``from_file``, ``--config``); -> (them, the log line
    saying what it set)."""
    name, env = values["recipe"], values["env_name"]
    try:
        recipe = recipes.settings(env, name)
    except KeyError as e:
        raise ConfigError(f"--recipe {name}: {e.args[0]}") from None
    kept = {d: v for d, v in recipe.items() if d not in given}
    checks.check_values(kept)
    changed = [f"{recipes.option(d)} {given[d]} (recipe: {recipe[d]})" for d in recipe
               if d in given and given[d] != recipe[d]]
    rest = "nothing more: --config gives its flags" if from_file else "nothing"
    return kept, (f"recipe {name} for {env}: {' '.join(recipes.flags(kept)) or rest}"
                  + (f"; from the command line{' and --config' if from_file else ''}: "
                     f"{', '.join(changed)}" if changed else ""))


def _saved_flags(saved: dict, source: Optional[str], defaults: dict, given: dict) -> dict:
    """The flags a run saved, checked; ``ConfigError`` where this version does not know one or
    ``given`` changes one a resume may not."""
    flags = saved["flags"]
    unknown = sorted(set(flags) - set(defaults))
    if unknown:
        raise ConfigError(f"--resume: {source} was saved with flags this version does not know "
                          f"({', '.join(map(recipes.option, unknown))}); update a2c_ppo_acktr")
    checks.check_values(flags)
    return flags


def resolve(parser: argparse.ArgumentParser, argv: Optional[list[str]]) -> argparse.Namespace:
    """``parser``'s flags for ``argv`` with the recipe and saved layers applied (see the
    module's docstring), each layer's values checked as it is read; ``ConfigError`` where they
    cannot be, before anything is written. Adds ``notes`` (the lines the run's log starts with)
    and ``config`` (``run_config``)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    defaults = defaults_of(parser)
    declared = {spec.dest: spec.default for spec in declarations()}
    if changed := {d: v for d, v in defaults.items() if v != declared.get(d)}:  # a caller's
        checks.check_values(changed)
    given = given_flags(parser, argv)
    checks.check_values(given)  # the command line's own, before it is read below
    notes, checkpoint, saved, source, recipe_note, config_note = [], None, None, None, None, None
    from_file: dict = {}
    recipe: dict = {}
    flags: dict = {}
    if given.get("config_file") is not None:  # as if its flags were given before the command line's
        from_file, config_note = _config_file(parser, given, defaults)
        given = {**from_file, **given}
    resume = given.get("resume", defaults["resume"])
    run_dir = resume if isinstance(resume, str) and os.path.isdir(resume) else None
    if isinstance(resume, str):  # --resume PATH: the flags come from what the run saved
        if run_dir:  # its config.json says where its checkpoint is
            flags = _run_dir_config(run_dir)["flags"]
            checkpoint = run_paths(argparse.Namespace(**{**defaults, **flags, **given})).checkpoint
            saved, source = _checkpoint_config(checkpoint, named=False), checkpoint
            if saved is None:  # no checkpoint yet (start-up says so), or an unreadable one
                saved, source = {"flags": flags}, os.path.join(run_dir, CONFIG_FILE)
        elif os.path.exists(resume):
            checkpoint = source = resume
            saved = _checkpoint_config(checkpoint, named=True)
        else:
            raise ConfigError(f"--resume: no checkpoint or run directory at {resume}")
    else:
        if {**defaults, **given}["recipe"] is not None:
            recipe, recipe_note = _recipe({**defaults, **given}, given, from_file)
        if resume:  # the original's style: the run's full command, plus --resume
            here = argparse.Namespace(**{**defaults, **recipe, **given})
            checkpoint = source = run_paths(here).checkpoint
            given.update(log_dir=here.log_dir, save_dir=here.save_dir)  # where it was found
            saved = _checkpoint_config(checkpoint, named=False)
            if saved is None and checkpoint and os.path.isfile(checkpoint):
                notes.append(f"resume: {checkpoint} holds no saved flags (written before runs "
                             "kept them): continuing with the flags given")
    if saved is not None:
        flags = _saved_flags(saved, source, defaults, given)
        notes += _check_changes({**defaults, **flags}, given, source)
    args = argparse.Namespace(**{**defaults, **recipe, **flags, **given})
    if saved is not None:
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
        args.lr_decay_horizon = whole_updates(args)
    args.notes = notes
    kept = not_saved()
    args.config = run_config({d: getattr(args, d) for d in defaults if d not in kept}, argv)
    return args
