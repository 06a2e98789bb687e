"""Episodes written to SB3's monitor files by vector envs that step a whole batch natively
(``EpisodeMonitor``); read back by ``analysis/episodes.py``.

Each env of a run writes ``<rank>.monitor.csv`` into the run's log dir::

    #{"t_start": 1700000000.0, "env_id": "CartPole-v1"}
    r,l,t
    12.0,12,0.051

one row per finished episode: return, length, wall time in seconds since ``t_start``.
"""
import json
import os
import time

import numpy as np

from a2c_ppo_acktr.envs.sb3 import ResultsWriter


class EpisodeMonitor:
    """What SB3's ``Monitor`` does for one env, done for a batch of ``num_envs`` envs at once.

    Sums each env's raw reward and counts its steps; at an episode's end it sets
    ``infos[i]["episode"] = {"r", "l", "t"}`` and, with a ``log_dir``, appends that row to
    ``<log_dir>/<first_rank + i>.monitor.csv`` (SB3's format: a JSON header line, then ``r,l,t``),
    so ``scripts/plot.py`` and the logger read these files like those of the classic stack.
    ``append`` continues existing files and their clock (``--resume``).
    """

    def __init__(self, num_envs: int, env_id: str, log_dir: str | None = None,
                 first_rank: int = 0, append: bool = False) -> None:
        self.returns = np.zeros(num_envs)                # float64, as Monitor's sum of floats
        self.lengths = np.zeros(num_envs, np.int64)
        self.t_start = np.full(num_envs, time.time())  # per env, as each Monitor has its own
        self.writers = []
        if log_dir is not None:
            for i in range(num_envs):
                path = os.path.join(log_dir, f"{first_rank + i}.monitor.csv")
                t_start = monitor_t_start(path) if append else None
                self.writers.append(ResultsWriter(
                    path, header={"t_start": self.t_start[i], "env_id": env_id},
                    override_existing=t_start is None))
                if t_start is not None:  # appended rows continue the file's clock
                    self.t_start[i] = t_start

    def step(self, rewards: np.ndarray, ended: np.ndarray, infos: list) -> None:
        """Count one step of raw ``rewards`` (N,); close the episodes of envs where ``ended``."""
        self.returns += rewards
        self.lengths += 1
        if not ended.any():
            return
        now = time.time()
        for i in np.flatnonzero(ended).tolist():
            info = {"r": round(float(self.returns[i]), 6), "l": int(self.lengths[i]),
                    "t": round(now - float(self.t_start[i]), 6)}
            infos[i]["episode"] = info
            if self.writers:
                self.writers[i].write_row(info)
        self.returns[ended] = 0.0
        self.lengths[ended] = 0

    def close(self) -> None:
        for writer in self.writers:
            writer.close()
        self.writers = []


def monitor_t_start(path: str) -> float | None:
    """``t_start`` in the JSON header of an existing monitor file, or None."""
    try:
        with open(path) as f:
            return float(json.loads(f.readline()[1:])["t_start"])
    except (OSError, ValueError, KeyError):
        return None
