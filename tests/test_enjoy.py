"""enjoy.py: plays saved checkpoints, records videos headless, rejects bad checkpoints in a line."""
import ctypes.util
import os
import re
import shutil
import subprocess
import sys

import imageio.v2 as imageio
import numpy as np
import pytest
import torch
from PIL import Image, ImageSequence

import enjoy
import main
from a2c_ppo_acktr.envs import make_vec_envs
from a2c_ppo_acktr.model import Policy
from a2c_ppo_acktr.run.checkpoint import load_checkpoint, save_checkpoint

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EPISODE = re.compile(r"episode (\d+): return (-?[\d.]+), length (\d+)")


@pytest.fixture(autouse=True)
def headless(monkeypatch):
    """No display; the env defaults enjoy.main sets (MUJOCO_GL, SDL_VIDEODRIVER) are undone."""
    for name in ("DISPLAY", "WAYLAND_DISPLAY"):
        monkeypatch.delenv(name, raising=False)
    for name in ("MUJOCO_GL", "SDL_VIDEODRIVER"):
        if name not in os.environ:
            monkeypatch.setenv(name, "")  # records "unset" for the undo
            monkeypatch.delenv(name)


def train(save_dir, *extra):
    """A 160-step A2C run on CartPole (about a second); returns its save dir."""
    assert main.main(["--algo", "a2c", "--env-name", "CartPole-v1", "--num-processes", "2",
                      "--num-steps", "8", "--num-env-steps", "160", "--vec-env", "dummy",
                      "--log-dir", f"{save_dir}-logs", "--save-dir", str(save_dir), *extra]) == 0
    return str(save_dir)


@pytest.fixture(scope="module")
def cartpole(tmp_path_factory):
    return train(tmp_path_factory.mktemp("cartpole") / "models")


def untrained_checkpoint(env_name, path):
    """A checkpoint in main.py's format for a fresh policy (a CNN for Atari): no training needed."""
    envs = make_vec_envs(env_name, 0, 1, None, None, "cpu", False, vec_env="dummy")
    policy = Policy(envs.observation_space.shape, envs.action_space)
    save_checkpoint({"actor_critic": policy.state_dict(), "optimizer": {}, "obs_rms": None,
                     "env_steps": 0, "env_name": env_name, "algo": "ppo",
                     "obs_shape": list(envs.observation_space.shape),
                     "action_space": str(envs.action_space), "recurrent_policy": False},
                    path)
    envs.close()
    return str(path)


def play(capsys, *argv):
    """enjoy.main(argv) -> (episodes as (return, length), stdout); asserts success."""
    assert enjoy.main(list(argv)) == 0
    out = capsys.readouterr().out
    return [(float(r), int(n)) for _, r, n in EPISODE.findall(out)], out


def fail(capsys, *argv):
    """enjoy.main(argv) must exit 2 with one line on stderr; returns that line."""
    with pytest.raises(SystemExit) as exc:
        enjoy.main(list(argv))
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and err.startswith("enjoy.py: error: "), err
    return err


def gif_frames(path):
    """(frames as an array, frames written): Pillow merges identical consecutive frames into one
    of longer duration, so the frames written are counted from the durations (20 ms each here)."""
    with Image.open(path) as im:
        total_ms = sum(f.info["duration"] for f in ImageSequence.Iterator(im))
    return imageio.mimread(path), total_ms


@pytest.mark.parametrize("argv, needle", [
    (["--seed", "-2000"], "--seed must be an integer from 0 to 2**32 - 1, got -2000"),
    (["--seed", "4294967296"], "--seed must be an integer from 0 to 2**32 - 1, got 4294967296"),
    (["--train-seed", "-5"], "--train-seed must be an integer from 0 to 2**32 - 1, got -5"),
    (["--episodes", "0"], "--episodes must be a positive integer below 2**63, got 0"),
    (["--max-steps", "-1"], "--max-steps must be a positive integer below 2**63, got -1"),
    (["--record", ""], "--record expects a .gif or .mp4 path, got ''"),
    (["--load-dir", ""], "--load-dir is empty: give a path"),
])
def test_bad_numbers_and_empty_paths_exit_2_in_one_line(capsys, argv, needle):
    """Issue #52: --seed -2000 was gymnasium's traceback, --record '' recorded nothing."""
    with pytest.raises(SystemExit) as e:
        enjoy.get_args(argv)
    err = capsys.readouterr().err
    assert e.value.code == 2 and err == f"enjoy.py: error: {needle}\n", err


