"""scripts/peers.py: the zoo's SB3 recipe rerun on our seeds, written in our run layout, which
compare.py then scores under each metric; its bad input (one line, exit 2, nothing on disk)."""
import json
import os

import gymnasium
import pytest
import yaml

import compare as compare_py
import peers

# rl_zoo3 is found, not imported, here: its import replaces gymnasium's TimeLimit process-wide.
pytestmark = pytest.mark.skipif(peers.zoo_package() is None, reason="needs rl-zoo3 (.[peers])")
TIME_LIMITS = [(gymnasium.wrappers, "TimeLimit"), (gymnasium.wrappers.common, "TimeLimit"),
               (gymnasium.envs.registration, "TimeLimit")]


@pytest.fixture(autouse=True)
def gymnasiums_own_time_limit():
    """A peer's run imports rl_zoo3, whose gym_patches put its own TimeLimit into gymnasium for
    the rest of the process (as in the zoo's runs); the tests after these get gymnasium's back."""
    saved = [(module, name, getattr(module, name, None)) for module, name in TIME_LIMITS]
    yield
    for module, name, value in saved:
        if value is None:  # one the zoo adds
            vars(module).pop(name, None)
        else:
            setattr(module, name, value)


def zoo_yml(algo):
    with open(os.path.join(peers.zoo_package(), "hyperparams", f"{algo}.yml")) as f:
        return yaml.safe_load(f)


def test_finding_the_zoo_leaves_gymnasium_as_it_is():
    before = gymnasium.wrappers.TimeLimit
    assert peers.zoo_package() and peers.zoo_entry("ppo", "CartPole-v1")[0] == "CartPole-v1"
    assert gymnasium.wrappers.TimeLimit is before


def test_a_seed_is_a_run_in_our_layout_with_the_zoos_hyperparameters(tmp_path, capsys):
    out = tmp_path / "peers"
    assert peers.main(["--peer", "sb3", "--algo", "ppo", "--env-name", "CartPole-v1", "--seeds",
                       "3", "--num-env-steps", "1024", "--eval-every", "512", "--eval-episodes",
                       "3", "--final-eval-episodes", "4", "--out", str(out)]) == 0
    run = out / "ppo" / "CartPole-v1_seed3"
    entry = zoo_yml("ppo")["CartPole-v1"]
    config = json.loads((run / "config.json").read_text())
    assert config["peer"] == "sb3" and config["zoo_entry"] == "CartPole-v1" and config["seed"] == 3
    assert config["versions"]["stable-baselines3"] and config["versions"]["rl-zoo3"]
    assert config["n_envs"] == entry["n_envs"]
    for key in ("n_steps", "batch_size", "gae_lambda", "gamma", "n_epochs", "ent_coef"):
        assert config["zoo_hyperparams"][key] == entry[key], key
    assert config["num_env_steps"] == 1024  # cut to ours: the zoo's is 1e5
    assert len(list(run.glob("*.monitor.csv"))) == entry["n_envs"]
    curve = (run / "eval" / "eval.csv").read_text().splitlines()
    assert curve[0] == "update,timesteps,episodes,mean_return,std_return"
    assert [int(row.split(",")[1]) for row in curve[1:]] == [512, 1024]
    final = json.loads((run / "final_eval.json").read_text())
    assert final["episodes"] == 4 and final["deterministic"] and final["timesteps"] == 1024
    assert "rl-zoo3's CartPole-v1 hyperparameters" in capsys.readouterr().out
    for metric in ("last10", "last100", "final-det", "max-eval"):
        assert compare_py.main(["--run", f"zoo={run}", "--metric", metric, "--json",
                                "--resamples", "50"]) == 0
        result = json.loads(capsys.readouterr().out)
        assert result["metric"] == metric and result["envs"]["CartPole-v1"]["zoo"]["n"] == 1
    assert json.loads(json.dumps(result))["envs"]["CartPole-v1"]["zoo"]["mean"] == \
        pytest.approx(max(float(row.split(",")[3]) for row in curve[1:]))


