"""Record expert trajectories for GAIL from a policy trained by ``main.py``.

Usage::

    python gail_experts/generate.py --env-name E --load-dir D [--algo ppo] [--episodes N]
                                    [--seed S] [--out-dir gail_experts]

    python gail_experts/generate.py --env-name CartPole-v1 --load-dir trained_models --episodes 10

The checkpoint is found as by ``enjoy.py``. Its policy acts deterministically, the run's
observation normalization frozen, for ``--episodes`` episodes on the env it trained on (its env
kwargs), seeded ``seed + 1000``; ``<out-dir>/trajs_<env-name>.pt`` gets the raw observations and
the actions the env ran (Box actions clipped), in the layout of ``a2c_ppo_acktr/algo/gail.py``,
written atomically.
"""
# ruff: noqa: E402  (signals are handled before the slow imports below)
import sys

if __name__ == "__main__":  # a signal during the imports (seconds) ends the process in one line
    import signal  # held from here, as importing the package imports gymnasium, until handled
    signal.pthread_sigmask(signal.SIG_BLOCK, (signal.SIGINT, signal.SIGTERM, signal.SIGHUP))
    from a2c_ppo_acktr.run.interrupt import exit_on_signals
    exit_on_signals("nothing written")

import numpy as np
import torch
from gymnasium import spaces

from a2c_ppo_acktr.algo.gail import save_expert_file
from a2c_ppo_acktr.deploy.playback import add_checkpoint_args, load, play_envs
from a2c_ppo_acktr.envs import get_vec_normalize
from a2c_ppo_acktr.errors import Error, fail
from a2c_ppo_acktr.evaluation import run_episodes
from a2c_ppo_acktr.run.checkpoint import build_policy
from a2c_ppo_acktr.run.interrupt import default_signals
from a2c_ppo_acktr.run.rundir import check_dir
from a2c_ppo_acktr.settings.arguments import Parser
from a2c_ppo_acktr.settings.checks import PLAYBACK_NUMBERS, check_numbers, check_paths

PROG = "generate.py"


def _fail(message):
    fail(message, prog=PROG)


def get_args(argv=None):
    p = Parser(prog=PROG, description="Record expert trajectories for GAIL")
    add_checkpoint_args(p)
    p.add_argument("--episodes", type=int, default=10, help="episodes to record (default: 10)")
    p.add_argument("--seed", type=int, default=1, help="random seed; envs get seed + 1000")
    p.add_argument("--out-dir", default="./gail_experts",
                   help="where trajs_<env-name>.pt goes (default: ./gail_experts, the default "
                   "--gail-experts-dir of main.py)")
    args = p.parse_args(argv)
    try:
        check_numbers(args, PLAYBACK_NUMBERS)
        check_paths(args, ["load_dir", "out_dir"])
        check_dir(args.out_dir, "--out-dir")  # before the episodes are played, not after
    except Error as e:
        _fail(str(e))
    return args


def record(policy, envs, episodes):
    """Play ``episodes`` deterministic episodes; returns one (states, actions, rewards) per episode.

    states (T, obs_dim) raw float32, actions (T, 1) int64 or (T, action_dim) float32, rewards (T,).
    """
    vec_norm = get_vec_normalize(envs)
    space = envs.action_space
    trajectories, steps, state = [], [], None

    def on_step(action, reward, infos):
        nonlocal state
        if action is not None:  # not the reset
            executed = action[0].numpy()
            if isinstance(space, spaces.Box):  # what the env ran (VecPyTorch clips the same way)
                executed = np.clip(executed, space.low, space.high)
            steps.append((state, executed, float(reward[0, 0])))
        state = vec_norm.raw_obs[0]  # what the policy sees next, before normalization
        for info in infos:
            episode = info.get("episode")  # the Monitor's raw return and length
            if episode is not None:
                states, actions, rewards = zip(*steps)
                trajectories.append((np.stack(states), np.stack(actions),
                                     np.array(rewards, np.float32)))
                steps.clear()
                print(f"episode {len(trajectories)}: return {float(episode['r']):.1f}, "
                      f"length {int(episode['l'])}", flush=True)

    run_episodes(policy, envs, episodes, deterministic=True, on_step=on_step)
    return trajectories


def to_expert_data(trajectories, env_name, observation_space, action_space):
    """Pad to the longest episode and pack as the expert file dict (see algo/gail.py)."""
    lengths = torch.tensor([len(r) for _, _, r in trajectories], dtype=torch.int64)
    num, horizon = len(trajectories), int(lengths.max())
    discrete = isinstance(action_space, spaces.Discrete)
    states = torch.zeros(num, horizon, *observation_space.shape)
    actions = torch.zeros(num, horizon, 1 if discrete else action_space.shape[0],
                          dtype=torch.int64 if discrete else torch.float32)
    rewards = torch.zeros(num, horizon)
    for i, (s, a, r) in enumerate(trajectories):
        n = len(r)
        states[i, :n] = torch.from_numpy(s).float()
        actions[i, :n] = torch.from_numpy(a).reshape(n, -1).to(actions.dtype)
        rewards[i, :n] = torch.from_numpy(r)
    return {"states": states, "actions": actions, "rewards": rewards, "lengths": lengths,
            "env_name": env_name, "obs_shape": list(observation_space.shape),
            "action_space": str(action_space)}


def main(argv=None):
    args = get_args(argv)
    try:
        path, ckpt = load(args)
        torch.set_num_threads(1)
        with play_envs(args, ckpt) as envs:
            if len(envs.observation_space.shape) != 1:
                _fail(f"GAIL here takes vector observations; {args.env_name}'s are of shape "
                      f"{tuple(envs.observation_space.shape)}")
            policy = build_policy(ckpt, path, envs)
            trajectories = record(policy, envs, args.episodes)
        data = to_expert_data(trajectories, args.env_name, envs.observation_space,
                              envs.action_space)
        print(save_expert_file(data, args.out_dir))  # e.g. --out-dir is a file, the disk full
    except Error as e:
        _fail(str(e))
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted: nothing written", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    default_signals()  # the imports are done: Ctrl-C is a KeyboardInterrupt, which main catches
    sys.exit(main())
