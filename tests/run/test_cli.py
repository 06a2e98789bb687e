"""What a new user hits (issue #12): main.py as it is run from a shell, and its one-line errors."""
import csv
import errno
import os
import pathlib
import re
import signal
import subprocess
import sys
import time

import pytest
import torch
from gymnasium import spaces

import main
from a2c_ppo_acktr.envs import get_vec_normalize
from a2c_ppo_acktr.run import build
from a2c_ppo_acktr.run.checkpoint import load_checkpoint, run_paths
from a2c_ppo_acktr.settings.arguments import get_args
from a2c_ppo_acktr.storage import RolloutStorage
from tests.run.test_interrupt import SIGINT_AT_GYMNASIUM

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TINY = ["--algo", "a2c", "--env-name", "CartPole-v1", "--num-processes", "2", "--num-steps", "8",
        "--vec-env", "dummy", "--log-interval", "1"]


def dirs(tmp_path):
    return ["--log-dir", str(tmp_path / "logs"), "--save-dir", str(tmp_path / "models")]


def cli(*argv, script="main.py", timeout=180):
    """Run a script of the repository as a user does; -> the finished process (text output)."""
    return subprocess.run([sys.executable, script, *argv], cwd=ROOT, capture_output=True,
                          text=True, timeout=timeout)


def one_error_line(err, needle):
    """``err`` is exactly one line, no traceback, holding ``needle``."""
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert needle in err, err


def expect_exit_2(capsys, argv, needle):
    with pytest.raises(SystemExit) as exc:
        main.main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    one_error_line(err, needle)
    return err


def rows(log_dir):
    with open(os.path.join(log_dir, "progress.csv")) as f:
        return list(csv.DictReader(f))


# 0. Runs of other algorithms, envs or seeds sit side by side in the same --log-dir / --save-dir.
@pytest.mark.slow
def test_runs_get_their_own_files_and_only_the_same_run_is_refused(tmp_path, capsys):
    logs, models = tmp_path / "logs", tmp_path / "models"
    a2c = TINY + ["--num-env-steps", "32"] + dirs(tmp_path)
    assert main.main(a2c) == 0
    assert (f"run files: log directory {logs}/a2c/CartPole-v1_seed1/, checkpoint "
            f"{models}/a2c/CartPole-v1_seed1.pt") in capsys.readouterr().out
    others = [["--algo", "ppo", "--num-mini-batch", "2"], ["--seed", "2"],
              ["--env-name", "Acrobot-v1"]]
    for other in others:
        assert main.main(a2c + other) == 0
    for run in ("a2c/CartPole-v1_seed1", "ppo/CartPole-v1_seed1", "a2c/CartPole-v1_seed2",
                "a2c/Acrobot-v1_seed1"):
        assert load_checkpoint(str(models / f"{run}.pt"))["env_steps"] == 32
        assert len(rows(logs / run)) == 2 and (logs / run / "0.monitor.csv").exists()
        assert not (logs / run / "eval").exists()  # no --eval-interval, no eval dir
    assert sorted(os.listdir(logs)) == ["a2c", "ppo"]  # nothing else at the top

    expect_exit_2(capsys, a2c, "a2c/CartPole-v1_seed1.pt already holds a run")
    old = models / "ppo/CartPole-v1.pt"  # as the original and earlier versions named it
    old.write_bytes(b"")
    expect_exit_2(capsys, a2c + others[0] + ["--seed", "3", "--resume"],
                  f"{old} is a run saved under the original's name: rename it to resume it")
    assert main.main(TINY + ["--num-env-steps", "64", "--resume"] + dirs(tmp_path)) == 0
    assert [int(r["timesteps"]) for r in rows(logs / "a2c/CartPole-v1_seed1")] == [16, 32, 48, 64]
    ppo = (models / "ppo/CartPole-v1_seed1.pt").read_bytes()
    assert main.main(a2c + ["--overwrite"]) == 0  # replaces this run, and this run only
    assert [int(r["timesteps"]) for r in rows(logs / "a2c/CartPole-v1_seed1")] == [16, 32]
    assert load_checkpoint(str(models / "a2c/CartPole-v1_seed1.pt"))["env_steps"] == 32
    assert (models / "ppo/CartPole-v1_seed1.pt").read_bytes() == ppo
    assert len(rows(logs / "a2c/CartPole-v1_seed2")) == 2