def test_plays_episodes_and_summary(capsys, cartpole):
    episodes, out = play(capsys, "--env-name", "CartPole-v1", "--load-dir", cartpole,
                         "--episodes", "3")
    assert len(episodes) == 3 and [int(m) for m in re.findall(r"episode (\d+):", out)] == [1, 2, 3]
    assert all(r == n for r, n in episodes)  # CartPole pays 1 a step: the return is raw
    mean = np.mean([r for r, _ in episodes])
    assert f"3 episodes: return {mean:.1f} ± " in out
    # --load-dir may name the file (the env then comes from it); deterministic: same episodes
    path = os.path.join(cartpole, "a2c", "CartPole-v1_seed1.pt")
    again, out = play(capsys, "--load-dir", path, "--episodes", "3")
    assert again == episodes and f"loaded {path} (a2c, 160 steps)" in out


def test_ctrl_c_before_playing_is_one_line_and_status_130(capsys, cartpole, monkeypatch):
    """Once the imports are done Ctrl-C is a KeyboardInterrupt (enjoy.py's __main__); loading the
    checkpoint or making the envs, it ends enjoy.py in one line, no traceback."""
    def interrupted(args):
        raise KeyboardInterrupt
    monkeypatch.setattr(enjoy, "load", interrupted)
    assert enjoy.main(["--env-name", "CartPole-v1", "--load-dir", cartpole]) == 130
    assert capsys.readouterr().err == "enjoy.py: interrupted\n"


@pytest.mark.parametrize("when", ["playing", "writing the gif"])
def test_ctrl_c_while_playing_or_writing_a_gif_keeps_it_and_exits_130(capsys, cartpole, tmp_path,
                                                                      monkeypatch, when):
    """Issue #85: Ctrl-C while playing exited 0; while the GIF was encoded it was cut short. The
    summary of what was played, a whole video, one line on stderr and exit status 130."""
    import signal

    import imageio.v2 as imageio
    real = enjoy.open_writer

    class Writer:  # the real writer; Ctrl-C comes while it encodes the GIF
        def __init__(self, path, env):
            self.writer = real(path, env)
            self.append_data = self.writer.append_data

        def close(self):
            if when == "writing the gif":
                os.kill(os.getpid(), signal.SIGINT)
            self.writer.close()

    def steps_then_ctrl_c(policy, envs, episodes, deterministic, on_step, max_steps):
        envs.reset()
        for _ in range(3):
            on_step(None, None, [{}])
        if when == "playing":
            raise KeyboardInterrupt

    monkeypatch.setattr(enjoy, "open_writer", Writer)
    monkeypatch.setattr(enjoy, "run_episodes", steps_then_ctrl_c)
    path = tmp_path / "out.gif"
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        assert enjoy.main(["--env-name", "CartPole-v1", "--load-dir", cartpole, "--record",
                           str(path)]) == 130
    finally:
        signal.signal(signal.SIGINT, previous)
    assert capsys.readouterr().err == f"enjoy.py: interrupted; wrote {path} (what was played)\n"
    assert len(imageio.mimread(path)) >= 1  # a whole GIF (its same frames are one)


def test_max_steps_cuts_the_episode(capsys, cartpole):
    episodes, out = play(capsys, "--env-name", "CartPole-v1", "--load-dir", cartpole,
                         "--algo", "a2c", "--max-steps", "5", "--non-det")
    assert episodes == [(5.0, 5)] and "length 5 (unfinished)" in out


def test_recurrent_policy(capsys, tmp_path):
    save_dir = train(tmp_path / "models", "--recurrent-policy")
    ckpt = load_checkpoint(os.path.join(save_dir, "a2c", "CartPole-v1_seed1.pt"))
    assert ckpt["recurrent_policy"]
    episodes, _ = play(capsys, "--env-name", "CartPole-v1", "--load-dir", save_dir,
                       "--episodes", "2", "--non-det")
    assert len(episodes) == 2


def test_policy_with_network_flags(capsys, tmp_path):
    save_dir = train(tmp_path / "models", "--hidden-size", "16", "--activation", "relu",
                     "--init", "default")
    ckpt = load_checkpoint(os.path.join(save_dir, "a2c", "CartPole-v1_seed1.pt"))
    assert ckpt["policy_kwargs"]["base_kwargs"] == {"recurrent": False, "hidden_size": 16,
                                                    "activation": "relu"}
    episodes, _ = play(capsys, "--env-name", "CartPole-v1", "--load-dir", save_dir,
                       "--episodes", "1", "--non-det")
    assert len(episodes) == 1


