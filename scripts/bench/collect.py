"""Rollout collection alone (``rollout.collect_rollout``: policy forward + env steps + storage,
no update) with the CNN policy on Atari, for two ``--vec-env`` kinds in alternating rounds.

    python scripts/bench/collect.py                                   # ale vs ale-pipelined
    python scripts/bench/collect.py --kinds ale dummy --num-envs 8 --rounds 5 --torch-threads 1

Reports env steps/s of collection per kind (median over rounds) and the ratio of the first two.
"""
import argparse
import statistics
import time

import torch

from a2c_ppo_acktr.envs import make_vec_envs
from a2c_ppo_acktr.model import Policy
from a2c_ppo_acktr.rollout import collect_rollout
from a2c_ppo_acktr.storage import RolloutStorage


def main(argv=None):
    p = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n\n")[0])
    p.add_argument("--env-id", default="PongNoFrameskip-v4")
    p.add_argument("--kinds", nargs="+", default=["ale", "ale-pipelined"])
    p.add_argument("--num-envs", type=int, default=8)
    p.add_argument("--num-steps", type=int, default=128, help="steps per rollout")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--torch-threads", type=int, default=None,
                   help="intra-op threads (default: torch's, as main.py runs CNNs)")
    args = p.parse_args(argv)
    if args.torch_threads:
        torch.set_num_threads(args.torch_threads)
    envs = {kind: make_vec_envs(args.env_id, 0, args.num_envs, None, None, "cpu", False,
                                vec_env=kind) for kind in args.kinds}
    first = envs[args.kinds[0]]
    policy = Policy(first.observation_space.shape, first.action_space)
    fps = {kind: [] for kind in args.kinds}
    try:
        for _ in range(args.rounds):
            for kind, venv in envs.items():  # alternate: the machine's speed drifts
                store = RolloutStorage(args.num_steps, args.num_envs, venv.observation_space.shape,
                                       venv.action_space, 1, obs_dtype=torch.uint8)
                store.obs[0].copy_(venv.reset())
                start = time.perf_counter()
                collect_rollout(venv, policy, store, [], True)
                fps[kind].append(args.num_steps * args.num_envs / (time.perf_counter() - start))
    finally:
        for venv in envs.values():
            venv.close()
    for kind, values in fps.items():
        print(f"{kind:<14} {statistics.median(values):8.0f} env-steps/s  "
              f"{[round(v) for v in values]}")
    a, b = args.kinds[:2]
    print(f"{a}/{b}: {statistics.median(fps[a]) / statistics.median(fps[b]):.2f}x")


if __name__ == "__main__":
    main()
