"""run/tracking.py: --capture-video (gymnasium's RecordVideo on training env 0) and --track
(Weights & Biases, offline here); what they cannot do is one line, exit 2, nothing on disk."""
import csv
import glob
import json
import math
import os
import re
import struct
import subprocess
import sys
import tomllib

import imageio.v3 as iio
import pytest
import torch

import main
from a2c_ppo_acktr.envs import VecPyTorchFrameStack, make_vec_envs
from a2c_ppo_acktr.errors import ConfigError

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# CartPole PPO: 3 updates of 2 envs x 32 steps; env 0 ends ~5 episodes in its 96 steps.
PPO = ["--algo", "ppo", "--env-name", "CartPole-v1", "--num-processes", "2", "--num-steps", "32",
       "--num-mini-batch", "2", "--log-interval", "1", "--num-env-steps", "192"]
TIMING = ("fps", "time")  # the columns that differ between two runs alike


def dirs(tmp_path, name):
    return ["--log-dir", str(tmp_path / name), "--save-dir", str(tmp_path / name / "models")]


def rows(run_dir, filename="progress.csv"):
    with open(os.path.join(run_dir, filename)) as f:
        return list(csv.DictReader(f))


def one_error_line(capsys, argv, needle):
    with pytest.raises(SystemExit) as exc:
        main.main(argv)
    err = capsys.readouterr().err.strip()
    assert exc.value.code == 2 and len(err.splitlines()) == 1, err
    assert needle in err and "Traceback" not in err, err


@pytest.mark.slow
def test_videos_of_env_0_change_nothing_and_a_resume_stays_exact(tmp_path, capsys):
    assert main.main(PPO + ["--vec-env", "dummy"] + dirs(tmp_path, "plain")) == 0
    argv = PPO + ["--vec-env", "shmem", "--capture-video"] + dirs(tmp_path, "video")
    assert main.main(argv) == 0  # env 0 in a worker process: its videos are written there
    plain, video = (str(tmp_path / name / "ppo" / "CartPole-v1_seed1") for name in ("plain", "video"))
    drop = lambda r: {k: v for k, v in r.items() if k not in TIMING}  # noqa: E731
    assert [drop(r) for r in rows(video)] == [drop(r) for r in rows(plain)]
    files = sorted(os.listdir(os.path.join(video, "videos")))
    assert files[:2] == ["rl-video-episode-0.mp4", "rl-video-episode-1.mp4"], files
    assert not os.path.exists(os.path.join(plain, "videos"))
    with open(os.path.join(video, "0.monitor.csv")) as f:
        lengths = [int(r["l"]) for r in csv.DictReader(f.readlines()[1:])]
    for episode in (0, 1):  # the first observation, then one frame per step
        frames = iio.imread(os.path.join(video, "videos", f"rl-video-episode-{episode}.mp4"))
        assert frames.shape == (lengths[episode] + 1, 400, 600, 3)
    capsys.readouterr()
    assert main.main(["--resume", video, "--num-env-steps", "256"]) == 0
    assert "approximately" not in capsys.readouterr().err  # the recorder keeps no episode state
    assert "rl-video-resumed-at-192-episode-0.mp4" in os.listdir(os.path.join(video, "videos"))
    assert main.main(PPO + ["--vec-env", "dummy", "--overwrite"] + dirs(tmp_path, "video")) == 0
    assert glob.glob(os.path.join(video, "videos", "*")) == []  # the replaced run's, with its logs


@pytest.mark.slow
def test_atari_records_the_agents_steps_on_the_classic_stack(tmp_path, capsys):
    prefix = str(tmp_path / "videos" / "rl-video")
    envs = make_vec_envs("PongNoFrameskip-v4", 0, 2, None, None, "cpu", False, video_prefix=prefix)
    try:
        assert isinstance(envs, VecPyTorchFrameStack)  # auto chose the classic stack, not ALE's
        assert "(auto; --capture-video: ALE's vector env does not render)" in capsys.readouterr().out
        envs.reset()
        for _ in range(10):
            envs.step(torch.zeros(2, 1, dtype=torch.long))
    finally:
        envs.close()  # writes the video of the episode under way
    frames = iio.imread(prefix + "-episode-0.mp4")
    # a frame per agent step (10, after FireResetEnv's 2 and the reset's), not per emulator frame
    assert 11 <= frames.shape[0] <= 13 and frames.shape[1:] == (210, 160, 3)
    assert iio.immeta(prefix + "-episode-0.mp4")["fps"] == 15  # ALE's 60 Hz, one frame in 4
    for kind in ("ale", "ale-pipelined"):
        with pytest.raises(ConfigError, match=f"--capture-video: --vec-env {kind} does not render"):
            make_vec_envs("PongNoFrameskip-v4", 0, 2, None, None, "cpu", False, vec_env=kind,
                          video_prefix=prefix)