# 1. The original's defaults (16 envs x 5 steps, 32 minibatches) run as they did.
@pytest.mark.slow
def test_readme_ppo_command_with_original_defaults_runs(tmp_path):
    proc = cli("--algo", "ppo", "--env-name", "CartPole-v1", "--num-env-steps", "160",
               "--save-interval", "10", *dirs(tmp_path))
    assert proc.returncode == 0, proc.stderr
    one_error_line(proc.stderr, "main.py: warning: --num-processes * --num-steps (16 * 5 = 80) "
                   "is not a multiple of --num-mini-batch (32): each PPO epoch takes 40 "
                   "minibatches of 2 samples, as the original did")
    assert "training 160 steps: 2 updates of 80" in proc.stdout
    # as the original's BatchSampler(SubsetRandomSampler(range(80)), 80 // 32, drop_last=True)
    storage = RolloutStorage(5, 16, (4,), spaces.Discrete(2), 1)
    sizes = [len(b.obs) for b in storage.feed_forward_generator(torch.zeros(5, 16, 1), 32)]
    assert sizes == [2] * 40
    storage = RolloutStorage(7, 1, (4,), spaces.Discrete(2), 1)
    sizes = [len(b.obs) for b in storage.feed_forward_generator(torch.zeros(7, 1, 1), 2)]
    assert sizes == [3, 3]  # one sample left out, as the warning says


# 2. Observations that are not one array: Tuple and Discrete here, Dict below.
@pytest.mark.parametrize("env, space, size", [
    ("Blackjack-v1", "Tuple(Discrete(32), Discrete(11), Discrete(2))", 45),
    ("FrozenLake-v1", "Discrete(16)", 16)])
def test_tuple_and_discrete_observations_are_flattened(tmp_path, capsys, env, space, size):
    assert main.main(TINY + ["--env-name", env, "--num-env-steps", "32"] + dirs(tmp_path)) == 0
    out, err = capsys.readouterr()
    assert f"{env}: observations {space} flattened into vectors of {size}" in out and err == ""
    ckpt = load_checkpoint(str(tmp_path / f"models/a2c/{env}_seed1.pt"))
    assert ckpt["obs_shape"] == [size] and ckpt["env_steps"] == 32


@pytest.mark.slow
def test_module_env_id_with_dict_observations_and_no_render_mode(tmp_path):
    """``module:EnvId`` imports the module that registers the env; its Dict observations are
    flattened; its constructor takes no render_mode; enjoy.py plays the result."""
    env = "tests.toy_envs:DictObs-v0"
    proc = cli("--env-name", env, "--num-processes", "2", "--num-steps", "5",
               "--num-env-steps", "20", *dirs(tmp_path))
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    assert "flattened into vectors of 5" in proc.stdout
    proc = cli("--env-name", env, "--load-dir", str(tmp_path / "models"), "--episodes", "2",
               "--no-render", script="enjoy.py")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count("length 5") == 2


@pytest.mark.slow
@pytest.mark.parametrize("vec_env", ["dummy", "shmem"])
def test_module_env_id_from_the_working_directory(tmp_path, vec_env):
    """Issue #52: ``mymod:Env-v0`` with mymod.py in the working directory, main.py run by path
    (so its own directory, not the working one, is on sys.path); the env workers import it too."""
    (tmp_path / "mymod52.py").write_text(
        "import gymnasium as gym\n"
        "gym.register('MyCartPole-v0', entry_point='gymnasium.envs.classic_control:CartPoleEnv',"
        " max_episode_steps=20)\n")
    proc = subprocess.run(
        [sys.executable, os.path.join(ROOT, "main.py"), *TINY, "--env-name",
         "mymod52:MyCartPole-v0", "--num-env-steps", "32", "--vec-env", vec_env,
         "--log-dir", "logs", "--save-dir", "models"],
        cwd=tmp_path, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "models" / "a2c" / "MyCartPole-v0_seed1.pt").exists()


