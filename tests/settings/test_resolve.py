"""settings/resolve.py: the configuration saved with a run (config.json, the checkpoint) and --resume
restoring it: the saved flags come back, a changed flag is refused, the lr horizon is kept."""
import csv
import json
import os
import re
import shutil
import subprocess

import pytest
import torch

import main
from a2c_ppo_acktr.run.checkpoint import load_checkpoint, run_paths
from a2c_ppo_acktr.settings import resolve
from a2c_ppo_acktr.settings.arguments import get_args

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# CartPole PPO, 2 updates of 2 envs x 16 steps, with settings that differ from main.py's defaults
# (so that a resumed run on the defaults would show it).
PPO = ["--algo", "ppo", "--env-name", "CartPole-v1", "--num-processes", "2", "--num-steps", "16",
       "--num-mini-batch", "2", "--ppo-epoch", "3", "--lr", "1e-3", "--gamma", "0.98",
       "--use-gae", "--use-linear-lr-decay", "--vec-env", "dummy", "--log-interval", "1",
       "--num-env-steps", "64"]


def dirs(tmp_path):
    return ["--log-dir", str(tmp_path / "logs"), "--save-dir", str(tmp_path / "models")]


def progress(log_dir):
    with open(os.path.join(log_dir, "progress.csv")) as f:
        return [(int(r["timesteps"]), float(r["lr"])) for r in csv.DictReader(f)]


def files(tmp_path):
    """Every file under ``tmp_path`` with its bytes: what a refused start must leave as it was."""
    return {p: open(os.path.join(d, p), "rb").read() for d, _, names in os.walk(tmp_path)
            for p in names}


def one_error_line(capsys, argv, needle):
    with pytest.raises(SystemExit) as exc:
        main.main(argv)
    err = capsys.readouterr().err
    assert exc.value.code == 2 and len(err.strip().splitlines()) == 1, err
    assert needle in err and "Traceback" not in err, err
    return err


@pytest.fixture
def run(tmp_path):
    """A finished 2-update run -> its RunPaths."""
    argv = PPO + dirs(tmp_path)
    assert main.main(argv) == 0
    return run_paths(get_args(argv))


