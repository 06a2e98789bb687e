"""Play a policy saved by ``main.py``, on screen or into a video file.

Usage::

    python enjoy.py --env-name E --load-dir D [--algo ppo] [--train-seed S] [--non-det]
                    [--episodes N] [--max-steps N] [--seed S] [--record PATH.mp4|PATH.gif]
                    [--no-render]

    python enjoy.py --env-name CartPole-v1 --load-dir trained_models --record cartpole.gif
    python enjoy.py --env-name PongNoFrameskip-v4 --load-dir trained_models/a2c
    python enjoy.py --load-dir trained_models/ppo/PongNoFrameskip-v4_seed1.pt --max-steps 2000

``--load-dir`` is main.py's ``--save-dir``, one of its ``<algo>`` directories or a checkpoint
file. Each episode prints its raw return; ``--record`` writes a .gif or .mp4. How the checkpoint
is found and what is played: docs/details.md, "Watching a policy". Bad input is one line on
stderr and exit status 2.
"""
# ruff: noqa: E402  (signals are handled before the slow imports below)
import sys

if __name__ == "__main__":  # a signal during the imports (seconds) ends the process in one line
    import signal  # held from here, as importing the package imports gymnasium, until handled
    signal.pthread_sigmask(signal.SIG_BLOCK, (signal.SIGINT, signal.SIGTERM, signal.SIGHUP))
    from a2c_ppo_acktr.run.interrupt import exit_on_signals
    exit_on_signals("nothing played")

import os
import signal

import gymnasium as gym
import numpy as np
import torch

from a2c_ppo_acktr.deploy.playback import add_checkpoint_args, load, play_envs
from a2c_ppo_acktr.envs.sb3 import Monitor
from a2c_ppo_acktr.envs.single import render_offscreen
from a2c_ppo_acktr.errors import Error, fail
from a2c_ppo_acktr.evaluation import run_episodes
from a2c_ppo_acktr.run.checkpoint import build_policy
from a2c_ppo_acktr.run.interrupt import default_signals
from a2c_ppo_acktr.settings.arguments import Parser
from a2c_ppo_acktr.settings.checks import PLAYBACK_NUMBERS, check_numbers, check_paths

PROG = "enjoy.py"


def _fail(message):
    fail(message, prog=PROG)


def get_args(argv=None):
    p = Parser(prog="enjoy.py", description="Play a policy saved by main.py")
    add_checkpoint_args(p)
    p.add_argument("--non-det", action="store_true", help="sample actions instead of the mode")
    p.add_argument("--episodes", type=int, default=5, help="episodes to play (default: 5)")
    p.add_argument("--max-steps", type=int, default=None, help="stop after this many steps in all")
    p.add_argument("--seed", type=int, default=1, help="random seed; envs get seed + 1000")
    p.add_argument("--record", metavar="PATH", help="write the frames to PATH (.gif or .mp4)")
    p.add_argument("--no-render", action="store_true", help="no window, even with a display")
    args = p.parse_args(argv)
    if args.record is not None and os.path.splitext(args.record)[1].lower() not in (".gif", ".mp4"):
        _fail(f"--record expects a .gif or .mp4 path, got {args.record!r}")
    try:
        check_numbers(args, PLAYBACK_NUMBERS)
        check_paths(args, ["load_dir"])
    except Error as e:
        _fail(str(e))
    return args


def _first_env(envs):
    """Env 0 of the DummyVecEnv under the wrapper stack (a gym env, with its wrappers)."""
    while not hasattr(envs, "envs"):
        envs = envs.venv
    return envs.envs[0]


def open_writer(path, env):
    import imageio.v2 as imageio
    atari = hasattr(env.unwrapped, "ale")  # one step = 4 frames at 60 Hz
    fps = 15 if atari else env.metadata.get("render_fps", 30)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    if path.lower().endswith(".gif"):
        return imageio.get_writer(path, duration=1000 / fps, loop=0)
    return imageio.get_writer(path, fps=fps, macro_block_size=2)


def close_whole(writer) -> bool:
    """Close ``writer`` (a GIF is encoded here, seconds): a Ctrl-C meanwhile is held until the
    video is whole; -> whether one came."""
    held = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: held.append(signum))
    try:
        writer.close()
    finally:
        signal.signal(signal.SIGINT, previous)
    return bool(held)


def play(args, policy, envs, writer):
    """Run the episodes; print and return their raw returns."""
    monitor = _first_env(envs)
    while not isinstance(monitor, Monitor):
        monitor = monitor.env
    returns = []

    def on_step(action, reward, infos):
        if writer is not None:
            writer.append_data(envs.render())
        for info in infos:
            episode = info.get("episode")  # the Monitor's: raw return, all lives for Atari
            if episode is not None:
                returns.append(float(episode["r"]))
                print(f"episode {len(returns)}: return {returns[-1]:.1f}, length {episode['l']}",
                      flush=True)

    interrupted = False
    try:
        run_episodes(policy, envs, args.episodes, not args.non_det, on_step, args.max_steps)
    except KeyboardInterrupt:  # Ctrl-C while watching: stop, keeping the video and the summary
        print()
        interrupted = True
    if len(returns) < args.episodes and monitor.rewards:
        print(f"episode {len(returns) + 1}: return {sum(monitor.rewards):.1f}, length "
              f"{len(monitor.rewards)} (unfinished)")
    if returns:
        print(f"{len(returns)} episodes: return {np.mean(returns):.1f} ± {np.std(returns):.1f} "
              f"(min {np.min(returns):.1f}, max {np.max(returns):.1f})")
    if interrupted:  # summed up: on to main's line and exit status 130, the video written first
        raise KeyboardInterrupt
    return returns


def main(argv=None):
    args = get_args(argv)
    try:
        return watch(args)
    except Error as e:
        _fail(str(e))
    except KeyboardInterrupt:  # before, while or after playing (play() sums up what it played)
        kept = f"; wrote {args.record} (what was played)" if getattr(args, "wrote", False) else ""
        print(f"{PROG}: interrupted{kept}", file=sys.stderr)
        return 130


def watch(args) -> int:
    path, ckpt = load(args)
    torch.set_num_threads(1)
    display = render_offscreen()
    render_mode = ("rgb_array" if args.record
                   else "human" if display and not args.no_render else None)
    if render_mode == "human":
        print(f"playing in a window on display {os.environ.get('DISPLAY') or 'wayland'}")
    elif not args.record:
        print("playing without a window (" + ("--no-render" if args.no_render else
              "no display found: DISPLAY and WAYLAND_DISPLAY are unset")
              + "); --record out.gif writes what it plays")
    with play_envs(args, ckpt, render_mode) as envs:
        writer = None
        try:
            policy = build_policy(ckpt, path, envs)
            if args.record:
                writer = open_writer(args.record, _first_env(envs))
            play(args, policy, envs, writer)
        except gym.error.DependencyNotInstalled as e:  # e.g. pygame, to render classic control
            _fail(f"cannot render {args.env_name}: {e}")
        finally:
            if writer is not None:
                interrupted = close_whole(writer)
                args.wrote = True
                if interrupted:
                    raise KeyboardInterrupt
    if args.record:
        print(f"wrote {args.record}")
    return 0


if __name__ == "__main__":
    default_signals()  # the imports are done: Ctrl-C is a KeyboardInterrupt, which main catches
    sys.exit(main())
