"""Play a policy saved by ``main.py``, on screen or into a video file.

Usage::

    python enjoy.py --env-name E --load-dir D [--algo ppo] [--non-det] [--episodes N]
                    [--max-steps N] [--seed S] [--record PATH.mp4|PATH.gif] [--no-render]

    python enjoy.py --env-name CartPole-v1 --load-dir trained_models --record cartpole.gif
    python enjoy.py --load-dir trained_models/ppo/PongNoFrameskip-v4.pt --max-steps 2000

The checkpoint is ``<load-dir>/<algo>/<env-name>.pt`` ('/' in the id becomes '_'), found without
``--algo`` when one algorithm directory holds it; ``--load-dir`` may also name the file itself.
Actions are the policy's mode unless ``--non-det``. Each episode prints its raw return (for Atari
the game score, not the clipped training reward). ``--record`` writes the frames to a .gif or .mp4
(imageio; imageio-ffmpeg for .mp4). Without a display nothing is shown, and MuJoCo renders
offscreen with ``MUJOCO_GL=egl`` unless MUJOCO_GL is set. A missing, unreadable or mismatched
checkpoint is one line on stderr and exit status 2.
"""
import argparse
import glob
import os
import sys
import tempfile

import gymnasium as gym
import numpy as np
import torch
from stable_baselines3.common.monitor import Monitor

from a2c_ppo_acktr.arguments import fail
from a2c_ppo_acktr.envs import get_vec_normalize, make_vec_envs
from a2c_ppo_acktr.model import Policy
from a2c_ppo_acktr.utils import CheckpointError, check_checkpoint, load_checkpoint

CHECKPOINT_KEYS = ("actor_critic", "obs_rms", "env_name", "obs_shape", "recurrent_policy")


def _fail(message, prog="enjoy.py"):
    fail(message, prog=prog)


def add_checkpoint_args(p):
    """The flags that find a checkpoint of main.py (``checkpoint_path``); generate.py has them too."""
    p.add_argument("--env-name", default=None,
                   help="gymnasium id (default: the checkpoint's, when --load-dir is a file)")
    p.add_argument("--load-dir", default="./trained_models/",
                   help="the --save-dir of main.py, or a .pt checkpoint file")
    p.add_argument("--algo", default=None,
                   help="a2c | ppo | acktr (default: the one with a checkpoint)")


def get_args(argv=None):
    p = argparse.ArgumentParser(description="Play a policy saved by main.py")
    add_checkpoint_args(p)
    p.add_argument("--non-det", action="store_true", help="sample actions instead of the mode")
    p.add_argument("--episodes", type=int, default=5, help="episodes to play (default: 5)")
    p.add_argument("--max-steps", type=int, default=None, help="stop after this many steps in all")
    p.add_argument("--seed", type=int, default=1, help="random seed; envs get seed + 1000")
    p.add_argument("--record", metavar="PATH", help="write the frames to PATH (.gif or .mp4)")
    p.add_argument("--no-render", action="store_true", help="no window, even with a display")
    args = p.parse_args(argv)
    if args.record and os.path.splitext(args.record)[1].lower() not in (".gif", ".mp4"):
        _fail(f"--record expects a .gif or .mp4 path, got {args.record!r}")
    if args.episodes <= 0 or (args.max_steps is not None and args.max_steps <= 0):
        _fail("--episodes and --max-steps must be positive")
    return args


# checkpoint_path, load and build_policy take the program name for their error lines:
# gail_experts/generate.py uses them too.
def checkpoint_path(args, prog="enjoy.py"):
    if os.path.isfile(args.load_dir) or args.load_dir.endswith(".pt"):
        return args.load_dir
    if args.env_name is None:
        _fail("--env-name is needed when --load-dir is a directory", prog)
    name = args.env_name.replace("/", "_") + ".pt"
    if args.algo is not None:
        return os.path.join(args.load_dir, args.algo, name)
    found = sorted(glob.glob(os.path.join(glob.escape(args.load_dir), "*", name)))
    if len(found) > 1:
        _fail(f"several checkpoints for {args.env_name}: {', '.join(found)}; choose with --algo",
              prog)
    return found[0] if found else os.path.join(args.load_dir, "<algo>", name)


def load(args, prog="enjoy.py"):
    path = checkpoint_path(args, prog)
    if not os.path.isfile(path):
        _fail(f"no checkpoint at {path} (main.py saves <save-dir>/<algo>/<env-name>.pt)", prog)
    try:
        ckpt = load_checkpoint(path)
    except CheckpointError as e:
        _fail(f"{e}; expected a state-dict checkpoint saved by main.py", prog)
    if not isinstance(ckpt, dict) or not all(k in ckpt for k in CHECKPOINT_KEYS):
        _fail(f"{path} is not a checkpoint saved by main.py "
              f"(expected keys {', '.join(CHECKPOINT_KEYS)})", prog)
    args.env_name = args.env_name or ckpt["env_name"]
    if ckpt["env_name"] != args.env_name:
        _fail(f"{path} holds a policy for {ckpt['env_name']}, not for --env-name {args.env_name}",
              prog)
    return path, ckpt


