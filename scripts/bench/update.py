"""One agent update of a speed case, alone, in thread CPU time: for comparing two versions of it.

    python scripts/bench/update.py --case b                  # A2C's update of case (b)
    python scripts/bench/update.py --case b --vs ../base     # alternating with another tree's code
    python scripts/bench/update.py --recipe tuned --env Hopper-v5 [--compile]   # as main.py builds it

The case's policy and agent (``cases.py``: algorithm, envs x steps, epochs x minibatches, lr) on
a rollout of random observations, actions and returns; ``agent.update`` is timed after a warm-up
(every epoch and minibatch, the optimizer included). Thread CPU time rather than wall time: a
process sharing the cores moves it less, though a busy machine still slows each call. Prints µs
per update and per gradient step. ``--recipe R --env E`` times the update of ``main.py --env-name
E --recipe R`` as ``main.py`` builds it (``run.build``: the recipe's network and agent, the speed
seam, ``--compile`` if given), its first (compiling) update's wall time printed apart.
``--vs TREE`` runs this script from the current code and from TREE's (``PYTHONPATH=TREE``) in
turn, ``--pairs`` times each, and prints each pair's ratio (this code / TREE's) and their
median. Whole runs against SB3: ``fps.py``.
"""
import argparse
import os
import statistics
import subprocess
import sys
import time

import torch
from gymnasium import spaces

from cases import CASES

