"""scripts/compare.py on monitor files written here: its tables, its JSON, its figures, its errors
(in this process, as the scripts' own tests do; one run as a user runs it)."""
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import compare as compare_py

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "compare.py"


def write_run(path: Path, env_id: str, returns) -> Path:
    """One seed's log dir: a monitor file of ``returns``, episodes of 100 steps."""
    path.mkdir(parents=True)
    lines = [f"{r},100,{i + 1}" for i, r in enumerate(returns)]
    (path / "0.monitor.csv").write_text(
        "#" + json.dumps({"t_start": 1.0, "env_id": env_id}) + "\nr,l,t\n" + "\n".join(lines) + "\n")
    return path


def runs(tmp_path: Path, label: str, env_id: str, finals) -> str:
    """A label's seeds, the last 10 episodes of seed k at ``finals[k]``: ``DIR,DIR,...``."""
    dirs = [write_run(tmp_path / f"{label}-{env_id}-s{k}", env_id, [0.0] * 20 + [final] * 10)
            for k, final in enumerate(finals)]
    return ",".join(map(str, dirs))


@pytest.fixture
def compare(capsys):
    """``compare.py ARGV`` -> (exit status, stdout, stderr)."""
    def run(*argv):
        rc = compare_py.main([str(a) for a in argv])
        out, err = capsys.readouterr()
        return rc, out, err
    return run


def test_one_env_json_by_hand(tmp_path, compare):
    base = runs(tmp_path, "a", "CartPole-v1", [100, 200, 300, 400, 1000])
    other = runs(tmp_path, "b", "CartPole-v1", [150, 250, 350])
    rc, out, err = compare("--run", f"a={base}", "--run", f"b={other}", "--json", "--seed", "1",
                           "--resamples", "2000")
    assert rc == 0, err
    result = json.loads(out)
    a, b = result["envs"]["CartPole-v1"]["a"], result["envs"]["CartPole-v1"]["b"]
    assert (a["n"], a["scores"], a["mean"], a["iqm"]) == (5, [100, 200, 300, 400, 1000], 400, 300)
    assert (b["n"], b["mean"], b["iqm"]) == (3, 250, 250)
    assert a["iqm_ci"][0] <= 300 <= a["iqm_ci"][1] and a["mean_ci"][0] <= 400 <= a["mean_ci"][1]
    # P(b > a): 150 beats 100; 250 beats 100, 200; 350 beats 100, 200, 300: 6 of 15 pairs
    improvement = result["improvement"]["CartPole-v1"]
    assert list(improvement) == ["b"] and improvement["b"]["p"] == pytest.approx(6 / 15)
    assert "all" not in result["envs"]
    assert result["bootstrap"] == {"resamples": 2000, "seed": 1, "level": 0.95}
    # --seed makes the intervals reproducible
    assert compare("--run", f"a={base}", "--run", f"b={other}", "--json", "--seed", "1",
                   "--resamples", "2000")[1] == out


def test_several_envs_are_normalized_and_aggregated(tmp_path, compare):
    # Pong: human-normalized, random -20.7 and human 14.6
    a = runs(tmp_path, "a", "PongNoFrameskip-v4", [-20.7, 14.6, -3.05]) + "," + runs(
        tmp_path, "a", "CartPole-v1", [23.7, 475.0, 249.35])
    b = runs(tmp_path, "b", "PongNoFrameskip-v4", [14.6, 14.6, 14.6]) + "," + runs(
        tmp_path, "b", "CartPole-v1", [475.0, 475.0, 475.0])
    rc, out, err = compare("--run", f"a={a}", "--run", f"b={b}", "--json", "--out",
                           tmp_path / "figs")
    assert rc == 0, err
    result = json.loads(out)
    assert list(result["envs"]) == ["PongNoFrameskip-v4", "CartPole-v1", "all"]
    all_a = result["envs"]["all"]["a"]
    assert all_a["n"] == 6 and np.allclose(sorted(all_a["scores"]), [0, 0, 0.5, 0.5, 1, 1])
    assert all_a["mean"] == pytest.approx(0.5) and all_a["iqm"] == pytest.approx(0.5)
    # per env, b's runs (all at 1) beat 2 of a's 3 runs and tie the third: (2 + 0.5) / 3
    assert result["improvement"]["all"]["b"]["p"] == pytest.approx(2.5 / 3)
    assert "human-normalized" in result["normalization"]
    figures = sorted(p.name for p in (tmp_path / "figs").iterdir())
    assert figures == ["ALE_PongNoFrameskip-v4.png", "CartPole-v1.png", "profile.png"] or \
        figures == sorted(["PongNoFrameskip-v4.png", "CartPole-v1.png", "profile.png"])
    assert all((tmp_path / "figs" / f).read_bytes()[:4] == b"\x89PNG" for f in figures)


def test_tables_and_an_env_without_reference(tmp_path, compare):
    a = runs(tmp_path, "a", "Pendulum-v1", [-1000, -900]) + "," + runs(
        tmp_path, "a", "CartPole-v1", [100, 200])
    b = runs(tmp_path, "b", "Pendulum-v1", [-500, -400]) + "," + runs(
        tmp_path, "b", "CartPole-v1", [300, 400])
    rc, out, err = compare("--run", f"a={a}", "--run", f"b={b}")
    assert rc == 0, err
    assert "| run | seeds | mean [95% CI] | IQM [95% CI] | P(run > a) [95% CI] |" in out
    assert "| a | 2 | 150 [100, 200] | 150 [100, 200] | baseline |" in out
    assert "| b | 2 | 350 [300, 400] | 350 [300, 400] | 1.00 [1.00, 1.00] |" in out
    assert "no aggregate over envs: no random and reference score for Pendulum-v1" in out