def test_env_kwargs_make_the_peers_envs_as_ours(tmp_path):
    """--env-kwargs as main.py's: the training, evaluation and final envs take them, and
    config.json records them (Sutton and Barto's CartPole reward: 0 a step, -1 at the fall)."""
    out = tmp_path / "peers"
    assert peers.main(["--peer", "sb3", "--algo", "ppo", "--env-name", "CartPole-v1", "--seeds",
                       "1", "--num-env-steps", "512", "--eval-every", "512", "--eval-episodes",
                       "2", "--final-eval-episodes", "2", "--env-kwargs",
                       "sutton_barto_reward=True", "--out", str(out)]) == 0
    run = out / "ppo" / "CartPole-v1_seed1"
    assert json.loads((run / "config.json").read_text())["env_kwargs"] == {
        "sutton_barto_reward": True}
    returns = [float(row.split(",")[0]) for f in run.glob("*.monitor.csv")
               for row in f.read_text().splitlines()[2:]]
    assert returns and all(r <= 0 for r in returns)
    assert json.loads((run / "final_eval.json").read_text())["mean_return"] <= 0


def test_a_v5_id_without_an_entry_takes_its_v4_entry_and_says_so():
    entry, values, note = peers.zoo_entry("ppo", "Hopper-v5")
    assert entry == "Hopper-v4" and values == zoo_yml("ppo")["Hopper-v4"]
    assert "no ppo entry for Hopper-v5" in note and "Hopper-v4" in note


@pytest.mark.parametrize("change, message", [
    ({"--peer": "tianshou"}, "unknown --peer 'tianshou'; expected one of: sb3"),
    ({"--algo": "sac"}, "unknown --algo 'sac'; expected one of: ppo, a2c"),
    ({"--env-name": "NoSuchEnv-v0"}, "--env-name 'NoSuchEnv-v0': the peer cannot make it"),
    ({"--env-kwargs": "no_such_key=1"}, "CartPole-v1 rejects env kwargs {'no_such_key': 1}"),
    ({"--env-kwargs": "oops"}, "--env-kwargs expects KEY=VALUE pairs"),
    ({"--env-name": "Acrobot-v1", "--algo": "ppo"}, None),  # the zoo has it: accepted
])
def test_bad_input_is_one_line_and_creates_nothing(tmp_path, capsys, change, message):
    argv = {"--peer": "sb3", "--algo": "ppo", "--env-name": "CartPole-v1", "--out":
            str(tmp_path / "out"), **change}
    args = [x for k, v in argv.items() for x in (k, v)] + ["--seeds", "1"]
    if message is None:
        assert peers.check(peers.build_parser().parse_args(args))["entry"] == "Acrobot-v1"
        return
    with pytest.raises(SystemExit) as e:
        peers.main(args)
    err = capsys.readouterr().err
    assert e.value.code == 2 and message in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()


def test_an_env_the_zoo_has_no_recipe_for_is_one_line(tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        peers.main(["--peer", "sb3", "--algo", "a2c", "--env-name", "Blackjack-v1", "--seeds",
                    "1", "--out", str(tmp_path / "out")])
    assert e.value.code == 2 and "rl-zoo3 has no a2c hyperparameters for Blackjack-v1" in \
        capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_an_out_holding_our_run_or_another_peers_is_refused(tmp_path, capsys):
    run = tmp_path / "out" / "ppo" / "CartPole-v1_seed1"
    run.mkdir(parents=True)
    (run / "config.json").write_text(json.dumps({"flags": {}}))  # ours: no "peer"
    argv = ["--peer", "sb3", "--algo", "ppo", "--env-name", "CartPole-v1", "--seeds", "1",
            "--out", str(tmp_path / "out")]
    with pytest.raises(SystemExit) as e:
        peers.main(argv)
    assert e.value.code == 2 and "holds a run of ours" in capsys.readouterr().err
    (run / "config.json").write_text(json.dumps({"peer": "cleanrl"}))
    with pytest.raises(SystemExit):
        peers.main(argv)
    assert "a run of peer cleanrl" in capsys.readouterr().err
    (run / "config.json").write_text(json.dumps({"peer": "sb3"}))
    with pytest.raises(SystemExit):
        peers.main(argv)
    assert "already holds this run; --overwrite replaces it" in capsys.readouterr().err
    assert sorted(p.name for p in run.iterdir()) == ["config.json"]


def test_without_rl_zoo3_it_says_what_to_install(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(__import__("sys").modules, "rl_zoo3", None)
    with pytest.raises(SystemExit) as e:
        peers.main(["--peer", "sb3", "--algo", "ppo", "--env-name", "CartPole-v1", "--seeds",
                    "1", "--out", str(tmp_path / "out")])
    assert e.value.code == 2 and "pip install -e .[peers]" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
