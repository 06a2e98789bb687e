"""scripts/tune.py: its search specs and checks (quick, in this process), and studies of main.py
runs as a user runs them (slow): two processes sharing one SQLite study, a stop and a kill -9 of
one and the study continued."""
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

import space
import tune
from a2c_ppo_acktr.settings.arguments import get_args

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "tune.py"
# 4 updates of 256 steps: a run is mostly main.py's start-up
TINY = ["--", "--num-env-steps", "1024", "--num-processes", "4", "--num-steps", "64",
        "--num-mini-batch", "2", "--log-interval", "1"]


@pytest.mark.parametrize("argv, needle", [
    (["--search", "foo=log:1:2"], "--search foo=log:1:2: --foo is no flag of main.py"),
    (["--search", "lr=log:0:1"], "expected lr=log:LOW:HIGH (0 < LOW < HIGH)"),
    (["--search", "lr=float:2:1"], "expected lr=log:LOW:HIGH"),
    (["--search", "lr=uniform:1:2"], "expected lr=log:LOW:HIGH"),
    (["--search", "num-steps=int:1.5:8"], "expected num-steps=log:LOW:HIGH"),
    (["--search", "lr=choice:"], "--search lr=choice:: expected choice:A,B,..."),
    (["--search", "use-gae=choice:yes,no"], "of true and false (a switch)"),
    (["--search", "seed=int:1:9"], "tune.py sets --seed for each run"),
    (["--search", "lr=log:1e-4:1e-2", "lr=float:0.1:0.2"], "--search names --lr twice"),
    (["--search", "clip-param=float:-1:0.5"], "--clip-param must be positive"),
    (["--search", "num-mini-batch=choice:1,100000"], "must be at least --num-mini-batch (100000)"),
    (["--search", "lr=log:1e-4:1e-2", "--", "--seed", "3"], "--seed: tune.py sets it for each run "
     "(with its --seeds)"),
    (["--search", "lr=log:1e-4:1e-2", "--", "--lr", "1e-3"], "--lr is searched"),
    (["--search", "lr=log:1e-4:1e-2", "--", "--bogus"], "unrecognized arguments: --bogus"),
    (["--algo", "acktr"], "--algo acktr has no default space"),
    (["--search", "lr=log:1e-4:1e-2", "--storage", "bogus://x"], "--storage bogus://x: "),
    (["--search", "lr=log:1e-4:1e-2", "--storage", "sqlite:////no/such/dir/x.db"],
     "unable to open database file"),
    (["--n-trials", "0"], "--n-trials must be a positive integer below 2**63, got 0"),
    (["--n-trials", "-1"], "--n-trials must be a positive integer below 2**63, got -1"),
    (["--out", "/proc/version/runs"], "--out /proc/version/runs: /proc/version is a file"),
    (["--best-config", "/proc/version/best.json"], "--best-config /proc/version: /proc/version is a file"),
    (["--best-config", "/"], "--best-config / is a directory: give a file's path"),
    (["--search", "lr=log:1e-4:1e-2", "--storage", "postgresql://me:s3cret@127.0.0.1:1/db"],
     "--storage postgresql://me:***@127.0.0.1:1/db: "),  # the password never shown
])
def test_bad_specs_storages_and_flags_are_one_line(tmp_path, monkeypatch, capsys, argv, needle):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as e:
        tune.main(["--env-name", "CartPole-v1", *argv])
    err = capsys.readouterr().err
    assert e.value.code == 2 and len(err.strip().splitlines()) == 1, err
    assert ": error: " in err and needle in err and "s3cret" not in err, err  # main.py's checks
    assert os.listdir(tmp_path) == []  # name the running script


@pytest.mark.parametrize("algo", ["ppo", "a2c"])
def test_the_zoos_spaces_are_main_pys_flags(algo):
    """Every value of the default space passes main.py's checks at a CartPole budget."""
    class P:
        def error(self, message):
            raise AssertionError(message)

    args = get_args(["--env-name", "CartPole-v1"])
    args.search, args.algo = [], algo
    specs, fixed = space.specs_of(P(), args, ["--num-env-steps", "100000"])
    assert "--use-gae" in fixed and {s.flag for s in specs} >= {"lr", "gamma", "num-steps"}


class FakeTrial:
    def suggest_float(self, name, low, high, log=False):
        return low * 1.0000001

    def suggest_int(self, name, low, high):
        return high

    def suggest_categorical(self, name, choices):
        return choices[-1]


def test_specs_suggest_main_py_arguments():
    actions = {o: a for a in tune.build_main_parser()._actions for o in a.option_strings}
    specs = [space.Spec(t, actions) for t in ["lr=log:1e-4:1e-2", "num-steps=int:8:64",
                                              "use-gae=choice:true,false",
                                              "recurrent-policy=choice:false,true"]]
    assert [s.argv(s.suggest(FakeTrial())) for s in specs] == [
        ["--lr", "0.0001"], ["--num-steps", "64"], [], ["--recurrent-policy"]]


