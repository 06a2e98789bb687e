"""Limits of the machine and the entry points' inputs (issue #72 item 6): each is one line, exit
status 2 for bad input, 1 for a failure mid-run; and the noise of a run gone."""
import errno
import os
import resource
import subprocess
import sys
import time
import warnings

import benchmark
import gymnasium as gym
import numpy as np
import plot
import pytest
import stable_baselines3.common.monitor as sb3_monitor

import main
from a2c_ppo_acktr.algo import A2C_ACKTR
from a2c_ppo_acktr.envs.normalize import RunningMeanStd
from a2c_ppo_acktr.run import build
from a2c_ppo_acktr.run.logger import ScalarLogger
from gail_experts import generate

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TINY = ["--algo", "a2c", "--env-name", "CartPole-v1", "--num-processes", "2", "--num-steps", "8",
        "--vec-env", "dummy", "--num-env-steps", "64"]


def one_line(capsys, call, status, needle):
    """``call()`` exits (or returns) ``status`` with one line on stderr holding ``needle``."""
    try:
        got = call()
    except SystemExit as e:
        got = e.code
    err = capsys.readouterr().err
    assert got == status and len(err.splitlines()) == 1 and needle in err, err
    return err


def dirs(tmp_path):
    return ["--log-dir", str(tmp_path / "logs"), "--save-dir", str(tmp_path / "models")]


def test_a_symlink_loop_and_a_path_past_the_systems_limit_are_named(tmp_path, capsys):
    os.symlink(tmp_path / "loop", tmp_path / "loop")
    one_line(capsys, lambda: main.main(TINY + ["--log-dir", str(tmp_path / "loop" / "x")]), 2,
             f"{tmp_path}/loop is a symbolic link loop")
    deep = str(tmp_path / ("a/" * 2100))  # 4,200 characters: a RecursionError in makedirs
    one_line(capsys, lambda: main.main(TINY + ["--log-dir", deep]), 2,
             "--log-dir cannot hold the run's files at ")
    assert os.listdir(tmp_path) == ["loop"]


def emfile(*args, **kwargs):
    raise OSError(errno.EMFILE, os.strerror(errno.EMFILE))


def test_too_many_open_files_is_one_line_at_start_and_mid_run(tmp_path, capsys, monkeypatch):
    limit = f"this process may open {resource.getrlimit(resource.RLIMIT_NOFILE)[0]:,}, ulimit -n"
    with monkeypatch.context() as m:
        m.setattr(build, "build_collector", emfile)  # the envs' pipes of --vec-env shmem
        one_line(capsys, lambda: main.main(TINY + dirs(tmp_path)), 2,
                 f"error: too many open files (Too many open files; {limit}): raise the limit")
    assert os.listdir(tmp_path) == []
    monkeypatch.setattr(ScalarLogger, "_log", emfile)
    one_line(capsys, lambda: main.main(TINY + ["--log-interval", "1"] + dirs(tmp_path)), 1,
             "progress.csv: Too many open files; stopped, keeping the last saved checkpoint")


@pytest.mark.slow
def test_ulimit_n_below_shmems_workers_is_one_line_and_leaves_nothing(tmp_path):
    """Issue #85: at ``ulimit -n 16`` the forkserver printed a traceback before the line, and a
    worker started before the limit wrote its monitor files after the start was undone."""
    def limit():
        resource.setrlimit(resource.RLIMIT_NOFILE, (16, 16))
    argv = TINY[:-4] + ["--num-processes", "16", "--vec-env", "shmem", "--num-env-steps", "128"] + dirs(
        tmp_path)
    proc = subprocess.run([sys.executable, "main.py", *argv], cwd=ROOT, capture_output=True,
                          text=True, timeout=120, preexec_fn=limit)
    assert proc.returncode == 2 and len(proc.stderr.splitlines()) == 1, proc.stderr
    assert proc.stderr.startswith("main.py: error: too many open files (") and \
        "ShmemVecEnv workers need about" in proc.stderr
    time.sleep(1)  # a worker left running would write its monitor files by now
    assert os.listdir(tmp_path) == []


def test_memory_running_out_mid_run_is_one_line_keeping_the_checkpoint(tmp_path, capsys,
                                                                      monkeypatch):
    update, calls = A2C_ACKTR.update, []

    def out_of_memory_at_the_third(self, rollouts):
        calls.append(1)
        if len(calls) == 3:  # as the optimizer's state is first made (ulimit -v)
            raise RuntimeError("[enforce fail at alloc_cpu.cpp:117] data. DefaultCPUAllocator: "
                               "can't allocate memory: you tried to allocate 2000000000 bytes.")
        return update(self, rollouts)

    monkeypatch.setattr(A2C_ACKTR, "update", out_of_memory_at_the_third)
    err = one_line(capsys, lambda: main.main(TINY + ["--save-interval", "1"] + dirs(tmp_path)), 1,
                   "error: cannot allocate 2.0 GB (this machine's memory, or ulimit -v); "
                   "stopped, keeping the last saved checkpoint")
    assert "(32 steps)" in err


@pytest.mark.slow
def test_a_memory_limit_below_torchs_libraries_is_one_line():
    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (300 << 20, resource.RLIM_INFINITY))
    proc = subprocess.run([sys.executable, "main.py", "--help"], cwd=ROOT, capture_output=True,
                          text=True, timeout=120, preexec_fn=limit)
    assert proc.returncode == 1
    assert len(proc.stderr.splitlines()) == 1 and proc.stderr.startswith(
        "main.py: error: out of memory (") and "raise its limit (ulimit -v)" in proc.stderr