@pytest.mark.slow
def test_record_cartpole_gif(capsys, cartpole, tmp_path):
    pytest.importorskip("pygame")  # classic control renders with pygame
    path = tmp_path / "video" / "cartpole.gif"
    episodes, out = play(capsys, "--env-name", "CartPole-v1", "--load-dir", cartpole,
                         "--max-steps", "12", "--record", str(path))
    steps = sum(n for _, n in episodes)
    assert steps == 12 and f"wrote {path}" in out
    frames, total_ms = gif_frames(path)
    assert total_ms == (1 + steps) * 20  # the reset frame, then one a step, at 50 fps
    assert 1 < len(frames) <= 1 + steps and frames[0].shape[:2] == (400, 600)


def pong(tmp_path):
    return untrained_checkpoint("PongNoFrameskip-v4",
                                tmp_path / "models" / "ppo" / "PongNoFrameskip-v4.pt")


@pytest.mark.slow
def test_atari_cnn_policy_gif(capsys, tmp_path):
    pong(tmp_path)
    path = tmp_path / "pong.gif"
    episodes, out = play(capsys, "--env-name", "PongNoFrameskip-v4",
                         "--load-dir", str(tmp_path / "models"), "--max-steps", "10",
                         "--record", str(path))
    assert "(unfinished)" in out and len(episodes) == 1
    frames, total_ms = gif_frames(path)
    # 15 fps (4 frames of the 60 Hz console a step): 66.7 ms, which GIF rounds to 10 ms units
    assert abs(total_ms - 11 * 1000 / 15) <= 10 * len(frames)
    assert frames[0].shape[:2] == (210, 160)  # the full console screen, not the 84x84 input


@pytest.mark.slow
def test_atari_mp4_exact_frames(capsys, tmp_path):
    pytest.importorskip("imageio_ffmpeg")
    path = tmp_path / "pong.mp4"
    play(capsys, "--load-dir", pong(tmp_path), "--max-steps", "10", "--record", str(path))
    reader = imageio.get_reader(str(path))
    try:
        assert reader.count_frames() == 11 and reader.get_meta_data()["fps"] == 15
        assert reader.get_data(0).shape == (210, 160, 3)
    finally:
        reader.close()


@pytest.mark.slow
@pytest.mark.skipif(ctypes.util.find_library("EGL") is None, reason="no libEGL: offscreen MuJoCo")
def test_mujoco_records_headless(tmp_path):
    """As a user runs it: a fresh process, no display, MUJOCO_GL unset -> enjoy.py picks egl."""
    ckpt = untrained_checkpoint("HalfCheetah-v5", tmp_path / "ppo" / "HalfCheetah-v5.pt")
    path = tmp_path / "cheetah.gif"
    env = {k: v for k, v in os.environ.items()
           if k not in ("DISPLAY", "WAYLAND_DISPLAY", "MUJOCO_GL", "PYOPENGL_PLATFORM")}
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "enjoy.py"), "--load-dir", ckpt,
                           "--max-steps", "4", "--record", str(path)],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    assert proc.returncode == 0, proc.stderr
    frames, total_ms = gif_frames(path)
    assert total_ms == 5 * 50 and frames[0].shape[:2] == (480, 480)  # 20 fps
    assert np.ptp(frames[-1]) > 0  # a rendered scene, not a blank frame


def test_error_missing_checkpoint(capsys, tmp_path, cartpole):
    err = fail(capsys, "--env-name", "CartPole-v1", "--load-dir", str(tmp_path))
    assert "no checkpoint for CartPole-v1" in err and "<algo>/CartPole-v1_seed*.pt" in err
    err = fail(capsys, "--env-name", "CartPole-v1", "--load-dir", cartpole, "--algo", "ppo")
    assert os.path.join(cartpole, "ppo", "CartPole-v1_seed*.pt") in err


def test_error_corrupt_checkpoint(capsys, tmp_path):
    path = tmp_path / "a2c" / "CartPole-v1.pt"
    path.parent.mkdir()
    path.write_bytes(np.random.default_rng(0).bytes(1000))
    assert "corrupt or not a torch file" in fail(capsys, "--env-name", "CartPole-v1", "--load-dir",
                                                 str(tmp_path))
    torch.save([torch.nn.Linear(2, 2)], path)  # a pickled module, as the original repo saved
    assert "pickles Python objects" in fail(capsys, "--load-dir", str(path))


