"""A run's policy history (``main.py --save-history N``) evaluated into a learning curve of
deterministic returns, one point per kept checkpoint (``scripts/plot.py --history``)."""
import os
import tempfile

import numpy as np

from a2c_ppo_acktr.envs import make_vec_envs
from a2c_ppo_acktr.evaluation import run_episodes
from a2c_ppo_acktr.run.checkpoint import (
    CheckpointError,
    build_policy,
    env_options,
    history,
    load_policy_checkpoint,
)


def evaluate_history(directory: str, num_episodes: int = 10, seed: int = 1000
                     ) -> list[tuple[int, list[float]]]:
    """(env steps, ``num_episodes`` deterministic raw returns) of every checkpoint in
    ``directory``, oldest first. Every checkpoint plays the same env seeds, so the points differ
    by the policy only. ``CheckpointError`` when there is nothing to evaluate."""
    if not os.path.isdir(directory):
        raise CheckpointError(f"no policy history at {directory} (main.py --save-history N keeps "
                              "<save-dir>/<algo>/<env>_seed<seed>_history/<steps>.pt)")
    found = history(directory)
    if not found:
        raise CheckpointError(f"{directory} holds no <steps>.pt checkpoints of --save-history")
    return [(steps, evaluate_checkpoint(path, num_episodes, seed))
            for steps, path in found]


def evaluate_checkpoint(path: str, num_episodes: int = 10, seed: int = 1000) -> list[float]:
    """``num_episodes`` raw returns of the checkpoint's deterministic policy (whole games on
    Atari): the first episode of each of ``num_episodes`` envs, seeded ``seed``, ``seed`` + 1,
    ..., played side by side; ``CheckpointError`` if it cannot be loaded."""
    ckpt = load_policy_checkpoint(path)
    with tempfile.TemporaryDirectory() as log_dir:  # the Monitor's raw returns
        envs = make_vec_envs(ckpt["env_name"], seed, num_episodes, None, log_dir, "cpu",
                             True, episodic_life=False, **env_options(ckpt))
        try:
            return run_episodes(build_policy(ckpt, path, envs), envs, num_episodes,
                                first_per_env=True)
        finally:
            envs.close()


def history_curve(points: list[tuple[int, list[float]]], band: str = "minmax"
                  ) -> tuple[np.ndarray, ...]:
    """-> (steps, mean, lo, hi) over each point's episodes, as ``curves.aggregate`` returns them:
    ``band`` "minmax" (lo, hi: min and max), "std" (mean -/+ std) or "none" (lo = hi = mean)."""
    steps = np.array([s for s, _ in points], dtype=float)
    returns = [np.asarray(r, dtype=float) for _, r in points]
    mean = np.array([r.mean() for r in returns])
    if band == "minmax":
        return steps, mean, np.array([r.min() for r in returns]), np.array([r.max() for r in returns])
    spread = np.array([r.std() for r in returns]) if band == "std" else np.zeros_like(mean)
    return steps, mean, mean - spread, mean + spread
