"""Learning curves from monitor CSVs: ``curves`` (loading, smoothing, averaging
seeds) and the ``scripts/plot.py`` command line, run as a user runs it."""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import curves
from a2c_ppo_acktr.analysis import episodes
from a2c_ppo_acktr.errors import LogError
from tests.analysis.test_episodes import make_run

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "plot.py"


def plot(*argv):
    """``python scripts/plot.py ARGV`` in a fresh process -> (exit status, stdout, stderr)."""
    env = {k: v for k, v in os.environ.items() if k != "MPLBACKEND"}  # the script forces Agg
    res = subprocess.run([sys.executable, str(SCRIPT), *map(str, argv)], capture_output=True,
                         text=True, env=env, timeout=120)
    return res.returncode, res.stdout, res.stderr

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def test_smooth_curve_trailing_window():
    y = np.array([0.0, 2.0, 4.0, 6.0])
    np.testing.assert_allclose(curves.smooth_curve(y, 2), [0.0, 1.0, 3.0, 5.0])
    np.testing.assert_allclose(curves.smooth_curve(y, 1), y)
    np.testing.assert_allclose(curves.smooth_curve(y, 10), [0.0, 1.0, 2.0, 3.0])


def test_aggregate_mean_of_two_seeds():
    steps = np.array([10.0, 20.0, 30.0, 40.0])
    a = (steps, np.array([0.0, 1.0, 2.0, 3.0]))
    b = (steps, np.array([2.0, 3.0, 4.0, 5.0]))
    x, mean, lo, hi = curves.aggregate([a, b], num_points=4, smooth=1)
    np.testing.assert_allclose(x, steps)
    np.testing.assert_allclose(mean, [1.0, 2.0, 3.0, 4.0])
    np.testing.assert_allclose(lo, a[1])
    np.testing.assert_allclose(hi, b[1])
    _, mean_s, lo_s, hi_s = curves.aggregate([a, b], num_points=4, smooth=1, band="std")
    np.testing.assert_allclose(mean_s - lo_s, 1.0)
    np.testing.assert_allclose(hi_s - mean_s, 1.0)


def test_aggregate_interpolates_onto_common_overlap():
    # seed a: y = x/10 on steps 0..100 ; seed b: y = x/10 + 2 on steps 20..80
    a = (np.array([0.0, 100.0]), np.array([0.0, 10.0]))
    b = (np.array([20.0, 80.0]), np.array([4.0, 10.0]))
    x, mean, lo, hi = curves.aggregate([a, b], num_points=7, smooth=1)
    np.testing.assert_allclose(x, np.linspace(20, 80, 7))
    np.testing.assert_allclose(mean, x / 10 + 1)
    np.testing.assert_allclose(hi - lo, 2.0)
    # xmax caps the grid
    x2, *_ = curves.aggregate([a, b], num_points=5, smooth=1, xmax=60)
    assert x2[0] == 20 and x2[-1] == 60


@pytest.mark.slow
def test_cli_one_png_per_env_id(tmp_path):
    logs = tmp_path / "logs"
    rng = np.random.default_rng(0)
    for seed in range(2):
        make_run(logs / f"ppo-cp-s{seed}", rng.normal(size=30))
        make_run(logs / f"ppo-ant-s{seed}", rng.normal(size=30), env_id="ALE/Pong-v5")
        make_run(logs / f"a2c-cp-s{seed}", rng.normal(size=30))
    out_dir = tmp_path / "plots"
    rc, out, _ = plot(
        "--run", f"ppo={logs}/ppo-*",
        "--run", f"a2c={logs / 'a2c-cp-s0'},{logs / 'a2c-cp-s1'}",
        "--out-dir", out_dir, "--smooth", "5", "--num-points", "50",
        "--title", "demo",
    )
    assert rc == 0
    files = sorted(p.name for p in out_dir.iterdir())
    assert files == ["ALE_Pong-v5.png", "CartPole-v1.png"]
    for name in files:
        assert (out_dir / name).read_bytes()[:8] == PNG_MAGIC
    assert str(out_dir / "CartPole-v1.png") in out