def test_env_without_render_mode_cannot_be_recorded_in_one_line(tmp_path, capsys):
    import enjoy

    env = "tests.toy_envs:DictObs-v0"
    assert main.main(TINY + ["--env-name", env, "--num-steps", "5", "--num-env-steps", "10"]
                     + dirs(tmp_path)) == 0
    capsys.readouterr()
    with pytest.raises(SystemExit) as exc:
        enjoy.main(["--env-name", env, "--load-dir", str(tmp_path / "models"),
                    "--record", str(tmp_path / "x.gif")])
    assert exc.value.code == 2
    one_error_line(capsys.readouterr().err,
                   f"enjoy.py: error: {env} cannot render: its constructor takes no render_mode")


# 2, 5. Failing inputs leave nothing behind; a failure after creation removes what it created.
def test_failed_start_leaves_nothing_behind(tmp_path, capsys):
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "notes.txt").write_text("someone else's")  # kept
    argv = TINY + ["--num-env-steps", "32", "--eval-interval", "1"] + dirs(tmp_path)
    expect_exit_2(capsys, [a if a != "CartPole-v1" else "CartPole-v9" for a in argv],
                  "unknown env id 'CartPole-v9'")
    expect_exit_2(capsys, argv + ["--env-name", "tests.toy_envs:TextObs-v0"],
                  "has observations Text(1, 8, ")
    expect_exit_2(capsys, argv + ["--env-name", "no_such_module:Env-v0"],
                  "cannot import 'no_such_module'")
    with pytest.raises(SystemExit) as exc:  # the env's traceback, then one line (issue #72)
        main.main(argv + ["--env-name", "tests.toy_envs:Broken-v0"])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and err.count("Traceback") == 1
    assert err.splitlines()[-1].endswith(": error: env 0 (tests.toy_envs:Broken-v0) failed to "
                                         "build: RuntimeError: simulated constructor failure "
                                         "(its traceback above)")
    assert sorted(os.listdir(tmp_path)) == ["logs"]
    assert os.listdir(tmp_path / "logs") == ["notes.txt"]


# 3. Directories that cannot hold the run are refused before any env is made.
@pytest.mark.parametrize("case", ["save-dir is a file", "save-dir under a file",
                                  "log-dir is a file", "log-dir not writable"])
def test_unusable_directories_are_refused_first(tmp_path, capsys, monkeypatch, case):
    import a2c_ppo_acktr.run.build

    def no_envs(*args, **kwargs):
        raise AssertionError("an env was made")

    monkeypatch.setattr(a2c_ppo_acktr.run.build, "make_vec_envs", no_envs)
    afile = tmp_path / "afile"
    afile.write_text("")
    logs, models = tmp_path / "logs", tmp_path / "models"
    flag, path, needle = {
        "save-dir is a file": ("--save-dir", afile, f"{afile} is a file, not a directory"),
        "save-dir under a file": ("--save-dir", afile / "models", f"{afile} is a file"),
        "log-dir is a file": ("--log-dir", afile, f"{afile} is a file, not a directory"),
        # /proc takes no files, even from root (whom os.access lets write anywhere)
        "log-dir not writable": ("--log-dir", "/proc/logs", "/proc is not writable ("),
    }[case]
    argv = TINY + ["--log-dir", str(logs), "--save-dir", str(models), flag, str(path)]
    assert needle in expect_exit_2(capsys, argv, f"{flag} cannot hold the run's files at ")
    assert sorted(os.listdir(tmp_path)) == ["afile"]


def stopped_by_a_full_disk(tmp_path, capsys):
    """Run TINY, saving at each update, to its failure; -> (stderr, the checkpoint's path)."""
    assert main.main(TINY + ["--num-env-steps", "160", "--save-interval", "1"]
                     + dirs(tmp_path)) == 1
    return capsys.readouterr().err, tmp_path / "models/a2c/CartPole-v1_seed1.pt"


def test_failed_save_stops_the_run_and_keeps_the_previous_checkpoint(tmp_path, capsys,
                                                                     monkeypatch):
    save, saves = torch.save, []

    def disk_full_at_the_third(obj, f, *args, **kwargs):
        saves.append(1)
        if len(saves) == 3:
            f.write(b"half")
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return save(obj, f, *args, **kwargs)

    monkeypatch.setattr(torch, "save", disk_full_at_the_third)
    err, path = stopped_by_a_full_disk(tmp_path, capsys)
    one_error_line(err,
                   f"error: cannot write {path}: No space left on device; stopped at 48 steps, "
                   f"keeping the last saved checkpoint {path} (32 steps): --resume continues it")
    monkeypatch.undo()
    assert load_checkpoint(str(path))["env_steps"] == 32
    assert os.listdir(path.parent) == [path.name]  # no temporary left