@pytest.mark.parametrize("make, needle", [
    (lambda d: None, "run directory not found"),
    (lambda d: d.mkdir(), "no *.monitor.csv files"),
    (lambda d: (d.mkdir(), (d / "0.monitor.csv").write_text("r,l,t\n1,1,1\n")), "not a monitor file"),
    (lambda d: write_run(d, "CartPole-v1", []), "no finished episodes"),
])
def test_a_dir_that_is_not_a_run_is_one_line(tmp_path, compare, make, needle):
    make(tmp_path / "bad")
    good = runs(tmp_path, "a", "CartPole-v1", [1, 2])
    rc, out, err = compare("--run", f"a={good}", "--run", f"b={tmp_path / 'bad'}")
    assert rc == 2 and len(err.strip().splitlines()) == 1, err
    assert err.startswith("compare.py: error: ") and needle in err and out == ""


def test_a_glob_that_matches_nothing_is_one_line(tmp_path, compare):
    rc, _, err = compare("--run", f"a={tmp_path}/nothing-*")
    assert rc == 2 and "no run directories match" in err and len(err.splitlines()) == 1


@pytest.mark.slow
def test_as_a_user_runs_it(tmp_path):
    base = runs(tmp_path, "a", "CartPole-v1", [10, 20, 30])
    res = subprocess.run([sys.executable, str(SCRIPT), "--run", f"ppo={base}"],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert "| ppo | 3 | 20.0 [10.0, 30.0] | 20.0 [10.0, 30.0] | baseline |" in res.stdout


def test_iqm_curves_of_seeds():
    """``curves.aggregate(band="iqm")`` (compare.py's curves, ``plot.py --band iqm``): the IQM of
    the seeds' smoothed curves point by point, inside its interval."""
    import curves

    steps = np.arange(1, 11) * 100.0
    runs = [(steps, np.full(10, level)) for level in (1.0, 2.0, 3.0, 100.0)]
    x, middle, low, high = curves.aggregate(runs, num_points=5, smooth=1, band="iqm")
    assert np.allclose(middle, 2.5) and np.all(low <= middle) and np.all(middle <= high)
    assert np.all(high <= 100) and len(x) == 5


def test_rows_of_text_or_nan_are_skipped_with_one_warning_naming_the_file(tmp_path, compare,
                                                                         monkeypatch):
    """Issue #85 item 4: a NaN row made every statistic nan [nan, nan]."""
    monkeypatch.setattr(sys, "argv", ["compare.py"])  # the program that the warning names
    dirs = runs(tmp_path, "a", "CartPole-v1", [100, 200, 300]).split(",")
    with open(Path(dirs[0]) / "0.monitor.csv", "a") as f:
        f.write("nan,100,31\nnote to self,,\n1e999,100,33\n")
    rc, out, err = compare("--run", "a=" + ",".join(dirs), "--json")
    assert rc == 0, err
    assert json.loads(out)["envs"]["CartPole-v1"]["a"]["scores"] == [100, 200, 300]
    warned = [line for line in err.splitlines() if "skipped" in line]
    assert warned == [f"compare.py: warning: {Path(dirs[0]) / '0.monitor.csv'}: skipped 3 rows that are no "
                      "finite r,l,t numbers (line 33, 34, 35)"], err


def test_a_log_dir_of_seeds_one_seed_mixed_lengths_and_repeats_are_said(tmp_path, compare):
    """A label naming a log dir of three seeds takes them as seeds; a label of one seed, of runs of
    other lengths, or naming a run twice gets one warning each."""
    logs = tmp_path / "logs" / "ppo"
    for seed, final in ((1, 100), (2, 200), (3, 300)):
        write_run(logs / f"CartPole-v1_seed{seed}", "CartPole-v1", [0.0] * 20 + [final] * 10)
    one = runs(tmp_path, "b", "CartPole-v1", [150])
    rc, out, err = compare("--run", f"a={tmp_path / 'logs'}", "--run", f"b={one}", "--json")
    assert rc == 0, err
    assert json.loads(out)["envs"]["CartPole-v1"]["a"]["scores"] == [100, 200, 300]
    assert err.splitlines() == ["compare.py: warning: b on CartPole-v1 has one seed: its intervals "
                                "are that run's score; intervals need several seeds"]
    longer = write_run(tmp_path / "long", "CartPole-v1", [0.0] * 200 + [400] * 10)
    rc, out, err = compare("--run", f"a={tmp_path / 'logs'},{longer},{logs}", "--json")
    assert rc == 0 and "a on CartPole-v1 mixes run lengths (3,000 to 21,000 steps)" in err, err
    assert "is named twice" in err and json.loads(out)["envs"]["CartPole-v1"]["a"]["n"] == 4


def test_an_out_it_cannot_write_is_one_line_before_any_run_is_read(tmp_path, capsys):
    """Issue #85: a read-only --out was a traceback after every run was read."""
    a_file = tmp_path / "a_file"
    a_file.write_text("")
    with pytest.raises(SystemExit) as e:
        compare_py.main(["--run", f"a={tmp_path / 'no-such-run'}", "--out", str(a_file / "cmp")])
    err = capsys.readouterr().err
    assert e.value.code == 2 and err.splitlines() == [
        f"compare.py: error: --out {a_file / 'cmp'}: {a_file} is a file, not a directory "
        "(see --help)"], err
