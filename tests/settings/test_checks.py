"""settings/checks.py: refusals are ConfigErrors of one line naming the flag (the CLI's exit: test_cli)."""
import argparse
import re

import numpy as np
import pytest

from a2c_ppo_acktr.config import declarations
from a2c_ppo_acktr.errors import ConfigError
from a2c_ppo_acktr.settings import checks
from a2c_ppo_acktr.settings.arguments import build_parser
from a2c_ppo_acktr.settings.checks import SEED, check_args, count, numbers, parse_env_kwargs


def parsed(*argv: str):
    return build_parser().parse_args(["--env-name", "CartPole-v1", *argv])


@pytest.mark.parametrize("argv, words", [
    (["--algo", "sac"], ["--algo 'sac'", "a2c", "ppo", "acktr"]),
    (["--vec-env", "gpu"], ["--vec-env 'gpu'", "shmem"]),
    (["--num-steps", "0"], ["--num-steps", "positive integer", "got 0"]),
    (["--gail-warmup-updates", "-1"], ["--gail-warmup-updates", "got -1"]),
    (["--gamma", "1.5"], ["--gamma", "[0, 1]", "1.5"]),
    (["--desired-kl", "0"], ["--desired-kl", "positive"]),
    (["--algo", "a2c", "--desired-kl", "0.01"], ["--desired-kl", "--algo a2c"]),
    (["--algo", "a2c", "--recompute-advantages"], ["--recompute-advantages", "--algo a2c"]),
    (["--algo", "ppo", "--recompute-advantages", "--recurrent-policy"],
     ["--recompute-advantages", "--recurrent-policy"]),
    (["--algo", "acktr", "--value-norm"], ["--value-norm", "--algo acktr"]),
    (["--lr-decay-horizon", "100"], ["--use-linear-lr-decay"]),
    (["--num-env-steps", "10"], ["--num-env-steps (10)", "one rollout"]),
    (["--compile", "--algo", "acktr"], ["--compile", "acktr"]),
    (["--gail", "--scale-actions"], ["--gail", "--scale-actions", "env's units"]),
    (["--algo", "acktr", "--kfac-kl-clip", "0"], ["--kfac-kl-clip", "positive", "got 0"]),
    (["--algo", "acktr", "--kfac-damping", "-1"], ["--kfac-damping", "positive", "got -1"]),
    (["--algo", "ppo", "--kfac-lr", "0.1"], ["--kfac-lr", "K-FAC", "--algo ppo"]),
    (["--algo", "a2c", "--kfac-split-bias"], ["--kfac-split-bias", "K-FAC", "--algo a2c"]),
    # issue #52: values that passed and failed later, or left a run that could not restart
    (["--lr", "inf"], ["--lr", "finite", "got inf"]),
    (["--lr", "1e999"], ["--lr", "finite", "got inf"]),
    (["--eps", "nan"], ["--eps", "got nan"]),
    (["--entropy-coef", "nan"], ["--entropy-coef", "finite", "got nan"]),
    (["--entropy-coef", "-0.01"], ["--entropy-coef", "0 or positive", "got -0.01"]),
    (["--value-loss-coef", "inf"], ["--value-loss-coef", "got inf"]),
    (["--max-grad-norm", "nan"], ["--max-grad-norm", "inf: no clipping", "got nan"]),
    (["--clip-param", "inf"], ["--clip-param", "got inf"]),
    (["--alpha", "nan"], ["--alpha", "[0, 1]", "got nan"]),
    (["--log-std-init", "100"], ["--log-std-init", "[-20, 20]", "got 100"]),
    (["--log-std-init", "nan"], ["--log-std-init", "got nan"]),
    (["--action-mean-gain", "inf"], ["--action-mean-gain", "got inf"]),
    (["--algo", "ppo", "--desired-kl", "inf"], ["--desired-kl", "got inf"]),
    (["--algo", "acktr", "--kfac-lr", "nan"], ["--kfac-lr", "got nan"]),
    (["--seed", "-1"], ["--seed", "0 to 2**32 - 1", "got -1"]),
    (["--seed", "4294967296"], ["--seed", "0 to 2**32 - 1", "got 4294967296"]),
    (["--num-env-steps", "1e30"], ["--num-env-steps", "below 2**63", "got 1e+30"]),
    (["--hidden-size", "1e19"], ["--hidden-size", "below 2**63", "got 1e+19"]),
    (["--num-workers", "-1"], ["--num-workers", "0 or a positive integer", "got -1"]),
    (["--log-dir", ""], ["--log-dir is empty"]),
    (["--gail-experts-dir", ""], ["--gail-experts-dir is empty"]),
    (["--num-workers", "1", "--ray-address", ""], ["--ray-address is empty"]),
    (["--resume", ""], ["--resume is empty", "bare --resume"]),
])
def test_bad_values_raise_one_line_naming_the_flag(argv, words):
    with pytest.raises(ConfigError) as e:
        check_args(parsed(*argv))
    assert "\n" not in str(e.value) and all(w in str(e.value) for w in words), str(e.value)