def test_failed_first_save_undoes_the_run(tmp_path, capsys, monkeypatch):
    """Nothing to --resume: the run's files go, so the same command starts it again."""
    def disk_full(obj, f, *args, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(torch, "save", disk_full)
    err, path = stopped_by_a_full_disk(tmp_path, capsys)
    one_error_line(err, f"error: cannot write {path}: No space left on device; stopped at 16 "
                   "steps, nothing saved yet, so the run's files are removed: it can start again")
    assert os.listdir(tmp_path) == []


def test_full_disk_while_logging_stops_in_one_line(tmp_path, capsys, monkeypatch):
    """A log that cannot be written stops the run as a failed save does (issue #52)."""
    from a2c_ppo_acktr.run.logger import ScalarLogger

    def disk_full(self, row, step):
        if row["update"] == 2:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(ScalarLogger, "_log", disk_full)
    err, path = stopped_by_a_full_disk(tmp_path, capsys)
    one_error_line(err,
                   f"error: cannot write {tmp_path}/logs/a2c/CartPole-v1_seed1/progress.csv: No "
                   f"space left on device; stopped, keeping the last saved checkpoint {path} (48 "
                   "steps): --resume continues it")


# 4. Ctrl-C / SIGTERM: the update finishes, the checkpoint is saved, one line, 130 / 143.
def signal_run(tmp_path, argv, signum, group=False, updates=3, launcher=(sys.executable,),
               env=None):
    """Start main.py ``argv`` (with ``env``'s variables too), send ``signum`` once ``updates``
    updates are logged (to its whole process group, as Slurm, systemd and job control do, with
    ``group``); -> (status, stderr)."""
    argv = argv + dirs(tmp_path)
    proc = subprocess.Popen([*launcher, "main.py", *argv], cwd=ROOT, start_new_session=group,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, **(env or {})})
    progress = pathlib.Path(run_paths(get_args(argv)).log_dir, "progress.csv")
    deadline = time.time() + 180
    while time.time() < deadline and proc.poll() is None and (
            not progress.exists() or len(progress.read_text().splitlines()) <= updates):
        time.sleep(0.05)
    if group:
        os.killpg(proc.pid, signum)
    else:
        proc.send_signal(signum)
    _, err = proc.communicate(timeout=120)
    if group:  # no worker, forkserver or Ray process of the run is left
        deadline = time.time() + 20
        while time.time() < deadline and group_alive(proc.pid):
            time.sleep(0.1)
        assert not group_alive(proc.pid)
    return proc.returncode, err


def group_alive(pgid):
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def assert_saved(err, min_steps):
    """``err`` is the two lines of a run that saved on a signal (the signal acknowledged at once,
    then what was saved); its checkpoint holds its steps."""
    assert len(err.strip().splitlines()) == 2 and "Traceback" not in err, err
    steps, path = re.fullmatch(
        r"main\.py: SIG(INT|TERM|HUP): stopping after this update; again to stop now\n"
        r"interrupted at ([\d,]+) steps; saved (\S+); --resume to continue\n", err).groups()[1:]
    ckpt = torch.load(path, weights_only=True)
    assert ckpt["env_steps"] == int(steps.replace(",", "")) >= min_steps
    assert not [f for f in os.listdir(os.path.dirname(path)) if ".tmp-" in f]


@pytest.mark.slow
@pytest.mark.parametrize("signum, extra", [(signal.SIGINT, []), (signal.SIGTERM, []),
                                           (signal.SIGINT, ["--async-rollouts"])])
def test_interrupt_saves_and_says_so_in_one_line(tmp_path, signum, extra):
    argv = TINY + ["--num-env-steps", "10000000", "--save-interval", "100000"] + extra
    status, err = signal_run(tmp_path, argv, signum)
    assert status == 128 + signum, err
    assert_saved(err, 48)