def _first_env(envs):
    """Env 0 of the DummyVecEnv under the wrapper stack (a gym env, with its wrappers)."""
    while not hasattr(envs, "envs"):
        envs = envs.venv
    return envs.envs[0]


def build_policy(args, ckpt, path, envs, prog="enjoy.py"):
    obs_shape, action_space = tuple(envs.observation_space.shape), envs.action_space
    try:
        check_checkpoint(ckpt, path, args.env_name, obs_shape, action_space)
    except CheckpointError as e:
        _fail(str(e), prog)
    # Checkpoints from before --hidden-size etc. have no "policy_kwargs": the original's network.
    policy = Policy(obs_shape, action_space, **ckpt.get(
        "policy_kwargs", {"base_kwargs": {"recurrent": ckpt["recurrent_policy"]}}))
    try:
        policy.load_state_dict(ckpt["actor_critic"])
    except RuntimeError as e:  # "Error(s) in loading state_dict for Policy:\n\tsize mismatch ..."
        first = " ".join(str(e).split("\n", 1)[-1].split()).split(". ")[0]
        _fail(f"the policy in {path} does not fit {args.env_name} (observations {obs_shape}, "
              f"actions {action_space}): {first}", prog)
    vec_norm = get_vec_normalize(envs)
    if vec_norm is not None:
        vec_norm.eval()  # frozen: the training run's statistics
        if ckpt["obs_rms"] is not None:
            vec_norm.load_state_dict(ckpt["obs_rms"])
    return policy.eval()


def open_writer(path, env):
    import imageio.v2 as imageio
    atari = hasattr(env.unwrapped, "ale")  # one step = 4 frames at 60 Hz
    fps = 15 if atari else env.metadata.get("render_fps", 30)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    if path.lower().endswith(".gif"):
        return imageio.get_writer(path, duration=1000 / fps, loop=0)
    return imageio.get_writer(path, fps=fps, macro_block_size=2)


def play(args, policy, envs, writer):
    """Run the episodes; print and return their raw returns."""
    monitor = _first_env(envs)
    while not isinstance(monitor, Monitor):
        monitor = monitor.env
    returns, steps = [], 0
    obs = envs.reset()
    rnn_hxs = torch.zeros(1, policy.recurrent_hidden_state_size)
    masks = torch.zeros(1, 1)
    if writer is not None:
        writer.append_data(envs.render())
    try:
        while len(returns) < args.episodes and (args.max_steps is None or steps < args.max_steps):
            with torch.inference_mode():
                _, action, _, rnn_hxs = policy.act(obs, rnn_hxs, masks, not args.non_det)
            obs, _, terminated, truncated, infos = envs.step(action)
            masks = (~(terminated | truncated)).float().unsqueeze(1)
            steps += 1
            if writer is not None:
                writer.append_data(envs.render())
            episode = infos[0].get("episode")  # the Monitor's: raw return, all lives for Atari
            if episode is not None:
                returns.append(float(episode["r"]))
                print(f"episode {len(returns)}: return {returns[-1]:.1f}, length {episode['l']}",
                      flush=True)
    except KeyboardInterrupt:  # Ctrl-C while watching: stop, keeping the video and the summary
        print()
    if len(returns) < args.episodes and monitor.rewards:
        print(f"episode {len(returns) + 1}: return {sum(monitor.rewards):.1f}, length "
              f"{len(monitor.rewards)} (unfinished)")
    if returns:
        print(f"{len(returns)} episodes: return {np.mean(returns):.1f} ± {np.std(returns):.1f} "
              f"(min {np.min(returns):.1f}, max {np.max(returns):.1f})")
    return returns


def main(argv=None):
    args = get_args(argv)
    path, ckpt = load(args)
    torch.set_num_threads(1)
    display = bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))
    if not display:  # offscreen: MuJoCo's default GL (glfw) and SDL (pygame, ALE) want a display
        os.environ.setdefault("MUJOCO_GL", "egl")
        os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
    render_mode = ("rgb_array" if args.record
                   else "human" if display and not args.no_render else None)
    with tempfile.TemporaryDirectory() as log_dir:  # for the Monitor: raw returns in infos
        try:
            envs = make_vec_envs(args.env_name, args.seed + 1000, 1, None, log_dir, "cpu", False,
                                 vec_env="dummy", render_mode=render_mode,
                                 env_kwargs=ckpt.get("env_kwargs"))  # older files lack them
        except (ValueError, gym.error.DependencyNotInstalled) as e:
            _fail(str(e))
        writer = None
        try:
            policy = build_policy(args, ckpt, path, envs)
            if args.record:
                writer = open_writer(args.record, _first_env(envs))
            play(args, policy, envs, writer)
        except gym.error.DependencyNotInstalled as e:  # e.g. pygame, to render classic control
            _fail(f"cannot render {args.env_name}: {e}")
        finally:
            if writer is not None:
                writer.close()
            envs.close()
    if args.record:
        print(f"wrote {args.record}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