def test_the_pruner_sees_the_mean_over_seeds_once_all_have_passed_a_step():
    seed1 = [(512, 10.0), (1024, 20.0), (1536, 30.0)]
    seed2 = [(512, 30.0), (1024, 40.0)]
    assert tune.curve_point([seed1, seed2], 1024) == 30.0
    assert tune.curve_point([seed1, seed2], 800) == 20.0  # each one's last row before
    assert tune.curve_point([seed1, seed2], 1200) is None  # seed 2 has not trained that far
    assert tune.curve_point([seed1, [(1024, 5.0)]], 600) is None  # no return logged before


def tune_cmd(tmp_path, *argv, tail=TINY):
    return [sys.executable, str(SCRIPT), "--env-name", "CartPole-v1", "--study-name", "s",
            "--search", "lr=log:1e-4:1e-2", "--out", str(tmp_path / "runs"), *argv, *tail]


def trial_states(db):
    with sqlite3.connect(db) as c:
        return dict(c.execute("select number, state from trials").fetchall())


def env(**extra):
    return {**os.environ, "OMP_NUM_THREADS": "1", **extra}


@pytest.mark.slow
def test_two_processes_share_one_study_and_each_trial_runs_once(tmp_path):
    procs = [subprocess.Popen(tune_cmd(tmp_path, "--n-trials", "3"), cwd=tmp_path, env=env(),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    outs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    states = trial_states(tmp_path / "s.db")
    # a process waits while the other's trial may end the study: 3 trials run, no more (one that
    # both began at the same moment as the last is not run: failed, and says so)
    ran = sorted(n for n, state in states.items() if state == "COMPLETE")
    assert len(ran) == 3 and all(states[n] == "FAIL" for n in set(states) - set(ran)), states
    lines = [line for out, _ in outs for line in out.splitlines() if line.startswith("trial ")]
    assert sorted(int(line.split()[1].rstrip(":")) for line in lines) == sorted(states)  # once each
    assert all("not run" in line for line in lines if int(line.split()[1].rstrip(":")) not in ran)
    assert sorted(p.name for p in (tmp_path / "runs" / "s").iterdir()) == [f"trial{n}" for n in ran]
    # the best flags: a main.py command and a --config file that main.py reads
    out = outs[0][0]
    assert "python main.py --env-name CartPole-v1 --algo ppo --num-env-steps 1024" in out
    assert " --log-dir logs/s\n" in out  # its own, not main.py's shared /tmp/gym
    flags = json.loads((tmp_path / "s_best.json").read_text())
    args = get_args(["--config", str(tmp_path / "s_best.json")])
    assert (args.env_name, args.num_env_steps, args.lr) == ("CartPole-v1", 1024, flags["lr"])
    # the study is done: the same command again runs nothing and says the best
    again = subprocess.run(tune_cmd(tmp_path, "--n-trials", "3"), cwd=tmp_path, env=env(),
                           capture_output=True, text=True, timeout=120)
    assert again.returncode == 0 and "trial " not in again.stdout.replace("best: trial", "")
    assert trial_states(tmp_path / "s.db") == states


def wait_for_run(tmp_path, trial):
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not list(
            (tmp_path / "runs" / "s" / f"trial{trial}").glob("seed1/logs/**/progress.csv")):
        time.sleep(0.2)


@pytest.mark.slow
def test_a_stopped_or_killed_process_loses_only_its_trial(tmp_path):
    long = ["--", "--num-env-steps", "1000000"] + TINY[3:]  # trials that run until stopped
    argv = tune_cmd(tmp_path, "--n-trials", "2", tail=long)
    stopped = subprocess.Popen(argv, cwd=tmp_path, env=env(), stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    wait_for_run(tmp_path, 0)
    stopped.send_signal(signal.SIGINT)  # to tune.py alone: it passes it on to its runs
    _, err = stopped.communicate(timeout=120)
    assert stopped.returncode == 130, err
    assert err.strip().splitlines()[-1] == ("tune.py: SIGINT: stopped, the running trial lost; 0 of "
                                            "2 trials finished; the same command continues the study")
    killed = subprocess.Popen(argv, cwd=tmp_path, env=env(), stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    wait_for_run(tmp_path, 1)
    killed.kill()
    killed.wait()
    assert trial_states(tmp_path / "s.db") == {0: "FAIL", 1: "RUNNING"}
    time.sleep(1)  # its run went with it
    assert not [p for p in Path("/proc").glob("[0-9]*/cmdline")
                if str(tmp_path / "runs" / "s" / "trial1") in p.read_text(errors="replace")]
    done = subprocess.run(tune_cmd(tmp_path, "--n-trials", "2"), cwd=tmp_path, env=env(),
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    # the killed process's trial is failed at once (its pid is gone); two more trials finish
    assert trial_states(tmp_path / "s.db") == {0: "FAIL", 1: "FAIL", 2: "COMPLETE", 3: "COMPLETE"}
