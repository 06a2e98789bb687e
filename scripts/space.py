"""tune.py's search space: ``--search FLAG=DIST`` specs checked against main.py's parser, and
rl-baselines3-zoo's PPO and A2C spaces in main.py's flags (used without ``--search``)."""
from __future__ import annotations

import argparse
import math

from a2c_ppo_acktr.settings.arguments import Parser, get_args
from a2c_ppo_acktr.settings.arguments import build_parser as build_main_parser
from a2c_ppo_acktr.settings.resolve import given_flags

# rl-baselines3-zoo's spaces (rl_zoo3/hyperparams_opt.py) in main.py's flags: its batch size as a
# number of minibatches, its 1 - gamma and 1 - lambda (log-uniform) as their lists of values
_COMMON = ["lr=log:1e-5:2e-3", "entropy-coef=log:1e-8:0.1", "max-grad-norm=float:0.3:2",
           "gamma=choice:0.97,0.98,0.99,0.995,0.999,0.9999",
           "gae-lambda=choice:0.9,0.95,0.98,0.99,0.999",
           "num-steps=choice:32,64,128,256,512,1024,2048", "hidden-size=choice:64,256",
           "activation=choice:tanh,relu"]
SPACES = {"ppo": _COMMON + ["clip-param=choice:0.1,0.2,0.3,0.4", "ppo-epoch=choice:1,5,10,20",
                            "num-mini-batch=choice:1,2,4,8,16,32"],
          "a2c": _COMMON}
SPACE_FLAGS = ["--use-gae"]  # with the zoo's spaces: --gae-lambda acts only with it
# main.py's flags that tune.py sets for each run: not searched, not after "--"
OWN = {"env_name": "--env-name", "algo": "--algo", "seed": "--seeds", "log_dir": "--out",
       "save_dir": "--out", "resume": "tune.py", "overwrite": "tune.py", "config_file": "tune.py"}


class Spec:
    """One ``--search FLAG=DIST``, checked against main.py's parser."""

    def __init__(self, text: str, actions: dict[str, argparse.Action]) -> None:
        flag, _, dist = text.partition("=")
        kind, _, values = dist.partition(":")
        self.text, self.flag, self.kind = text, flag, kind
        self.action = actions.get("--" + flag)
        if self.action is None or not flag or flag.startswith("-"):
            raise ValueError(f"--search {text}: {'--' + flag.lstrip('-')} is no flag of main.py "
                             "(FLAG=DIST, FLAG as main.py's flag without dashes: lr, clip-param)")
        if self.action.dest in OWN:
            raise ValueError(f"--search {text}: tune.py sets --{flag} for each run")
        self.switch = self.action.nargs == 0
        if kind == "choice":
            self.choices = [v for v in values.split(",") if v]
            if not self.choices or self.switch and not set(self.choices) <= {"true", "false"}:
                raise ValueError(f"--search {text}: expected choice:A,B,..."
                                 + (" of true and false (a switch)" if self.switch else ""))
            return
        low, _, high = values.partition(":")
        convert = int if kind == "int" else float
        try:
            self.low, self.high = convert(low), convert(high)
        except ValueError:
            self.low = self.high = math.nan
        if kind not in ("log", "float", "int") or self.switch or not self.low < self.high \
                or kind == "log" and self.low <= 0:
            raise ValueError(f"--search {text}: expected {flag}=log:LOW:HIGH (0 < LOW < HIGH), "
                             f"float:LOW:HIGH, int:LOW:HIGH or choice:A,B,...")

    def values(self) -> list[str]:
        """The values main.py must accept: the choices, or the range's ends."""
        return self.choices if self.kind == "choice" else [str(self.low), str(self.high)]

    def suggest(self, trial) -> str:
        if self.kind == "choice":
            return trial.suggest_categorical(self.flag, self.choices)
        if self.kind == "int":
            return str(trial.suggest_int(self.flag, self.low, self.high))
        return f"{trial.suggest_float(self.flag, self.low, self.high, log=self.kind == 'log'):.6g}"

    def argv(self, value: str) -> list[str]:
        if self.switch:
            return ["--" + self.flag] if value == "true" else []
        return ["--" + self.flag, value]


def specs_of(p: Parser, args: argparse.Namespace, extra: list[str]) -> tuple[list[Spec], list[str]]:
    """The searched flags and the command every run starts with; each searched value's extremes
    checked with main.py's own checks (one line and exit 2 where one fails)."""
    main_parser = build_main_parser()
    actions = {o: a for a in main_parser._actions for o in a.option_strings}
    texts = args.search or SPACES.get(args.algo)
    if texts is None:
        p.error(f"--algo {args.algo} has no default space (the zoo's PPO and A2C): give --search")
    try:
        specs = [Spec(t, actions) for t in texts]
    except ValueError as e:
        p.error(str(e))
    dests = [s.action.dest for s in specs]
    option = {a.dest: a.option_strings[0] for a in main_parser._actions if a.option_strings}
    for d in given_flags(main_parser, extra):
        if d in OWN:
            given_by = f" (with its {OWN[d]})" if OWN[d].startswith("--") else ""
            p.error(f"after --: {option[d]}: tune.py sets it for each run{given_by}")
        if d in dests:
            p.error(f"after --: {option[d]} is searched (--search); give it once")
    twice = {d for d in dests if dests.count(d) > 1}
    if twice:
        p.error(f"--search names {option[twice.pop()]} twice")
    fixed = ["--env-name", args.env_name, "--algo", args.algo] + (
        [] if args.search else SPACE_FLAGS) + extra
    get_args(fixed)
    for spec in specs:
        for value in spec.values():
            get_args(fixed + spec.argv(value))
    return specs, fixed