@pytest.mark.parametrize("extra, needle", [
    (["--vec-env", "native"], "--capture-video: --vec-env native does not render; use --vec-env "
                              "dummy or shmem"),
    (["--num-workers", "1"], "with --num-workers the envs are on Ray workers"),
])
def test_capture_video_where_it_cannot_record_is_one_line(tmp_path, capsys, extra, needle):
    one_error_line(capsys, PPO + ["--capture-video"] + extra + dirs(tmp_path, "logs"), needle)
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("flag, module", [("--capture-video", "moviepy"), ("--track", "wandb")])
def test_a_missing_package_is_one_line_naming_its_extra(tmp_path, capsys, monkeypatch, flag, module):
    monkeypatch.setitem(sys.modules, module, None)  # as if not installed: find_spec -> None
    extra = {"moviepy": "video", "wandb": "wandb"}[module]
    one_error_line(capsys, PPO + [flag] + dirs(tmp_path, "logs"),
                   f"{flag} needs {module}{',' if module == 'moviepy' else ':'}")
    one_error_line(capsys, PPO + [flag] + dirs(tmp_path, "logs"), f"pip install -e .[{extra}]")
    assert os.listdir(tmp_path) == []


def test_the_extras_hold_what_the_flags_need():
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        extras = tomllib.load(f)["project"]["optional-dependencies"]
    names = {extra: {re.split("[<>=]", r)[0] for r in extras[extra]} for extra in ("video", "wandb")}
    assert names == {"video": {"moviepy"}, "wandb": {"wandb"}}


def wandb_records(path):
    """The records of a W&B run file (``run-<id>.wandb``): LevelDB's log format after a 7-byte
    header, blocks of 32 KiB, each record 7 bytes of header (crc, length, type) then its bytes."""
    from wandb.proto import wandb_internal_pb2 as pb

    with open(path, "rb") as f:
        data = f.read()
    pos, chunk, block = 7, b"", 32768
    while pos + 7 <= len(data):
        if block - pos % block < 7:  # a block's tail too short for a header is padding
            pos += block - pos % block
            continue
        _, length, kind = struct.unpack("<IHB", data[pos:pos + 7])
        chunk += data[pos + 7:pos + 7 + length]
        pos += 7 + length
        if kind in (1, 4):  # a whole record, or the last piece of one
            record = pb.Record()
            record.ParseFromString(chunk)
            yield record
            chunk = b""


@pytest.fixture
def wandb_offline(tmp_path, monkeypatch):
    pytest.importorskip("wandb")
    for name, value in {"WANDB_MODE": "offline", "WANDB_CONSOLE": "off", "WANDB_SILENT": "true",
                        "WANDB_CONFIG_DIR": tmp_path / "wandb-config",
                        "WANDB_CACHE_DIR": tmp_path / "wandb-cache",
                        "WANDB_DATA_DIR": tmp_path / "wandb-data"}.items():
        monkeypatch.setenv(name, str(value))


@pytest.mark.slow
def test_track_logs_the_config_and_every_scalar_row(tmp_path, wandb_offline):
    argv = PPO + ["--track", "--eval-interval", "2", "--wandb-project-name", "tests"]
    assert main.main(argv + dirs(tmp_path, "logs")) == 0
    # run.finish() does not wait for W&B's service to close the run's file; a process's exit
    # does (an atexit hook), and teardown does the same inside pytest's process.
    import wandb
    wandb.teardown()
    run_dir = str(tmp_path / "logs" / "ppo" / "CartPole-v1_seed1")
    (path,) = glob.glob(os.path.join(run_dir, "wandb", "offline-run-*", "run-*.wandb"))
    records = list(wandb_records(path))
    (run,) = [r.run for r in records if r.HasField("run")]
    assert (run.project, run.display_name) == ("tests", "ppo/CartPole-v1_seed1")
    config = {item.key: json.loads(item.value_json) for item in run.config.update}
    with open(os.path.join(run_dir, "config.json")) as f:
        saved = json.load(f)
    assert {k: config[k] for k in saved["flags"]} == saved["flags"]
    assert config["versions"] == saved["versions"] and config["argv"] == saved["argv"]
    logged = [{item.key or "/".join(item.nested_key): json.loads(item.value_json)
               for item in r.history.item} for r in records if r.HasField("history")]
    logged = [{k: v for k, v in row.items() if not k.startswith("_")} for row in logged]

    def expected(row, prefix=""):  # the CSV's numbers; empty and NaN cells are not sent
        numbers = {prefix + k: float(v) for k, v in row.items() if v != "" and not math.isnan(float(v))}
        return {**numbers, "global_step": float(row["timesteps"])}
    want = [expected(r) for r in rows(run_dir)] + [expected(r, "eval/")
                                                  for r in rows(run_dir, "eval/eval.csv")]
    assert len(want) == 3 + 1  # 3 updates; an evaluation at update 2 (none at 0: no episode yet)
    assert sorted(logged, key=lambda r: (r["global_step"], len(r))) == \
        sorted(want, key=lambda r: (r["global_step"], len(r)))


@pytest.mark.slow
def test_track_that_cannot_start_is_one_line_and_leaves_nothing(tmp_path):
    """Not logged in (no API key) and not offline: W&B refuses, after the envs are built."""
    pytest.importorskip("wandb")
    env = {k: v for k, v in os.environ.items() if not k.startswith("WANDB_")}
    env.update(HOME=str(tmp_path / "home"), PYTHONPATH=ROOT, WANDB_CONFIG_DIR=str(tmp_path / "c"))
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "main.py"), *PPO, "--track",
                           *dirs(tmp_path, "logs")], env=env, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert proc.stderr.startswith("main.py: error: --track: W&B did not start: "), proc.stderr
    assert "Traceback" not in proc.stderr and not os.path.exists(tmp_path / "logs")
