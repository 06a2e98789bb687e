"""settings/config_file.py and main.py --config: a new run from another run's config.json or a
hand-written file, the command line winning; a bad file is one line, exit 2, nothing written."""
import json
import os

import pytest

import main
from a2c_ppo_acktr.run.checkpoint import write_config
from a2c_ppo_acktr.settings import recipes
from a2c_ppo_acktr.settings.arguments import get_args

# A CartPole PPO run of 2 updates of 2 envs x 16 steps, off main.py's defaults in many flags.
PPO = ["--algo", "ppo", "--env-name", "CartPole-v1", "--num-processes", "2", "--num-steps", "16",
       "--num-mini-batch", "2", "--ppo-epoch", "3", "--lr", "1e-3", "--gamma", "0.98",
       "--use-gae", "--use-linear-lr-decay", "--vec-env", "dummy", "--log-interval", "1",
       "--num-env-steps", "64", "--env-kwargs", "max_episode_steps=50"]


def saved_run(tmp_path, argv=PPO) -> tuple[dict, str]:
    """The flags a run of ``argv`` resolves to, and its config.json as main.py writes it."""
    args = get_args(argv + ["--log-dir", str(tmp_path / "logs"), "--save-dir",
                            str(tmp_path / "models")])
    run_dir = tmp_path / "run"
    run_dir.mkdir(parents=True)
    return args.config["flags"], write_config(args.config, str(run_dir))


def test_a_runs_config_gives_its_flags_and_the_command_line_wins(tmp_path):
    flags, path = saved_run(tmp_path)
    for where in (path, os.path.dirname(path)):  # the file, or the run's log directory
        args = get_args(["--config", where, "--seed", "2", "--gamma", "0.9"])
        new = args.config["flags"]
        assert new == {**flags, "seed": 2, "gamma": 0.9}
        assert args.notes == [f"config: the flags of {where}; from the command line: --gamma 0.9 "
                              "(config: 0.98), --seed 2 (config: 1)"]
        assert args.env_kwargs == {"max_episode_steps": 50}


def test_the_lr_horizon_follows_a_new_budget_unless_it_was_set(tmp_path):
    flags, path = saved_run(tmp_path)
    assert flags["lr_decay_horizon"] == 64  # the file's own budget's
    assert get_args(["--config", path]).lr_decay_horizon == 64
    assert get_args(["--config", path, "--num-env-steps", "128"]).lr_decay_horizon == 128
    flags, path = saved_run(tmp_path / "set", PPO + ["--lr-decay-horizon", "96"])
    assert get_args(["--config", path, "--num-env-steps", "128"]).lr_decay_horizon == 96


def test_a_hand_written_file_takes_flag_names_and_its_recipe_goes_under_it(tmp_path):
    path = tmp_path / "mine.json"
    path.write_text(json.dumps({"env_name": "CartPole-v1", "recipe": "original",
                                "--num-env-steps": 1e4, "clip-param": 0.1, "use_gae": False}))
    values = recipes.settings("CartPole-v1", "original")
    args = get_args(["--config", str(path), "--lr", "5e-4"])
    assert (args.num_env_steps, args.clip_param, args.use_gae, args.lr) == (10_000, 0.1, False, 5e-4)
    kept = {d: v for d, v in values.items()
            if d not in ("num_env_steps", "clip_param", "use_gae", "lr")}
    assert {d: getattr(args, d) for d in kept} == kept
    assert args.notes[0] == f"config: the flags of {path}"
    assert args.notes[1].startswith("recipe original for CartPole-v1: ")
    assert "from the command line and --config: " in args.notes[1]


def test_a_run_from_a_config_trains(tmp_path, capsys):
    _, path = saved_run(tmp_path)
    assert main.main(["--config", path, "--seed", "3"]) == 0
    out = capsys.readouterr().out
    assert "config: the flags of" in out and "training 64 steps: 2 updates of 32" in out
    with open(tmp_path / "logs/ppo/CartPole-v1_seed3/config.json") as f:
        assert json.load(f)["flags"]["gamma"] == 0.98


BAD = {  # file content -> the start of what the one line says after "--config <path>"
    None: ": no file",
    "not json": "is not JSON",
    "[1, 2]": "holds no object of flags",
    '{"flags": 3}': "holds no object of flags",
    '{"lrr": 0.1}': "unknown flag 'lrr' (did you mean lr?)",
    '{"lr": "fast"}': '--lr "fast": expected float',
    '{"lr": true}': "--lr true: expected float",
    '{"seed": 1.5}': "--seed 1.5: expected int",
    '{"num_env_steps": 1.5}': "--num-env-steps 1.5: expected a whole number",
    '{"use_gae": "yes"}': '--use-gae "yes": expected true or false',
    '{"activation": "gelu"}': '--activation "gelu": expected one of relu, tanh',
    '{"env_name": 3}': "--env-name 3: expected text",
    '{"log_dir": null}': "--log-dir null: expected a value (default: '/tmp/gym')",
    '{"env_kwargs": "a=1"}': '--env-kwargs "a=1": expected a list',
    '{"resume": true}': "--resume is no flag of a run's config",
    '{"config": "other.json"}': "--config is no flag of a run's config",
}


@pytest.mark.parametrize("content", list(BAD))
def test_a_bad_file_is_one_line_and_nothing_is_written(tmp_path, capsys, monkeypatch, content):
    monkeypatch.chdir(tmp_path)
    if content is not None:
        (tmp_path / "c.json").write_text(content)
    before = sorted(os.listdir(tmp_path))
    with pytest.raises(SystemExit) as exc:
        main.main(["--config", "c.json", "--log-dir", "logs", "--save-dir", "models"])
    err = capsys.readouterr().err.strip()
    assert exc.value.code == 2 and len(err.splitlines()) == 1, err
    assert ": error: --config" in err
    assert BAD[content] in err and "Traceback" not in err, err
    assert sorted(os.listdir(tmp_path)) == before


def test_an_empty_config_path_is_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exc:
        main.main(["--config", "", "--log-dir", "logs", "--save-dir", "models"])
    assert exc.value.code == 2 and os.listdir(tmp_path) == []
    assert capsys.readouterr().err.strip().endswith(
        "error: --config is empty: give a config.json or the log directory of a run")


def test_config_and_resume_exclude_each_other(tmp_path, capsys):
    _, path = saved_run(tmp_path)
    with pytest.raises(SystemExit) as exc:
        main.main(["--config", path, "--resume"])
    assert exc.value.code == 2
    assert "--config starts a new run from a file's flags, --resume continues a run" in \
        capsys.readouterr().err


def test_a_config_nested_thousands_deep_is_one_line(tmp_path):
    """Issue #85: JSON nested past Python's recursion limit was a RecursionError."""
    from a2c_ppo_acktr.errors import ConfigError
    from a2c_ppo_acktr.settings.config_file import read_flags
    deep = tmp_path / "deep.json"
    deep.write_text('{"flags": {"lr": ' + "[" * 100_000 + "]" * 100_000 + "}}")
    with pytest.raises(ConfigError, match="deep.json nests its values too deep to be a file of"):
        read_flags(str(deep), "--config")
