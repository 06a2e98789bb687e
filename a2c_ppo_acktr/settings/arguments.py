"""The command line of ``main.py``: the original's flags, names and defaults, plus new ones,
built from their declarations in the config parts (a2c_ppo_acktr/config/: ``python main.py
--help`` lists them all; ``python -m a2c_ppo_acktr.settings.flag_table`` prints a table of where each
goes and when it applies)."""
import argparse
import json
import os
from collections.abc import Mapping
from dataclasses import fields
from typing import Any, NoReturn, Optional

import torch

from a2c_ppo_acktr.config import PARTS, Config, declarations
from a2c_ppo_acktr.config.env import parse_env_kwargs
from a2c_ppo_acktr.config.flag import declared
from a2c_ppo_acktr.envs.ids import check_env_id
from a2c_ppo_acktr.errors import Error, fail
from a2c_ppo_acktr.settings import flag_table
from a2c_ppo_acktr.settings.checks import check_outputs, check_precision, check_together
from a2c_ppo_acktr.settings.resolve import resolve, whole_updates


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line (``fail``), not the usage and then the error,
    and which takes no abbreviations: ``--num-env 1024`` is an error, not ``--num-env-steps``."""

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        fail(f"{message} (see --help)", prog=self.prog)


def build_parser() -> Parser:
    """main.py's parser: one option per declared flag, in --help's order and groups."""
    p = Parser(description="A2C, PPO, ACKTR and GAIL for gymnasium environments",
               epilog=f"Each flag's config part, algorithms and rule on --resume, as a table: "
                      f"{flag_table.COMMAND}")
    groups: dict[str, Any] = {}
    for spec in declarations():
        if spec.group is not None and spec.group not in groups:
            groups[spec.group] = p.add_argument_group(spec.group)
        default = list(spec.default) if isinstance(spec.default, list) else spec.default  # a copy
        kwargs: dict[str, Any] = {"dest": spec.dest, "default": default, "help": spec.text()}
        if spec.switch:
            kwargs["action"] = "store_true"
        else:
            kwargs.update({k: v for k, v in (("type", spec.type), ("nargs", spec.nargs),
                                             ("const", spec.const)) if v is not None})
        if spec.choices is not None and spec.refuse == "parser":
            kwargs["choices"] = spec.names()
        elif spec.choices is not None:  # refused in one line of our own (or by its use)
            kwargs["metavar"] = "{" + ",".join(spec.names()) + "}"
        if spec.metavar is not None:
            kwargs["metavar"] = spec.metavar
        (groups[spec.group] if spec.group else p).add_argument(spec.option, **kwargs)
    return p


def get_args(argv: Optional[list[str]] = None,
             parser: Optional[Parser] = None) -> argparse.Namespace:
    """main.py's arguments: defaults, --recipe, the saved flags on --resume, the command line
    (settings/resolve.py), each layer's values checked as it is read, then how they go together
    and that --env-name names a registered env (``envs.ids.check_env_id``); with
    ``notes`` and ``config`` for the run's log and files, ``warnings`` and ``cuda``.
    ``parser``: ``build_parser()``'s, its defaults perhaps changed (a checkpoint's flags)."""
    try:
        args = resolve(parser or build_parser(), argv)
        args.warnings = check_together(args)
        check_outputs(args)
        args.env_kwargs = parse_env_kwargs(args.env_kwargs)
    except Error as e:
        fail(str(e))
    if args.no_cuda:
        # CPU only, in this process and its env / Ray workers. torch itself asks for CUDA on
        # every optimizer step (is a CUDA graph being captured?): with a GPU visible that
        # initializes the driver and a context. Hidden, and counted through NVML, it does neither.
        os.environ["CUDA_VISIBLE_DEVICES"] = ""
        os.environ["PYTORCH_NVML_BASED_CUDA_CHECK"] = "1"
    args.cuda = not args.no_cuda and torch.cuda.is_available()  # only now: it initializes CUDA
    try:
        check_precision(args.precision, args.cuda)
        # The id's module (``module:EnvId``) is imported only now, with CUDA hidden as asked.
        check_env_id(args.env_name)
    except Error as e:
        fail(str(e))
    return args


def config_from_args(args: argparse.Namespace) -> Config:
    """The frozen ``Config`` of ``get_args``' Namespace (its ``cuda``, ``notes``, ``warnings``
    and ``config`` included), each part built from its declared fields."""
    values = {**vars(args), "whole_steps": whole_updates(args)}
    return make_config(values, tuple(getattr(args, "notes", ())),
                       tuple(getattr(args, "warnings", ())), getattr(args, "config", {}))


def get_config(argv: Optional[list[str]] = None, parser: Optional[Parser] = None) -> Config:
    """main.py's frozen configuration: ``config_from_args(get_args(argv, parser))``."""
    return config_from_args(get_args(argv, parser))


def make_part(part: type, values: Mapping[str, Any]) -> Any:
    """``part`` from ``values`` ({flag's dest: value}, plus the values computed for its fields
    without a flag, by their names): each flag's field from its flag's value."""
    specs = {f.name: spec for f, spec in declared(part)}
    kwargs = {}
    for f in fields(part):
        spec = specs.get(f.name)
        if spec is None:  # another part's flag (algo, env_name, seed) or a computed value
            kwargs[f.name] = values[f.name]
        else:
            value = values[spec.dest]
            kwargs[f.name] = spec.to_field(value) if spec.to_field else value
    return part(**kwargs)


def make_config(values: Mapping[str, Any], notes: tuple[str, ...] = (),
                warnings: tuple[str, ...] = (), record: Optional[dict] = None) -> Config:
    """The frozen ``Config`` of resolved and checked flag values (and the computed ones)."""
    parts = {name: make_part(part, values) for name, part in PARTS.items()}
    if not values["gail"]:
        parts["gail"] = None
    return Config(**parts, notes=tuple(notes), warnings=tuple(warnings),
                  record_json=json.dumps(record or {}))