def test_config_json_holds_the_flags_recipe_versions_and_commit(run, tmp_path):
    with open(os.path.join(run.log_dir, "config.json")) as f:
        saved = json.load(f)
    args = get_args(PPO + dirs(tmp_path) + ["--overwrite"])
    flags = saved["flags"]
    assert {k: flags[k] for k in ("algo", "lr", "gamma", "num_steps", "use_gae", "recipe")} == {
        "algo": "ppo", "lr": 1e-3, "gamma": 0.98, "num_steps": 16, "use_gae": True, "recipe": None}
    assert flags["log_dir"] == str(tmp_path / "logs")  # absolute: --resume works from anywhere
    assert flags["lr_decay_horizon"] == 64  # the run's --num-env-steps when it started
    assert set(flags) == set(vars(args)) - {"resume", "overwrite", "config_file", "cuda", "warnings",
                                            "notes", "config"}
    for dest, value in flags.items():
        given = getattr(args, dest)
        if dest in ("log_dir", "save_dir", "gail_experts_dir"):
            given = os.path.abspath(given)
        if dest != "env_kwargs":  # parsed into a dict after the config is taken
            assert given == value, dest
    assert saved["versions"]["torch"] == torch.__version__
    assert set(saved["versions"]) == {"python", "torch", "gymnasium", "ale-py", "mujoco", "numpy"}
    try:
        head = subprocess.run(["git", "-C", ROOT, "rev-parse", "HEAD"], capture_output=True,
                              text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        head = None  # a copy outside git: the config says so with None
    assert saved["git"]["commit"] == head
    # The checkpoint holds the same, as plain values: load_checkpoint is weights_only=True.
    assert load_checkpoint(run.checkpoint)["config"] == saved


def test_git_commit_is_none_without_git(monkeypatch):
    monkeypatch.setenv("PATH", "")
    assert resolve.git_commit() == {"commit": None, "dirty": None}


def test_resume_run_dir_alone_continues_with_the_saved_flags(tmp_path, capsys, monkeypatch):
    """A run of 4 updates saved after 2 (its --save-history copy put back, as if stopped there):
    --resume RUN_DIR, nothing else, ends as the run did, flags and lr schedule included."""
    argv = PPO + dirs(tmp_path) + ["--num-env-steps", "128", "--save-history", "2"]
    assert main.main(argv) == 0
    paths = run_paths(get_args(argv))
    whole = progress(paths.log_dir)
    shutil.copy(os.path.join(paths.checkpoint[:-3] + "_history", "64.pt"), paths.checkpoint)
    with open(os.path.join(paths.log_dir, "progress.csv")) as f:  # its rows up to 64 steps
        kept = f.readlines()[:3]
    with open(os.path.join(paths.log_dir, "progress.csv"), "w") as f:
        f.writelines(kept)
    capsys.readouterr()

    monkeypatch.chdir(tmp_path)  # elsewhere than where it started: its directories are saved absolute
    assert main.main(["--resume", paths.log_dir]) == 0
    out = capsys.readouterr().out
    assert f"resume: with the flags saved in {paths.checkpoint}" in out
    assert "training 128 steps: 4 updates of 32, resumed after 64" in out
    resumed = progress(paths.log_dir)
    assert [s for s, _ in resumed] == [32, 64, 96, 128]
    # lr 1e-3 decayed linearly to 0 at 128 steps: the saved --lr and horizon, not the defaults
    assert [lr for _, lr in resumed] == pytest.approx([1e-3 * (1 - k / 4) for k in range(4)])
    assert [lr for _, lr in resumed] == [lr for _, lr in whole]
    ckpt = load_checkpoint(paths.checkpoint)
    assert ckpt["env_steps"] == 128 and ckpt["config"]["flags"]["gamma"] == 0.98


@pytest.mark.parametrize("form", ["run dir", "checkpoint", "full command"])
def test_a_changed_flag_is_refused_in_one_line_and_nothing_changes(run, tmp_path, capsys, form):
    before = files(tmp_path)
    resume = {"run dir": ["--resume", run.log_dir], "checkpoint": ["--resume", run.checkpoint],
              "full command": PPO + dirs(tmp_path) + ["--resume"]}[form]
    err = one_error_line(capsys, resume + ["--gamma", "0.9"],
                         f"--resume: --gamma 0.9 differs from the run's saved 0.98 ({run.checkpoint})")
    # the flags a resume may change, in --help's order (their declarations')
    assert re.search(r"may change only --cuda-deterministic, .*--num-env-steps, .*--wandb-entity, "
                     r"--env-timeout(, --[a-z-]+)*$", err.strip()), err
    one_error_line(capsys, ["--entropy-coef", "0.05"] + resume, "--entropy-coef 0.05 differs")
    one_error_line(capsys, resume + ["--recipe", "original"], "--recipe 'original' differs")
    assert files(tmp_path) == before


def test_extending_the_budget_keeps_the_lr_horizon(run, capsys):
    capsys.readouterr()
    assert main.main(["--resume", run.checkpoint, "--num-env-steps", "128", "--log-interval",
                      "1"]) == 0
    out = capsys.readouterr().out
    assert "resume: --num-env-steps 128 (saved 64): the run trains on to the new total" in out
    assert ("the learning rate keeps its linear decay to 0 at 64 steps (--lr-decay-horizon, "
            "saved); from there to 128 it stays 0") in out
    assert progress(run.log_dir)[2:] == [(96, 0.0), (128, 0.0)]
    saved = load_checkpoint(run.checkpoint)["config"]["flags"]
    assert (saved["num_env_steps"], saved["lr_decay_horizon"]) == (128, 64)
    # Asked for, a new horizon: from the steps done on, lr = 1e-3 * (1 - steps / 256).
    assert main.main(["--resume", run.log_dir, "--num-env-steps", "192",
                      "--lr-decay-horizon", "256"]) == 0
    assert "resume: --lr-decay-horizon 256 (saved 64)" in capsys.readouterr().out
    assert progress(run.log_dir)[4:] == [(160, pytest.approx(1e-3 * (1 - 128 / 256))),
                                         (192, pytest.approx(1e-3 * (1 - 160 / 256)))]


def test_checkpoint_without_config_resumes_with_the_full_command(run, tmp_path, capsys):
    """Checkpoints written before runs kept their flags: the full command and a bare --resume,
    as before; --resume PATH cannot know the flags and says so."""
    old = load_checkpoint(run.checkpoint)
    del old["config"]
    torch.save(old, run.checkpoint)
    os.remove(os.path.join(run.log_dir, "config.json"))
    one_error_line(capsys, ["--resume", run.checkpoint], "was saved before runs kept their flags")
    one_error_line(capsys, ["--resume", run.log_dir], "holds no config.json")
    capsys.readouterr()
    assert main.main(PPO + dirs(tmp_path) + ["--num-env-steps", "96", "--resume"]) == 0
    out = capsys.readouterr().out
    assert "holds no saved flags (written before runs kept them)" in out
    assert "resumed after 64" in out
    assert load_checkpoint(run.checkpoint)["config"]["flags"]["lr_decay_horizon"] == 96


def test_resume_of_nothing_is_one_line(tmp_path, capsys):
    one_error_line(capsys, ["--resume", str(tmp_path / "nowhere")],
                   f"--resume: no checkpoint or run directory at {tmp_path / 'nowhere'}")
    assert os.listdir(tmp_path) == []


def test_moved_run_needs_its_new_directories(run, tmp_path, capsys):
    moved = tmp_path / "moved"
    moved.mkdir()
    for name in ("logs", "models"):
        shutil.move(tmp_path / name, moved / name)
    log_dir = str(moved / "logs" / "ppo" / "CartPole-v1_seed1")
    one_error_line(capsys, ["--resume", log_dir], "give --log-dir and --save-dir if it was moved")
    capsys.readouterr()
    assert main.main(["--resume", log_dir, "--log-dir", str(moved / "logs"), "--save-dir",
                      str(moved / "models"), "--num-env-steps", "96"]) == 0
    assert "resume: --log-dir" in capsys.readouterr().out
    assert load_checkpoint(str(moved / "models/ppo/CartPole-v1_seed1.pt"))["env_steps"] == 96


def test_tensorboard_hparams_hold_the_config(run):
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing import event_accumulator
    from tensorboard.plugins.hparams import metadata

    acc = event_accumulator.EventAccumulator(os.path.join(run.log_dir, "tb"))
    acc.Reload()
    start = metadata.parse_session_start_info_plugin_data(
        acc.PluginTagToContent(metadata.PLUGIN_NAME)[metadata.SESSION_START_INFO_TAG])
    hparams = {k: v.string_value or v.number_value or v.bool_value
               for k, v in start.hparams.items()}
    assert hparams["algo"] == "ppo" and hparams["gamma"] == pytest.approx(0.98)
    assert re.fullmatch(r"[\d.]+.*", hparams["version/torch"])


def test_resume_of_a_run_that_saves_nothing_is_one_line(tmp_path, capsys):
    argv = PPO + ["--log-dir", str(tmp_path / "logs"), "--save-dir", ""]
    assert main.main(argv) == 0
    before = files(tmp_path)
    one_error_line(capsys, ["--resume", run_paths(get_args(argv)).log_dir],
                   "--resume: this run saves no checkpoint (--save-dir is empty)")
    assert files(tmp_path) == before
