"""run/checks.py: refusals are ConfigErrors of one line naming the flag (the CLI's exit: test_cli)."""
import pytest

from a2c_ppo_acktr.errors import ConfigError
from a2c_ppo_acktr.run.arguments import build_parser
from a2c_ppo_acktr.run.checks import check_args, parse_env_kwargs


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
    (["--algo", "acktr", "--kfac-kl-clip", "0"], ["--kfac-kl-clip", "positive", "got 0"]),
    (["--algo", "acktr", "--kfac-damping", "-1"], ["--kfac-damping", "positive", "got -1"]),
    (["--algo", "ppo", "--kfac-lr", "0.1"], ["--kfac-lr", "K-FAC", "--algo ppo"]),
    (["--algo", "a2c", "--kfac-split-bias"], ["--kfac-split-bias", "K-FAC", "--algo a2c"]),
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
