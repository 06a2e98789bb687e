"""A flag's one declaration: ``flag(...)`` as the default of a field of a config part. From it
``settings/arguments.py`` builds the parser, ``settings/checks.py`` checks the values, ``settings/resolve.py``
takes the resume rules and ``settings/flag_table.py`` writes docs/details.md's table::

    kl_coef: float = flag(0.0, "PPO: KL penalty coefficient (default: 0)", takes=NON_NEGATIVE,
                          algos=PPO)

is ``--kl-coef`` (the field's name, its config.json key too), its type the field's (``int``:
``count``, which takes ``10e6``), listed last in --help (``at``: a place in it) and refused out of
range in one line; ``AlgoConfig``'s fields reach the agent's ``__init__`` by name.
"""
import argparse
import importlib
import itertools
import math
import re
import sys
import types
import typing
from collections.abc import Callable
from dataclasses import Field, dataclass, field, fields, replace
from typing import Any, NamedTuple, Optional


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
NON_NEGATIVE = Takes(0, sys.float_info.max, "0 or positive, and finite")
FRACTION = Takes(0, 1, "in [0, 1]")
FINITE = Takes(-sys.float_info.max, sys.float_info.max, "finite")
PPO, ACKTR, A2C_PPO = ("ppo",), ("acktr",), ("a2c", "ppo")  # the algorithms a flag applies to


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


@dataclass(frozen=True)
class Flag:
    """What one flag is, beyond its config field's name, type and default."""

    default: Any
    help: str               # --help's text; "{choices}": the choices joined by " | "
    dest: str = ""          # argparse destination and config.json key (default: the field's name)
    name: str = ""          # the option (default: --dest with "-" for "_")
    type: Optional[Callable[[str], Any]] = None  # the parser's (``declared``: from the field's type)
    takes: Optional[Takes] = None  # the numbers it takes
    choices: Any = None     # its names, or "module:NAME" of the package's list of them
    refuse: str = "check"   # who refuses another name: "check" (settings/checks.py), "parser", "use"
    metavar: Optional[str] = None
    nargs: Optional[str] = None
    const: Any = None
    group: Optional[str] = None  # its --help group
    at: float = math.inf    # its place in --help (the original's order first; new flags: last)
    algos: tuple[str, ...] = ()  # the algorithms that use it (none named: every one)
    unused: str = ""        # the refusal of a value set for another algorithm (none: allowed)
    may_change: str = ""    # a resumed run may change it: what that changes (the log's line)
    saved: bool = True      # saved with the run (config.json, the checkpoint)
    nonempty: bool = False  # '' is refused (a path that must name something)
    absolute: bool = False  # a path, saved absolute: --resume works from anywhere
    to_field: Optional[Callable[[Any], Any]] = None  # the flag's value -> the field's
    check: Optional[Callable[[dict], Optional[str]]] = None  # against the others: -> a warning
    field: str = ""         # its config part's field (filled by ``declared``)
    switch: bool = False    # a bare flag (store_true): a bool field without nargs (``declared``)
    part: str = ""          # its config part (filled by ``declarations``)
    order: int = 0          # declaration order, for flags of the same ``at``

    @property
    def option(self) -> str:
        return self.name or "--" + self.dest.replace("_", "-")

    def names(self) -> tuple[str, ...]:
        """``choices``, a reference resolved; a mapping's keys sorted (a registry's names), a
        sequence as it is."""
        choices = _resolve(self.choices) if isinstance(self.choices, str) else self.choices
        return tuple(sorted(choices) if isinstance(choices, dict) else choices)

    def text(self) -> str:
        """``help`` with "{choices}" (joined by " | ") and "{module:NAME}" (a list of the
        package's, joined by ", ") filled in."""
        def fill(match: re.Match) -> str:
            key = match.group(1)
            return " | ".join(self.names()) if key == "choices" else ", ".join(_resolve(key))
        return re.sub(r"\{(choices|[\w.]+:\w+)\}", fill, self.help)

    def applies(self, algo: str) -> bool:
        return not self.algos or algo in self.algos


_order = itertools.count()


def _resolve(reference: str) -> Any:
    """"module:NAME" -> that module's NAME, imported now (this package imports nothing of the rest
    when it is imported: the lists live with what they name)."""
    module, _, attribute = reference.partition(":")
    return getattr(importlib.import_module(module), attribute)


def flag(default: Any, help: str, **attributes: Any) -> Any:
    """The default of a config part's field that is a flag (``Flag``'s attributes)."""
    spec = Flag(default, help, order=next(_order), **attributes)
    value = spec.to_field(default) if spec.to_field else default
    return field(default=value, metadata={"flag": spec})


def declared(part: type) -> list[tuple[Field, Flag]]:
    """The fields of ``part`` that are flags, with their declarations (dest filled in)."""
    found = []
    for f in fields(part):
        if "flag" in f.metadata:
            spec = f.metadata["flag"]
            switch = spec.nargs is None and f.type in (bool, Optional[bool])
            found.append((f, replace(spec, dest=spec.dest or f.name, field=f.name, switch=switch,
                                     type=None if switch else value_type(spec, f.type))))
    return found


def value_type(spec: Flag, annotation: Any) -> Optional[Callable[[str], Any]]:
    """The parser's type of a flag: ``spec.type``, else from its field's annotation (Optional
    stripped): ``int`` a ``count``, ``float`` a float, anything else text (None)."""
    if spec.type is not None:
        return spec.type
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        annotation = args[0] if len(args) == 1 else None
    types_: dict[Any, Callable[[str], Any]] = {int: count, float: float}
    return types_.get(annotation)

