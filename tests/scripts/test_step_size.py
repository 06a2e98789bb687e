"""scripts/notes/step_size.py: how far an update moves the policy, and K-FAC's predicted KL per loss
term, from a fresh start or a checkpoint (its flags overridable), bad input in one line."""
import math
import re

import pytest
import step_size

from tests.test_main import SHORT, expect_exit_2, run

CARTPOLE = ["--env-name", "CartPole-v1", "--num-processes", "4", "--num-steps", "5",
            "--vec-env", "dummy"]
NUMBER = r"(\d\.\d\de[+-]\d\d)"


def measured(capsys, argv):
    assert step_size.main(argv) == 0
    return capsys.readouterr().out.strip().splitlines()


def test_a2c_with_no_step_moves_nothing_and_a_step_moves_it(capsys):
    """The KL compares the rollout's own log-probabilities with the updated policy's: at lr 1e-30
    they are the same network on the same states and actions (round-off only)."""
    for lr, check in (("1e-30", lambda kl: kl < 1e-10), ("0.01", lambda kl: kl > 1e-7)):
        lines = measured(capsys, CARTPOLE + ["--algo", "a2c", "--lr", lr, "--updates", "2"])
        assert len(lines) == 3 and lines[-1].startswith("median policy KL per update")
        for line in lines[:2]:
            kl, per_1000 = map(float, re.search(rf"policy KL {NUMBER}, per 1,000 env steps "
                                                rf"{NUMBER}", line).groups())
            assert check(kl), line
            assert per_1000 == pytest.approx(kl * 1000 / 20, rel=0.01, abs=1e-12)


def test_acktr_splits_the_predicted_kl_by_loss_term(capsys):
    lines = measured(capsys, CARTPOLE + ["--algo", "acktr", "--updates", "3"])
    assert "predicted KL" not in lines[0]  # no Fisher statistics before the first update
    for line in lines[1:3]:
        terms = dict(re.findall(rf"(policy|value|entropy|all) {NUMBER}", line.split("predicted KL")[1]))
        assert set(terms) == {"policy", "value", "entropy", "all"}, line
        values = {k: float(v) for k, v in terms.items()}
        assert all(math.isfinite(v) and v >= 0 for v in values.values())
        # v.g is a quadratic form in the gradient: the whole loss's lies within the terms' bounds
        # (|sqrt(q(a+b+c))| <= sum of sqrt(q(each)), Cauchy-Schwarz in the Fisher's metric).
        assert math.sqrt(values["all"]) <= sum(math.sqrt(values[k]) for k in
                                               ("policy", "value", "entropy")) * 1.001
        assert 0 < float(re.search(r"nu (\d\.\d+)", line).group(1)) <= 1


@pytest.mark.slow
def test_from_a_checkpoint_with_a_flag_overridden(tmp_path, capsys):
    paths = run(tmp_path, SHORT + ["--algo", "acktr"])
    capsys.readouterr()  # the run's own log
    lines = measured(capsys, ["--checkpoint", paths.checkpoint, "--updates", "2"])
    # the checkpoint's settings (2 envs x 8 steps) and its Fisher statistics: split from update 1
    assert all("(16 env steps)" in line and "predicted KL" in line for line in lines[:2])
    nus = [float(x) for x in re.findall(r"nu (\d\.\d+)", "\n".join(lines[:2]))]
    tight = measured(capsys, ["--checkpoint", paths.checkpoint, "--updates", "2",
                              "--kfac-kl-clip", "1e-12"])
    tight_nus = [float(x) for x in re.findall(r"nu (\d\.\d+)", "\n".join(tight[:2]))]
    assert all(t < n for t, n in zip(tight_nus, nus)) and max(tight_nus) < 0.01, (nus, tight_nus)


@pytest.mark.parametrize("argv, needle", [
    (["--updates", "0"], "--updates must be at least 1, got 0"),
    (["--checkpoint", "nowhere.pt"], "no checkpoint at nowhere.pt"),
    (CARTPOLE + ["--recurrent-policy"], "--recurrent-policy"),
    (["--env-name", "NoSuchEnv-v0"], "NoSuchEnv-v0"),
])
@pytest.mark.slow
def test_bad_input_is_one_line(capsys, argv, needle):
    expect_exit_2(capsys, argv, needle, step_size.main)


@pytest.mark.slow
def test_ppo_from_a_checkpoint(tmp_path, capsys):
    paths = run(tmp_path, SHORT + ["--algo", "ppo", "--num-mini-batch", "2"])
    capsys.readouterr()
    lines = measured(capsys, ["--checkpoint", paths.checkpoint, "--updates", "2"])
    assert len(lines) == 3 and all("(16 env steps): policy KL" in line and "nu" not in line
                                   for line in lines[:2]), lines