def test_good_values_pass_with_the_uneven_minibatch_warning():
    assert check_args(parsed("--algo", "ppo", "--num-mini-batch", "4")) == []
    warnings = check_args(parsed("--algo", "ppo", "--num-processes", "3", "--num-steps", "5",
                                 "--num-mini-batch", "4"))
    assert len(warnings) == 1 and "minibatches of 3 samples" in warnings[0]


def test_env_kwargs_pairs():
    assert parse_env_kwargs(["a=1", "b=x"]) == {"a": 1, "b": "x"}
    for bad in (["a"], ["1a=2"], ["a=1", "a=2"]):
        with pytest.raises(ConfigError):
            parse_env_kwargs(bad)


def test_env_kwargs_nan_and_inf_are_floats_and_quoted_they_stay_text():
    """As docs/details.md says (issue #85): float() reads them; quoted, they are text."""
    kwargs = parse_env_kwargs(["a=nan", "b=inf", "c=-inf", 'd="nan"', "e=NaNa"])
    assert np.isnan(kwargs["a"]) and kwargs["b"] == np.inf and kwargs["c"] == -np.inf
    assert (kwargs["d"], kwargs["e"]) == ("nan", "NaNa")


def test_an_env_id_naming_a_module_by_its_path_is_one_line():
    """Issue #85: '../x:Id' was importlib's TypeError (a relative import without a package)."""
    from a2c_ppo_acktr.envs.ids import env_spec
    for env_id in ("../x:Id", "my envs:Id", "x/y:Id"):
        with pytest.raises(ConfigError, match="a module is named as in Python's import"):
            env_spec(env_id)


def test_a_history_of_more_than_a_thousand_files_is_said():
    """Issue #85 item 6: --save-history 1 on a long run wrote a file per update, unsaid."""
    from a2c_ppo_acktr.settings.arguments import get_config
    base = ["--algo", "a2c", "--env-name", "CartPole-v1", "--num-processes", "2", "--num-steps",
            "8", "--save-history", "10"]
    assert not get_config(base + ["--num-env-steps", "160000"]).warnings  # 1,000 copies
    assert get_config(base + ["--num-env-steps", "1000000"]).warnings == (
        "--save-history 10 keeps 6,250 copies of the checkpoint (one per 10 of 62,500 updates), "
        "more than 1,000 files: a larger N keeps fewer",)


def test_every_numeric_flag_has_a_range():
    numeric = {a.dest for a in build_parser()._actions if a.type in (int, float, count)}
    assert numeric == set(numbers()) == {s.dest for s in declarations() if s.type in (int, float, count)}


def test_range_ends():
    """The bounds hold their ends; inf only for --max-grad-norm (no clipping)."""
    inf = float("inf")
    NUMBERS = numbers()
    assert NUMBERS["max_grad_norm"].accepts(inf) and not NUMBERS["lr"].accepts(inf)
    assert all(NUMBERS["log_std_init"].accepts(x) for x in (-20.0, 0.0, 20.0))
    assert all(NUMBERS["gamma"].accepts(x) for x in (0.0, 1.0))
    assert NUMBERS["entropy_coef"].accepts(0.0) and NUMBERS["gail_warmup_updates"].accepts(0)
    assert NUMBERS["num_env_steps"].accepts(2**63 - 1)
    assert not NUMBERS["num_env_steps"].accepts(2**63)


def test_seeds_in_range_are_taken_by_numpy():
    np.random.seed(int(SEED.high))  # what main.py does with --seed
    np.random.seed(int(SEED.low))


@pytest.mark.parametrize("text", ["inf", "nan", "-inf", "1.5", "x"])
def test_counts_are_whole_finite_numbers(text):
    with pytest.raises(argparse.ArgumentTypeError):
        count(text)
    assert count("10e6") == 10_000_000


@pytest.mark.parametrize("argv, words", [
    (["--algo", "acktr"], "--algo acktr cannot run under torchrun"),
    (["--algo", "ppo", "--value-norm"], "--value-norm cannot run under torchrun"),
    (["--num-workers", "2"], "--num-workers (Ray rollout workers) and torchrun exclude each other"),
    (["--async-rollouts"], "--async-rollouts cannot run under torchrun"),
    (["--gail"], "--gail cannot run under torchrun")])
def test_what_torchrun_ranks_cannot_run_is_refused_with_the_flags(monkeypatch, argv, words):
    args = parsed(*argv)
    check_args(args)  # without torchrun: runs
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "2")
    with pytest.raises(ConfigError, match=re.escape(words)):
        check_args(args)
    check_args(parsed())  # a2c on the ranks: runs


def test_bf16_where_it_would_be_emulated_is_refused_with_the_flags(monkeypatch):
    monkeypatch.setattr(checks, "bf16_missing", lambda cuda: "a CPU with AVX512-BF16 or AMX")
    with pytest.raises(ConfigError, match=r"^--precision bf16 needs a CPU with AVX512-BF16 or AMX$"):
        checks.check_precision("bf16", cuda=False)
    checks.check_precision("fp32", cuda=False)
    monkeypatch.setattr(checks, "bf16_missing", lambda cuda: None)
    checks.check_precision("bf16", cuda=False)