# Each case's observation and action spaces (Pong: the Atari stack's 4 stacked 84 x 84 frames).
SPACES = {"CartPole-v1": ((4,), spaces.Discrete(2)),
          "HalfCheetah-v5": ((17,), spaces.Box(-1.0, 1.0, (6,))),
          "PongNoFrameskip-v4": ((4, 84, 84), spaces.Discrete(6))}
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def time_update(case: str, updates: int) -> tuple[float, int]:
    """-> thread CPU µs per update of ``case``, and its gradient steps per update."""
    from a2c_ppo_acktr.algo import A2C_ACKTR, PPO
    from a2c_ppo_acktr.model import Policy
    from a2c_ppo_acktr.storage import RolloutStorage
    c = CASES[case]
    obs_shape, action_space = SPACES[c["env"]]
    torch.manual_seed(0)
    torch.set_num_threads(1 if len(obs_shape) == 1 else 2)  # as main.py's build
    policy = Policy(obs_shape, action_space)
    if c["algo"] == "ppo":
        agent = PPO(policy, 0.2, c["epochs"], c["minibatches"], 0.5, c["ent"], lr=c["lr"],
                    eps=1e-5, max_grad_norm=0.5)
    else:
        agent = A2C_ACKTR(policy, 0.5, c["ent"], lr=c["lr"], eps=1e-5, alpha=0.99,
                          max_grad_norm=0.5)
    rollouts = RolloutStorage(c["n_steps"], c["n_envs"], obs_shape, action_space, 1,
                              obs_dtype=torch.uint8 if len(obs_shape) == 3 else torch.float32)
    if len(obs_shape) == 3:
        rollouts.obs.random_(0, 256)
    else:
        rollouts.obs.normal_()
    with torch.no_grad():
        value, action, log_prob, _ = policy.act(rollouts.obs[0], rollouts.recurrent_hidden_states[0],
                                                rollouts.masks[0])
    rollouts.actions.copy_(action.expand_as(rollouts.actions))
    rollouts.action_log_probs.copy_(log_prob.expand_as(rollouts.action_log_probs))
    rollouts.rewards.normal_()
    rollouts.compute_returns(torch.zeros(c["n_envs"], 1), c["gae"], 0.99, 0.95)
    for _ in range(max(2, updates // 10)):  # warm-up: allocations, the optimizer's state
        agent.update(rollouts)
    start = time.thread_time()
    for _ in range(updates):
        agent.update(rollouts)
    steps = c["epochs"] * c["minibatches"]
    return (time.thread_time() - start) / updates * 1e6, steps


def time_recipe(recipe: str, env: str, updates: int, compile: bool) -> tuple[float, int, float]:
    """-> thread CPU µs per update of ``env``'s ``recipe`` as ``main.py`` builds it, its gradient
    steps per update, and the wall seconds of its first update (compiling under ``compile``)."""
    import gymnasium as gym

    from a2c_ppo_acktr import speed
    from a2c_ppo_acktr.envs.vec_env import space_shape
    from a2c_ppo_acktr.model import policy_for
    from a2c_ppo_acktr.run.build import make_agent
    from a2c_ppo_acktr.settings.arguments import get_config
    from a2c_ppo_acktr.storage import RolloutStorage
    cfg = get_config(["--env-name", env, "--recipe", recipe] + ["--compile"] * compile)
    probe = gym.make(env, **cfg.env.kwargs)  # the recipe's observations (Ant's: no contact forces)
    obs_space, action_space = probe.observation_space, probe.action_space
    probe.close()
    torch.manual_seed(0)
    torch.set_num_threads(1)  # as main.py's build for vector observations
    policy = policy_for(obs_space, action_space, cfg.policy)
    agent = make_agent(cfg.algo, policy)
    if compile:
        speed.compile_agent(agent, torch.device("cpu"))
    speed.speed_up(policy, agent, compiled=compile)
    n_steps, n_envs = cfg.sampling.num_steps, cfg.env.num_processes
    rollouts = RolloutStorage(n_steps, n_envs, space_shape(obs_space), action_space, 1)
    rollouts.obs.normal_()
    rollouts.actions.uniform_(-1, 1)
    rollouts.action_log_probs.normal_(-3.0, 0.1)
    rollouts.rewards.normal_()
    rollouts.compute_returns(torch.zeros(n_envs, 1), cfg.returns)
    start = time.perf_counter()
    agent.update(rollouts)
    first = time.perf_counter() - start
    agent.update(rollouts)  # warm-up: allocations
    start = time.thread_time()
    for _ in range(updates):
        agent.update(rollouts)
    steps = cfg.algo.ppo_epoch * cfg.algo.num_mini_batch
    return (time.thread_time() - start) / updates * 1e6, steps, first


def run_tree(tree: str, case: str, updates: int) -> float:
    """This script's µs per update with ``tree``'s code, in a fresh process."""
    env = {**os.environ, "PYTHONPATH": os.path.abspath(tree)}
    out = subprocess.run([sys.executable, os.path.abspath(__file__), "--case", case,
                          "--updates", str(updates)], env=env, check=True, capture_output=True,
                         text=True).stdout
    return float(out.split("us per update")[0].split()[-1])


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--case", choices=sorted(CASES), default="b")
    p.add_argument("--recipe", help="instead of --case: this recipe's update on --env, as main.py "
                   "builds it")
    p.add_argument("--env", help="--recipe's env (a MuJoCo id)")
    p.add_argument("--compile", action="store_true", help="with --recipe: main.py's --compile")
    p.add_argument("--updates", type=int, default=None,
                   help="updates timed (default: 2000 for A2C, 20 for PPO)")
    p.add_argument("--vs", metavar="TREE", help="alternate with the code of this checkout")
    p.add_argument("--pairs", type=int, default=6, help="with --vs: runs of each (default 6)")
    args = p.parse_args(argv)
    if args.recipe or args.env or args.compile:
        if not (args.recipe and args.env) or args.vs:
            p.error("--recipe and --env go together, without --vs; --compile needs them")
        us, steps, first = time_recipe(args.recipe, args.env, args.updates or 4, args.compile)
        print(f"{args.env} --recipe {args.recipe}{' --compile' * args.compile}: {us:.0f} us per "
              f"update, {us / steps:.0f} us per gradient step ({steps} per update); first update "
              f"{first:.1f} s")
        return
    updates = args.updates or (2000 if CASES[args.case]["algo"] == "a2c" else 20)
    if args.vs is None:
        us, steps = time_update(args.case, updates)
        print(f"case {args.case}: {us:.0f} us per update, {us / steps:.0f} us per gradient step "
              f"({steps} per update)")
        return
    ratios = []
    for i in range(args.pairs):
        ours, theirs = run_tree(REPO, args.case, updates), run_tree(args.vs, args.case, updates)
        ratios.append(ours / theirs)
        print(f"pair {i + 1}: this code {ours:.0f} us, {args.vs} {theirs:.0f} us, "
              f"ratio {ratios[-1]:.2f}", flush=True)
    print(f"case {args.case}: median ratio this code / {args.vs} {statistics.median(ratios):.2f} "
          f"({min(ratios):.2f}-{max(ratios):.2f}, {args.pairs} pairs)")


if __name__ == "__main__":
    main()
