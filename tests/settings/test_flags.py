"""A flag is declared once (issue #71): the field of its config part (a2c_ppo_acktr/config/) gives
the parser, the checks, the part, the resume rules and the flag table (printed when asked for); a
new PPO option is its declaration and its use, nothing else; argv is parsed once."""
import argparse
import dataclasses
import inspect
import json
import re

import pytest
from gymnasium import spaces

from a2c_ppo_acktr import config
from a2c_ppo_acktr.algo import PPO
from a2c_ppo_acktr.config import AlgoConfig, declarations
from a2c_ppo_acktr.config.flag import NON_NEGATIVE, flag
from a2c_ppo_acktr.config.flag import PPO as FOR_PPO
from a2c_ppo_acktr.model import Policy
from a2c_ppo_acktr.run import build
from a2c_ppo_acktr.settings import arguments, checks, flag_table
from a2c_ppo_acktr.settings.arguments import build_parser, get_args, get_config
from a2c_ppo_acktr.settings.resolve import may_change, not_saved

pytestmark = pytest.mark.research  # the research tier: what a change to the core needs


def test_the_flag_table_is_made_from_the_declarations_when_asked_for(capsys):
    """No committed copy to keep in step: the command prints it, and --help names the command."""
    lines = flag_table.table().splitlines()
    specs = declarations()
    assert len(lines) == 2 + len(specs)  # the head, then one row per flag, in --help's order
    for line, spec in zip(lines[2:], specs):
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]]
        assert len(cells) == 6 and cells[0].startswith(f"`{spec.option}")
        assert cells[2] == f"`{spec.part}`" and spec.text().replace("|", "\\|") == cells[5]
    assert "| `--algo {a2c,ppo,acktr}` | `\"a2c\"` | `algo` | all | kept |" in lines[2]
    assert flag_table.main([]) == 0 and capsys.readouterr().out == flag_table.table()
    assert flag_table.main(["docs/details.md"]) == 2  # it prints; it writes no file
    assert "takes no arguments" in capsys.readouterr().err
    assert flag_table.COMMAND in " ".join(build_parser().format_help().split())


def test_every_option_of_the_parser_is_one_declaration():
    specs = declarations()
    options = [o for a in build_parser()._actions for o in a.option_strings if o != "-h"]
    assert options == ["--help"] + [s.option for s in specs]
    assert len({s.dest for s in specs}) == len(specs)  # one destination (config.json key) each
    for spec in specs:  # the part's field holds the flag's value (its default, when not given)
        part = config.PARTS[spec.part]
        default = {f.name: f.default for f in dataclasses.fields(part)}[spec.field]
        assert default == (spec.to_field(spec.default) if spec.to_field else spec.default)
    assert not_saved() == ["resume", "overwrite", "config_file"]
    assert set(may_change()) < {s.dest for s in specs}


def test_the_declared_defaults_pass_the_checks():
    checks.check_values({s.dest: s.default for s in declarations()})
    assert arguments.make_config({**vars(build_parser().parse_args([])), "whole_steps": 80,
                               "cuda": False}).algo == AlgoConfig()


# AlgoConfig's flags that reach the agents otherwise than as a parameter of their own name.
THROUGH = {"algo": "picks the class (build.AGENTS) and acktr", "use_linear_lr_decay": "lr_decay_horizon",
           "kfac_lr": "kfac", "kfac_kl_clip": "kfac", "kfac_damping": "kfac", "kfac_split_bias": "kfac"}


@pytest.mark.parametrize("algo", ["a2c", "ppo", "acktr"])
def test_every_algo_flag_reaches_its_agent_by_name(algo):
    """build.make_agent names no setting: each parameter of an agent's __init__ is a field or
    property of AlgoConfig, and each AlgoConfig flag its --algo uses is a parameter of its agent.
    A new PPO option is then its field in AlgoConfig and its parameter (and use) in algo/ppo.py."""
    agent = build.AGENTS[algo]
    parameters = {n for n in inspect.signature(agent).parameters if n not in ("actor_critic", "generator")}
    assert all(hasattr(AlgoConfig, name) for name in parameters), parameters
    for _, spec in config.flag.declared(AlgoConfig):
        if spec.applies(algo):
            assert spec.field in parameters or spec.field in THROUGH, spec.field
    made = build.make_agent(AlgoConfig(algo=algo), Policy((3,), spaces.Discrete(2)))
    assert type(made) is agent


