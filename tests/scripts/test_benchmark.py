"""scripts/benchmark.py end to end on a tiny budget (the recipes: test_recipes.py)."""
import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.mark.slow
def test_benchmark_end_to_end(tmp_path):
    out = tmp_path / "bench"
    proc = subprocess.run(
        [sys.executable, os.path.join(ROOT, "scripts", "benchmark.py"), "--suite", "classic",
         "--env", "CartPole-v1", "--seeds", "1", "2", "--num-env-steps", "2048", "--jobs", "2",
         "--out", str(out)],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
        env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert proc.returncode == 0, proc.stderr
    finals = []
    for seed in (1, 2):
        line = re.search(rf"CartPole-v1 tuned 2048 steps seed {seed}: mean of last 10 episodes "
                         r"[\d.]+, final policy ([\d.]+) \(deterministic, 10 episodes, "
                         r"([\d.]+) to ([\d.]+)\), "
                         r"wall [\d.]+ min, \d+ fps", proc.stdout)
        assert line, proc.stdout
        finals.append(float(line.group(1)))
        low, high = float(line.group(2)), float(line.group(3))
        assert 8 <= low <= finals[-1] <= high <= 500
    row = re.search(r"\| CartPole-v1 \| tuned \| 2,048 \| 1, 2 \| (\d+) ± (\d+) \| (\d+) \[(\d+), (\d+)\] \| "
                    r"(\d+) / (\d+) \| (\d+) / (\d+) \|", proc.stdout)
    assert row, proc.stdout
    mean, _, iqm, low, high, first, second, final1, final2 = map(int, row.groups())
    assert 9 <= mean <= 500 and abs(mean - (first + second) / 2) <= 1
    # the IQM of two seeds is their mean; its interval spans the two
    assert iqm == mean and (low, high) == (min(first, second), max(first, second))
    assert "IQM: the interquartile mean over seeds" in (out / "results.md").read_text()
    # CartPole returns are whole episode lengths, at least 8 steps and at most 500
    assert [final1, final2] == [round(f) for f in finals] and all(8 <= f <= 500 for f in finals)
    assert row.group(0) in (out / "results.md").read_text()
    png = out / "CartPole-v1.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5000

    # --reuse reads the finished runs instead of training them again: same row, logs untouched.
    logs = [out / "runs" / "CartPole-v1" / "tuned" / f"seed{k}" / "stdout.log" for k in (1, 2)]
    stamps = [log.stat().st_mtime_ns for log in logs]
    again = subprocess.run(
        [sys.executable, os.path.join(ROOT, "scripts", "benchmark.py"), "--suite", "classic",
         "--env", "CartPole-v1", "--seeds", "1", "2", "--num-env-steps", "2048", "--reuse",
         "--thresholds", "0", "1000", "--out", str(out)],
        cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr
    assert row.group(0) in again.stdout
    assert [log.stat().st_mtime_ns for log in logs] == stamps
    # Steps to a return: 0 at the first logged mean (a step count), 1000 never ("-").
    assert ("| steps (training time) to 0, per seed | steps (training time) to 1000, per seed |"
            in again.stdout)
    assert re.search(r"\| [\d,]+ \(\d+ min\) / [\d,]+ \(\d+ min\) \| - / - \|\n", again.stdout)
    assert re.search(r"seed 1: .*, 0 at [\d,]+ \(\d+ min\), 1000 at -", again.stdout)


def test_curves_are_named_by_algorithm_and_recipe():
    from run_results import legend

    rows = ("original", "a2c", "acktr", "tuned, --vec-env ale", "tuned --lr 1e-4, --vec-env ale",
            "a2c --algo ppo")
    assert [legend("PongNoFrameskip-v4", r) for r in rows] == [
        "ppo original", "a2c", "acktr", "ppo tuned, --vec-env ale",
        "ppo tuned --lr 1e-4, --vec-env ale", "a2c --algo ppo"]


def test_each_run_gets_its_share_of_the_cores(tmp_path, monkeypatch):
    import benchmark

    seen = []
    monkeypatch.setattr(benchmark.CHILDREN, "call",
                        lambda argv, **kw: seen.append(kw["env"]["OMP_NUM_THREADS"]) or 1)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    benchmark.run_one("CartPole-v1", "tuned", 1, 2048, str(tmp_path), threads=2)
    monkeypatch.setenv("OMP_NUM_THREADS", "3")  # the user's setting wins
    benchmark.run_one("CartPole-v1", "tuned", 1, 2048, str(tmp_path), threads=2)
    assert seen == ["2", "3"]


@pytest.mark.slow
def test_reuse_continues_a_run_cut_short(tmp_path):
    import benchmark

    from curves import elapsed

    first = benchmark.run_one("CartPole-v1", "tuned", 1, 2048, str(tmp_path), threads=1)
    run = tmp_path / "runs" / "CartPole-v1" / "tuned" / "seed1"
    [progress] = run.glob("logs/**/progress.csv")
    before_log, before_rows = (run / "stdout.log").read_text(), progress.read_text().splitlines()
    # a budget above its checkpoint: --resume, not a new run
    again = benchmark.run_one("CartPole-v1", "tuned", 1, 4096, str(tmp_path), reuse=True, threads=1)
    assert first["rc"] == 0 and again["rc"] == 0 and again["score"] is not None
    assert benchmark.saved_steps(str(run))[1] == benchmark.whole_updates("CartPole-v1", "tuned", 4096)
    rows = progress.read_text().splitlines()
    assert rows[:len(before_rows)] == before_rows and len(rows) > len(before_rows)
    log = (run / "stdout.log").read_text()
    assert log.startswith(before_log) and "resum" in log[len(before_log):].lower()
    assert again["wall"] == elapsed(again["rows"])[-1]  # both parts' training time


@pytest.mark.slow
def test_reuse_refuses_a_run_longer_than_its_own(tmp_path, capsys):
    """A checkpoint holding more steps than the run would train is another run's (another
    recipe's or budget's): ``--reuse`` says so in one line and leaves it, where it used to train
    over it."""
    import benchmark

    assert benchmark.run_one("CartPole-v1", "tuned", 1, 4096, str(tmp_path), threads=1)["rc"] == 0
    run = tmp_path / "runs" / "CartPole-v1" / "tuned" / "seed1"
    [checkpoint] = run.glob("models/*/*.pt")
    before = checkpoint.read_bytes()
    with pytest.raises(SystemExit) as exc:
        benchmark.main(["--suite", "classic", "--env", "CartPole-v1", "--seeds", "1",
                        "--num-env-steps", "2048", "--reuse", "--out", str(tmp_path)])
    err = capsys.readouterr().err.strip().splitlines()
    assert exc.value.code == 2 and len(err) == 1, err
    assert f"--reuse: {run} holds 4,096 steps, more than the 2,048 this run trains" in err[-1]
    assert checkpoint.read_bytes() == before


@pytest.mark.slow
def test_sigterm_to_the_benchmark_alone_stops_and_saves_its_runs(tmp_path):
    """``kill <pid>`` or ``timeout`` signal benchmark.py only: the run under way saves and stops
    (it would otherwise train on, orphaned), the next is not started, the lines say so."""
    out = tmp_path / "bench"
    proc = subprocess.Popen(
        [sys.executable, os.path.join(ROOT, "scripts", "benchmark.py"), "--suite", "classic",
         "--env", "CartPole-v1", "--seeds", "1", "2", "--num-env-steps", "10000000", "--jobs", "1",
         "--out", str(out)],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "OMP_NUM_THREADS": "1"})
    run = out / "runs" / "CartPole-v1" / "tuned"
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not any(
                len(p.read_text().splitlines()) > 1 for p in run.glob("seed1/logs/**/progress.csv")):
            time.sleep(0.2)
        proc.send_signal(signal.SIGTERM)
        stdout, stderr = proc.communicate(timeout=120)
    finally:  # a run left training if the signal was not passed on
        proc.kill()
        subprocess.run(["pkill", "-KILL", "-f", str(out)], check=False)
    assert proc.returncode == 143, stderr
    import benchmark
    saved = benchmark.saved_steps(str(run / "seed1"))
    assert saved is not None and 0 < saved[1] < 10_000_000
    assert (f"CartPole-v1 tuned 10000000 steps seed 1: stopped at {saved[1]:,} steps (checkpoint "
            "saved); --reuse continues it") in stdout
    assert "CartPole-v1 tuned 10000000 steps seed 2: not started (stopped before its turn)" in stdout
    assert not (run / "seed2" / "logs").exists()


def test_a_run_that_ends_no_episode_is_said_and_no_failure(tmp_path, monkeypatch, capsys):
    """Issue #52: a run too short for any episode to end was "FAILED (exit status 0)", exit 1."""
    import benchmark

    def no_episode_ended(env, name, seed, steps, out, *args):
        run_dir = tmp_path / "runs" / env / name / f"seed{seed}"
        logs = run_dir / "logs" / "ppo" / f"{env}_seed{seed}"
        logs.mkdir(parents=True)
        (logs / "0.monitor.csv").write_text(
            json.dumps({"t_start": 1.0, "env_id": env}).join("#\n") + "r,l,t\n")
        return benchmark.read_result(env, name, seed, steps, str(run_dir), 0, 1.0)

    monkeypatch.setattr(benchmark, "run_one", no_episode_ended)
    assert benchmark.main(["--suite", "classic", "--env", "Acrobot-v1", "--seeds", "1",
                           "--num-env-steps", "5000", "--jobs", "1", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert ("Acrobot-v1 tuned 5000 steps seed 1: finished without a score: no finished episodes "
            "in monitor files of ") in out and "(a larger --num-env-steps ends some)\n" in out
    assert "FAILED" not in out


@pytest.mark.parametrize("argv, needle", [
    (["--seeds", "1", "-1"], "--seeds must be an integer from 0 to 2**32 - 1, got -1"),
    (["--num-env-steps", "0"], "--num-env-steps must be a positive integer below 2**63, got 0"),
    (["--num-env-steps", "1e30"], "--num-env-steps must be a positive integer below 2**63"),
    (["--jobs", "0"], "--jobs must be a positive integer below 2**63, got 0"),
    (["--thresholds", "nan"], "--thresholds must be finite, got nan"),
    (["--out", ""], "--out is empty: give a path"),
])
def test_benchmark_refuses_bad_numbers_and_empty_paths(tmp_path, monkeypatch, capsys, argv,
                                                       needle):
    """Issue #52: --num-env-steps 0 ran the suite's budget, --seeds -1 failed in every run."""
    import benchmark

    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as e:
        benchmark.main(["--suite", "classic", "--env", "CartPole-v1", *argv])
    err = capsys.readouterr().err
    assert e.value.code == 2 and len(err.splitlines()) == 1 and needle in err, err
    assert os.listdir(tmp_path) == []


@pytest.mark.slow
def test_benchmark_refuses_env_outside_suite(tmp_path):
    proc = subprocess.run(
        [sys.executable, os.path.join(ROOT, "scripts", "benchmark.py"), "--suite", "mujoco",
         "--env", "CartPole-v1", "--out", str(tmp_path)], capture_output=True, text=True)
    assert proc.returncode == 2 and "not in the mujoco suite" in proc.stderr


@pytest.mark.slow
def test_benchmark_runs_each_backend_as_a_row(tmp_path):
    out = tmp_path / "bench"
    proc = subprocess.run(
        [sys.executable, os.path.join(ROOT, "scripts", "benchmark.py"), "--suite", "classic",
         "--env", "CartPole-v1", "--seeds", "1", "--num-env-steps", "1024", "--jobs", "2",
         "--vec-env", "dummy", "shmem", "--out", str(out)],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
        env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert proc.returncode == 0, proc.stderr
    rows = {kind: re.search(rf"\| CartPole-v1 \| tuned, --vec-env {kind} \| 1,024 \| 1 \| "
                            r"(\d+) \| \d+ \(one seed\) \| \d+ \| (\d+) \|", proc.stdout)
            for kind in ("dummy", "shmem")}
    assert all(rows.values()), proc.stdout
    # CartPole steps alike in this process and in worker processes: the same run, seed for seed
    assert rows["dummy"].groups() == rows["shmem"].groups()
    for kind in ("dummy", "shmem"):
        run = out / "runs" / "CartPole-v1" / f"tuned-{kind}" / "seed1"
        config = json.loads((run / "logs" / "ppo" / "CartPole-v1_seed1" / "config.json").read_text())
        assert config["flags"]["vec_env"] == kind
    assert "--vec-env shmem" in (out / "results.md").read_text()


@pytest.mark.slow
def test_benchmark_refuses_unknown_backend(tmp_path):
    proc = subprocess.run(
        [sys.executable, os.path.join(ROOT, "scripts", "benchmark.py"), "--suite", "classic",
         "--vec-env", "gpu", "--out", str(tmp_path / "b")], capture_output=True, text=True)
    assert proc.returncode == 2 and "--vec-env" in proc.stderr and "shmem" in proc.stderr
    assert not (tmp_path / "b").exists()


@pytest.mark.slow
def test_flags_after_dashes_change_every_run(tmp_path):
    """``-- <main.py flags>``: each run trains with them, the row and the commands name them, and
    the runs lie apart from the recipe's own (``--reuse`` reads them back, not the recipe's); the
    recipe runs beside them, and the variant's row gives P(variant > recipe)."""
    out = tmp_path / "bench"
    bench = [sys.executable, os.path.join(ROOT, "scripts", "benchmark.py"), "--suite", "classic",
             "--env", "CartPole-v1", "--seeds", "1", "--num-env-steps", "1024", "--jobs", "1",
             "--out", str(out), "--", "--ppo-epoch", "1", "--num-processes", "4"]
    proc = subprocess.run(bench, cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert proc.returncode == 0, proc.stderr
    row = "| CartPole-v1 | tuned --ppo-epoch 1 --num-processes 4 | 1,024 | 1 |"
    assert row in proc.stdout and row in (out / "results.md").read_text()
    assert "--ppo-epoch 1 --num-processes 4" in (out / "results.md").read_text().split("```bash")[1]
    assert "| last10: P(variant > recipe) [95% CI] |" in proc.stdout
    assert re.search(r"\| CartPole-v1 \| tuned \| 1,024 \| 1 \| \d+ \| \d+ \(one seed\) \| - \|",
                     proc.stdout), proc.stdout
    # one seed each: P is 1, 0.5 or 0, and so is its interval
    assert re.search(re.escape(row) + r" \d+ \| \d+ \(one seed\) \| (1\.00|0\.50|0\.00) \[\1, \1\] \|",
                     proc.stdout), proc.stdout
    [run] = [d for d in (out / "runs" / "CartPole-v1").iterdir() if d.name != "tuned"]
    assert re.fullmatch(r"tuned\+[0-9a-f]{8}", run.name)
    flags = json.loads(next(run.glob("seed1/logs/**/config.json")).read_text())["flags"]
    assert (flags["ppo_epoch"], flags["num_processes"], flags["num_steps"]) == (1, 4, 32)
    stamp = (run / "seed1" / "stdout.log").stat().st_mtime_ns
    reused = subprocess.run(bench[:-5] + ["--reuse", "--"] + bench[-4:], cwd=tmp_path,
                            capture_output=True, text=True, timeout=300)
    assert reused.returncode == 0 and row in reused.stdout
    assert (run / "seed1" / "stdout.log").stat().st_mtime_ns == stamp


@pytest.mark.parametrize("extra, names", [
    (["--seed", "3"], ["--seeds"]),
    (["--log-dir", "x", "--vec-env", "dummy"], ["--out", "--vec-env"]),
    (["--ppo-epoch", "x"], ["--ppo-epoch", "'x'"]),
    (["--bogus"], ["--bogus"]),
    (["--num-mini-batch", "1000"], ["--num-mini-batch"]),
])
@pytest.mark.slow
def test_bad_flags_after_dashes_get_one_line_and_start_nothing(tmp_path, extra, names):
    proc = subprocess.run(
        [sys.executable, os.path.join(ROOT, "scripts", "benchmark.py"), "--suite", "classic",
         "--env", "CartPole-v1", "--out", str(tmp_path / "b"), "--", *extra],
        capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert all(name in proc.stderr for name in names), proc.stderr
    assert not (tmp_path / "b").exists()