@pytest.mark.slow
def test_cli_single_out(tmp_path):
    run = make_run(tmp_path / "run", np.arange(50.0))
    out = tmp_path / "sub" / "curve.png"
    assert plot("--run", f"ours={run}", "--out", out, "--xmax", "300")[0] == 0
    assert out.read_bytes()[:8] == PNG_MAGIC


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["missing", "empty", "noglob"])
def test_cli_error_path(tmp_path, kind):
    good = make_run(tmp_path / "good", [1.0, 2.0, 3.0])
    bad = {
        "missing": str(tmp_path / "does-not-exist"),
        "empty": str(tmp_path / "empty"),
        "noglob": str(tmp_path / "nothing-*"),
    }[kind]
    (tmp_path / "empty").mkdir()
    out = tmp_path / "x.png"
    rc, _, err = plot("--run", f"a={good},{bad}", "--out", out)
    assert rc == 2
    assert err.count("\n") == 1 and err.startswith("plot.py: error:")
    assert bad in err
    assert "Traceback" not in err
    assert not out.exists()


@pytest.mark.slow
def test_cli_help():
    rc, out, _ = plot("--help")
    assert rc == 0 and "usage: plot.py" in out


def test_a_log_dir_of_several_seeds_and_envs_gives_its_runs(tmp_path, capsys):
    """Three seeds in one --log-dir are a label's seeds (a run named twice counts once); runs of
    another env beside them go to a figure of their own; one env under two --algo is refused."""
    import plot
    base = tmp_path / "logs"
    seeds = [make_run(base / "ppo" / f"CartPole-v1_seed{s}", np.arange(30.0) * s) for s in (1, 2, 3)]
    assert episodes.run_dirs(str(base)) == seeds
    assert plot.expand_dirs([str(base), seeds[0]]) == seeds
    assert "is named twice" in capsys.readouterr().err
    out = tmp_path / "fig.png"
    assert plot.main(["--run", f"ppo={base}", "--out", str(out), "--smooth", "1"]) == 0
    assert out.read_bytes().startswith(PNG_MAGIC) and capsys.readouterr().out.split() == [str(out)]
    make_run(base / "ppo" / "Acrobot-v1_seed1", -np.arange(30.0), env_id="Acrobot-v1")
    assert plot.main(["--run", f"ppo={base}", "--out", str(out), "--smooth", "1"]) == 0
    written = capsys.readouterr().out.split()
    assert written == [str(tmp_path / "fig_Acrobot-v1.png"), str(tmp_path / "fig_CartPole-v1.png")]
    assert all(Path(p).read_bytes().startswith(PNG_MAGIC) for p in written)
    make_run(base / "a2c" / "CartPole-v1_seed1", [1.0])
    with pytest.raises(LogError, match="CartPole-v1 in .*a2c, .*ppo: variants, not seeds"):
        episodes.run_dirs(str(base))


def test_steps_to_is_the_first_logged_mean_at_the_threshold():
    # (steps, mean of the last 10 episodes, the process's seconds): resumed after 4096 steps
    log = [(1024, "", 10), (2048, "-21", 20), (3072, "18.0", 30), (4096, "17", 40),
           (5120, "20.1", 5)]
    rows = [{"timesteps": str(n), "mean_return": m, "time": str(t)} for n, m, t in log]
    assert [curves.steps_to(rows, t) for t in (-21, 18, 20, 21)] == [2048, 3072, 5120, None]
    # the resumed part's 5 s come after the 40 s of the first
    assert [curves.reached(rows, t) for t in (18, 20, 21)] == [(3072, 30.0), (5120, 45.0), None]
    assert curves.elapsed(rows) == [10.0, 20.0, 30.0, 40.0, 45.0]