# A scheduler's SIGTERM reaches every process of the group: the shmem workers and their
# forkserver, ALE's threads, the sampler thread's envs leave it to main.py, which saves.
@pytest.mark.slow
@pytest.mark.parametrize("extra", [
    ["--vec-env", "shmem"],
    ["--vec-env", "ale", "--env-name", "PongNoFrameskip-v4"],
    ["--vec-env", "shmem", "--async-rollouts"]], ids=["shmem", "ale", "async-shmem"])
def test_sigterm_to_the_process_group_saves_on_every_backend(tmp_path, extra):
    argv = TINY + ["--num-env-steps", "10000000", "--save-interval", "100000"] + extra
    status, err = signal_run(tmp_path, argv, signal.SIGTERM, group=True, updates=2)
    assert status == 143, err
    assert_saved(err, 32)


def caught_signals(pid):
    """The signals process ``pid`` has handlers for (Linux)."""
    with open(f"/proc/{pid}/status") as f:
        mask = int(next(line for line in f if line.startswith("SigCgt:")).split()[1], 16)
    return {s for s in signal.Signals if mask >> (s - 1) & 1}


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="reads /proc")
def test_signal_while_importing_exits_in_one_line_leaving_nothing(tmp_path):
    proc = subprocess.Popen([sys.executable, "main.py", *TINY, *dirs(tmp_path)], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    # Once main.py handles SIGTERM (Python itself handles SIGINT only), it is importing torch,
    # gymnasium, ... for a second or more; before that a signal is Python's own affair.
    deadline = time.time() + 60
    while signal.SIGTERM not in caught_signals(proc.pid) and time.time() < deadline:
        time.sleep(0.01)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    one_error_line(err, ": SIGINT while starting: stopped before training, nothing saved")
    assert os.listdir(tmp_path) == []


def test_signal_while_the_package_imports_gymnasium_exits_in_one_line(tmp_path):
    """Issue #52: main.py's signal set-up imports the package, which imports gymnasium; a SIGINT
    then was a KeyboardInterrupt traceback. Here it comes at that import's first line."""
    proc = subprocess.run([sys.executable, "-c", SIGINT_AT_GYMNASIUM, "main.py", *TINY,
                           *dirs(tmp_path)], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 130, proc.stderr
    one_error_line(proc.stderr, "main.py: SIGINT while starting: stopped before training")
    assert os.listdir(tmp_path) == []


@pytest.mark.slow
def test_signal_while_building_undoes_the_run_in_one_line(tmp_path, capsys, monkeypatch):
    """SIGTERM once the run's directories and envs are made: they are removed and closed."""
    make, built = build.build_collector, []

    def build_then_sigterm(*args, **kwargs):
        built.append(make(*args, **kwargs))
        os.kill(os.getpid(), signal.SIGTERM)  # to StopRequest's handler: a request, not an end
        return built[-1]

    monkeypatch.setattr(build, "build_collector", build_then_sigterm)
    assert main.main(TINY + ["--vec-env", "shmem"] + dirs(tmp_path)) == 143
    ack, line = capsys.readouterr().err.splitlines()
    assert ack.endswith(": SIGTERM: stopping; again to stop now")
    assert line.endswith(": SIGTERM while starting: stopped before training, nothing saved")
    assert os.listdir(tmp_path) == [] and get_vec_normalize(built[0].envs).venv.closed


# 6. Temporaries of a killed save are removed at the next start, this run's only.
def test_start_up_removes_this_runs_stale_temporaries(tmp_path, capsys):
    models = tmp_path / "models" / "a2c"
    models.mkdir(parents=True)
    mine, other = models / ".CartPole-v1_seed1.pt.tmp-k9x2", models / ".Acrobot-v1_seed1.pt.tmp-a1"
    mine.write_bytes(b"half")
    other.write_bytes(b"half")
    assert main.main(TINY + ["--num-env-steps", "16"] + dirs(tmp_path)) == 0
    assert f"removed {mine}, left by a save that was killed" in capsys.readouterr().out
    assert sorted(os.listdir(models)) == [other.name, "CartPole-v1_seed1.pt"]


# 8. Small frictions: totals, the end, empty episode statistics, --help, mistyped flags.
def test_run_says_its_total_and_where_it_saved_and_logs_no_nan(tmp_path, capsys):
    argv = TINY + ["--num-steps", "5", "--num-env-steps", "50"] + dirs(tmp_path)
    assert main.main(argv) == 0
    out = capsys.readouterr().out
    assert ("training 50 steps: 5 updates of 10" in out
            and "done: 50 steps; checkpoint " in out)
    # 5 steps in: no episode has ended yet; said, not logged as NaN
    assert " No training episode has ended yet" in out and "nan" not in out
    first = rows(tmp_path / "logs/a2c/CartPole-v1_seed1")[0]
    assert first["timesteps"] == "10" and first["mean_return"] == first["max_return"] == ""
    assert main.main(argv + ["--num-env-steps", "105", "--resume"]) == 0
    out = capsys.readouterr().out
    assert ("training 100 steps: 10 updates of 10 (--num-env-steps 105 rounded down to whole "
            "updates), resumed after 50" in out)


def test_help_and_mistyped_flags(capsys):
    with pytest.raises(SystemExit) as exc:
        main.main(["--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert "A2C, PPO, ACKTR and GAIL" in out and "--algo {a2c,ppo,acktr}" in out
    # the recipes and the envs they exist for; that the command line wins; --resume's forms
    flat = " ".join(out.split())
    assert "--recipe {original,tuned,a2c,acktr,fast}" in flat
    assert "flags given on the command line win" in flat
    assert "HalfCheetah-v5" in flat and "PongNoFrameskip-v4" in flat
    assert "--resume [RUN]" in flat and "--lr-decay-horizon STEPS" in flat
    expect_exit_2(capsys, ["--lrr", "3"], "error: unrecognized arguments: --lrr 3 (see --help)")
    expect_exit_2(capsys, ["--lr", "fast"], "argument --lr: invalid float value: 'fast'")


# 9. A CPU run never calls into CUDA.
@pytest.mark.slow
def test_cpu_run_never_touches_cuda(tmp_path):
    """torch.cuda's entry points raise; a --no-cuda run trains anyway. (torch.manual_seed queues
    the CUDA seed lazily through manual_seed_all: that call alone is allowed.)"""
    script = f"""
import inspect, os, sys
import torch
def forbidden(name):
    def call(*args, **kwargs):
        caller = inspect.stack()[1].filename
        if name == "manual_seed_all" and caller.endswith(os.path.join("torch", "random.py")):
            return None
        raise AssertionError("torch.cuda." + name + " called from " + caller)
    return call
for name in ("is_available", "init", "_lazy_init", "device_count", "current_device",
             "set_device", "manual_seed", "manual_seed_all", "get_device_properties",
             "synchronize", "empty_cache"):
    setattr(torch.cuda, name, forbidden(name))
import main
rc = main.main({TINY + ["--num-env-steps", "32", "--no-cuda"] + dirs(tmp_path)!r})
print("visible", repr(os.environ["CUDA_VISIBLE_DEVICES"]))
sys.exit(rc)
"""
    proc = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True,
                          text=True, timeout=180)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    assert "visible ''" in proc.stdout  # nor can torch's optimizers, nor the env workers


# 10. The flags: the original's all kept, every new one explained by its --help text.
ORIGINAL_FLAGS = {  # pytorch-a2c-ppo-acktr-gail's a2c_ppo_acktr/arguments.py
    "--algo", "--gail", "--gail-experts-dir", "--gail-batch-size", "--gail-epoch", "--lr", "--eps",
    "--alpha", "--gamma", "--use-gae", "--gae-lambda", "--entropy-coef", "--value-loss-coef",
    "--max-grad-norm", "--seed", "--cuda-deterministic", "--num-processes", "--num-steps",
    "--ppo-epoch", "--num-mini-batch", "--clip-param", "--log-interval", "--save-interval",
    "--eval-interval", "--num-env-steps", "--env-name", "--log-dir", "--save-dir", "--no-cuda",
    "--use-proper-time-limits", "--recurrent-policy", "--use-linear-lr-decay"}


def test_original_flags_kept_and_new_flags_explained():
    from a2c_ppo_acktr.settings.arguments import build_parser

    actions = {o: a for a in build_parser()._actions for o in a.option_strings if o.startswith("--")}
    assert ORIGINAL_FLAGS <= set(actions), sorted(ORIGINAL_FLAGS - set(actions))
    unexplained = sorted(f for f, a in actions.items() if len((a.help or "").split()) < 3)
    assert not unexplained, f"flags without a --help text: {unexplained}"