@dataclasses.dataclass(frozen=True)
class ToyAlgoConfig(AlgoConfig):
    """AlgoConfig with one more PPO option, as a researcher would add it to config/algo.py."""

    toy_coef: float = flag(0.5, "PPO: a toy loss term's coefficient (default: 0.5)",
                           takes=NON_NEGATIVE, algos=FOR_PPO)


class ToyPPO(PPO):
    """PPO taking the option, as a researcher would add it to algo/ppo.py's __init__."""

    def __init__(self, *args, toy_coef: float = 0.0, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.toy_coef = toy_coef


def test_a_new_ppo_option_is_its_declaration_and_its_use(monkeypatch, capsys, tmp_path):
    monkeypatch.setitem(config.PARTS, "algo", ToyAlgoConfig)
    monkeypatch.setitem(build.AGENTS, "ppo", ToyPPO)
    argv = ["--algo", "ppo", "--env-name", "CartPole-v1", "--num-mini-batch", "4"]
    assert "--toy-coef TOY_COEF" in build_parser().format_help()  # parsed, with its help
    cfg = get_config(argv + ["--toy-coef", "0.3"])
    assert isinstance(cfg.algo, ToyAlgoConfig) and cfg.algo.toy_coef == 0.3  # in its part
    assert cfg.record["flags"]["toy_coef"] == 0.3  # saved with the run (config.json)
    agent = build.make_agent(cfg.algo, Policy((3,), spaces.Discrete(2)))
    assert agent.toy_coef == 0.3 and agent.num_mini_batch == 4  # reaches the agent by name
    assert get_config(argv).algo.toy_coef == 0.5  # its default
    with pytest.raises(SystemExit) as e:  # range-checked in one line
        get_args(argv + ["--toy-coef", "-1"])
    assert e.value.code == 2
    assert capsys.readouterr().err.strip().endswith(
        "error: --toy-coef must be 0 or positive, and finite, got -1.0")
    assert "| `--toy-coef TOY_COEF` | `0.5` | `algo` | ppo | kept |" in flag_table.table()  # in the docs
    path = tmp_path / "flags.json"  # a --config file takes it as it takes the others
    path.write_text(json.dumps({"toy-coef": 0.1, **dict(zip(argv[::2], argv[1::2]))}))
    assert get_config(["--config", str(path)]).algo.toy_coef == 0.1


def test_argv_is_parsed_once_and_the_checks_run_once(monkeypatch, tmp_path):
    calls = {"parse": 0, "values": 0, "together": 0}

    def counted(name, function):
        def call(*args, **kwargs):
            calls[name] += 1
            return function(*args, **kwargs)
        return call

    monkeypatch.setattr(argparse.ArgumentParser, "parse_known_args",
                        counted("parse", argparse.ArgumentParser.parse_known_args))
    monkeypatch.setattr(checks, "check_values", counted("values", checks.check_values))
    monkeypatch.setattr(checks, "check_together", counted("together", checks.check_together))
    monkeypatch.setattr("a2c_ppo_acktr.settings.arguments.check_together", checks.check_together)
    argv = ["--env-name", "CartPole-v1", "--recipe", "original", "--lr", "1e-3"]
    args = get_args(argv)
    # one parse of argv; values checked once per layer (argv's, the recipe's), then together
    assert calls == {"parse": 1, "values": 2, "together": 1}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(args.config))  # what a run writes
    calls.update(parse=0, values=0, together=0)
    get_args(["--config", str(path), "--seed", "3"])
    assert calls == {"parse": 1, "values": 3, "together": 1}  # ... and the file's