def test_error_checkpoint_of_another_env(capsys, tmp_path, cartpole):
    other = tmp_path / "a2c" / "Acrobot-v1.pt"
    other.parent.mkdir()
    shutil.copy(os.path.join(cartpole, "a2c", "CartPole-v1_seed1.pt"), other)
    err = fail(capsys, "--env-name", "Acrobot-v1", "--load-dir", str(tmp_path))
    assert "for CartPole-v1, not for --env-name Acrobot-v1" in err


def test_error_policy_does_not_fit_env(capsys, tmp_path, cartpole):
    ckpt = load_checkpoint(os.path.join(cartpole, "a2c", "CartPole-v1_seed1.pt"))
    ckpt.update(env_name="Acrobot-v1")
    save_checkpoint(ckpt, tmp_path / "shape.pt")
    err = fail(capsys, "--load-dir", str(tmp_path / "shape.pt"))
    assert "obs_shape [4], expected [6]" in err
    ckpt.update(obs_shape=[6], action_space="Discrete(4)")
    save_checkpoint(ckpt, tmp_path / "actions.pt")
    assert "action_space 'Discrete(4)', expected 'Discrete(3)'" in fail(
        capsys, "--env-name", "Acrobot-v1", "--load-dir", str(tmp_path / "actions.pt"))
    ckpt.update(action_space="Discrete(3)")  # the recorded spaces fit, the weights do not
    save_checkpoint(ckpt, tmp_path / "weights.pt")
    err = fail(capsys, "--load-dir", str(tmp_path / "weights.pt"))
    assert "does not fit Acrobot-v1" in err and "size mismatch" in err


def test_error_checkpoint_from_a_newer_version(capsys, tmp_path, cartpole):
    ckpt = load_checkpoint(os.path.join(cartpole, "a2c", "CartPole-v1_seed1.pt"))
    ckpt["policy_kwargs"]["action_noise_schedule"] = "cosine"  # a setting this version lacks
    save_checkpoint(ckpt, tmp_path / "newer.pt")
    err = fail(capsys, "--load-dir", str(tmp_path / "newer.pt"))
    assert "policy settings this version does not know (action_noise_schedule)" in err


def test_load_dir_forms_and_choosing_among_several(capsys, tmp_path, cartpole):
    """--load-dir may be one <algo> directory of the save dir (the original's documented form);
    several checkpoints of the env, with the new names or the original's <env>.pt, are listed in
    one line, and --algo / --train-seed choose among them."""
    a2c = os.path.join(cartpole, "a2c")
    _, out = play(capsys, "--env-name", "CartPole-v1", "--load-dir", a2c, "--max-steps", "3")
    assert f"loaded {os.path.join(a2c, 'CartPole-v1_seed1.pt')}" in out
    models = tmp_path / "models"
    shutil.copytree(cartpole, models)
    seed1 = models / "a2c" / "CartPole-v1_seed1.pt"
    shutil.copy(seed1, models / "a2c" / "CartPole-v1_seed2.pt")
    (models / "ppo").mkdir()
    shutil.copy(seed1, models / "ppo" / "CartPole-v1.pt")  # as the original named it
    err = fail(capsys, "--env-name", "CartPole-v1", "--load-dir", str(models))
    assert "several checkpoints for CartPole-v1" in err and "--algo, --train-seed" in err
    assert all(str(p) in err for p in (seed1, models / "a2c" / "CartPole-v1_seed2.pt",
                                       models / "ppo" / "CartPole-v1.pt"))
    _, out = play(capsys, "--env-name", "CartPole-v1", "--load-dir", str(models / "a2c"),
                  "--max-steps", "3")  # seeds of one algo: the newest, the others named
    assert "CartPole-v1_seed2.pt" in out and "the newest of --train-seed 1, 2" in out, out
    assert "unrecognized arguments: --train-sed 2 (see --help)" in fail(
        capsys, "--env-name", "CartPole-v1", "--load-dir", str(models), "--train-sed", "2")
    for choice, chosen in [(["--load-dir", str(models / "a2c"), "--train-seed", "2"],
                            models / "a2c" / "CartPole-v1_seed2.pt"),
                           (["--load-dir", str(models), "--algo", "ppo"],
                            models / "ppo" / "CartPole-v1.pt"),
                           (["--load-dir", str(models), "--algo", "a2c", "--train-seed", "1"],
                            seed1)]:
        _, out = play(capsys, "--env-name", "CartPole-v1", "--max-steps", "3", *choice)
        assert f"loaded {chosen}" in out, out