@pytest.mark.slow
@pytest.mark.parametrize("kib", [900_000, 1_000_000])
def test_a_memory_limit_near_the_imports_needs_is_one_line_before_them(tmp_path, kib):
    """Issue #85: from about 0.9 to 1.0 GB OpenCV's import crashed (SIGSEGV, exit 139, no line);
    near it CPython's imports failed with a SystemError traceback, or a thread could not start."""
    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (kib << 10, resource.RLIM_INFINITY))
    proc = subprocess.run([sys.executable, "main.py", *TINY, *dirs(tmp_path)], cwd=ROOT,
                          capture_output=True, text=True, timeout=120, preexec_fn=limit)
    assert proc.returncode == 1 and proc.stderr == (
        f"main.py: error: out of memory (ulimit -v is {kib:,} KiB, below the 1,048,576 KiB that "
        "torch and the envs' libraries take); this process may not use what it needs: raise its "
        "limit (ulimit -v)\n")
    assert os.listdir(tmp_path) == []


@pytest.mark.slow
def test_a_plain_run_does_not_import_opencv(tmp_path):
    code = ("import sys, main\nmain.main(sys.argv[1:])\n"
            "print('cv2' in sys.modules, 'stable_baselines3' in sys.modules)")
    proc = subprocess.run([sys.executable, "-c", code, *TINY, *dirs(tmp_path)], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert proc.stdout.splitlines()[-1] == "False True", proc.stderr


def full_monitor_files(monkeypatch):
    """Every file SB3's monitor opens is /dev/full: its first flush raises ENOSPC."""
    def full(path, *args, **kwargs):
        return open("/dev/full", *args, **kwargs)
    monkeypatch.setattr(sb3_monitor, "open", full, raising=False)


@pytest.mark.parametrize("vec_env", ["dummy", "native"])
def test_a_full_disk_as_the_envs_are_built_is_one_line(tmp_path, capsys, monkeypatch, vec_env):
    """Issue #85: the monitor file that a full disk refused was the env's traceback, then the
    line; an env's own failure to build keeps its traceback (test_env_faults.py)."""
    full_monitor_files(monkeypatch)
    argv = TINY[:-3] + [vec_env, "--num-env-steps", "64"] + dirs(tmp_path)
    one_line(capsys, lambda: main.main(argv), 2, "No space left on device")
    assert os.listdir(tmp_path) == []


def test_entry_points_refuse_where_they_cannot_write_before_any_work(tmp_path, capsys):
    a_file = tmp_path / "a_file"
    a_file.write_text("")
    one_line(capsys, lambda: plot.main(["--run", f"a={tmp_path}", "--out", str(tmp_path / "p.xyz")]),
             2, "plot.py: error: --out ")
    one_line(capsys, lambda: plot.main(["--run", f"a={tmp_path}", "--out-dir", str(a_file)]), 2,
             f"plot.py: error: --out-dir {a_file}: {a_file} is a file, not a directory")
    one_line(capsys, lambda: benchmark.main(["--suite", "classic", "--env", "CartPole-v1", "--out",
                                             str(a_file)]), 2, "is a file, not a directory")
    one_line(capsys, lambda: generate.get_args(["--env-name", "CartPole-v1", "--load-dir",
                                                str(tmp_path), "--out-dir", str(a_file)]), 2,
             f"generate.py: error: --out-dir {a_file}: {a_file} is a file, not a directory")


@pytest.mark.slow
def test_curves_py_run_as_a_script_says_it_is_a_module():
    proc = subprocess.run([sys.executable, "scripts/curves.py"], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 2 and "curves.py is a module" in proc.stderr
    assert "python scripts/plot.py" in proc.stderr


def test_no_numpy_warnings_from_an_envs_nan_and_no_colour_codes_in_a_file():
    rms = RunningMeanStd(shape=(3,))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("default")
        warnings.filterwarnings("ignore", category=RuntimeWarning,
                                module="a2c_ppo_acktr.envs.normalize")  # as its import sets it
        rms.update(np.array([[np.inf, np.nan, 1.0], [1.0, 2.0, 3.0]]))
        gym.logger.warn("a warning of gymnasium")
    assert [str(w.message) for w in caught] == ["WARN: a warning of gymnasium"]  # no "\x1b[33m"


@pytest.mark.slow
def test_the_normalizers_filter_is_set_by_its_import():
    # In a fresh process: pytest restores the warning filters after each test, so the filter set
    # by an import during another test is gone here.
    code = ("import warnings, a2c_ppo_acktr.envs.normalize\n"
            "print(any(f[0] == 'ignore' and f[2] is RuntimeWarning and f[3] is not None and "
            "f[3].pattern == 'a2c_ppo_acktr.envs.normalize' for f in warnings.filters))")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert proc.stdout.strip() == "True", proc.stderr


def test_a_config_runs_recipe_line_says_what_the_recipe_left(tmp_path, capsys):
    first = ["--algo", "ppo", "--env-name", "CartPole-v1", "--recipe", "original",
             "--num-env-steps", "256", "--ppo-epoch", "1"] + dirs(tmp_path)
    assert main.main(first) == 0
    config = tmp_path / "logs" / "ppo" / "CartPole-v1_seed1" / "config.json"
    capsys.readouterr()
    assert main.main(["--config", str(config), "--seed", "2"]) == 0
    out = capsys.readouterr().out
    assert "recipe original for CartPole-v1: nothing more: --config gives its flags" in out
    assert "run files: log directory " in out and "logs logs" not in out
