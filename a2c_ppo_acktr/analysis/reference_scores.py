"""What a score is worth across envs: per env a random policy's score (0) and a reference score (1),
so that ``stats.normalize`` puts envs on one scale and results aggregate over a suite.

- **Atari**: human-normalized, with the published random and human scores of the 57 games (Mnih
  et al. 2015, "Human-level control through deep reinforcement learning", and Badia et al. 2020,
  "Agent57", for the 8 games the first lacks: the table rliable and CleanRL use).
- **MuJoCo**: a uniform random policy's mean return on the v5 envs, measured here
  (``python -m a2c_ppo_acktr.analysis.reference_scores HalfCheetah-v5 ...``: 100 episodes, seed 0),
  and Tianshou's SAC at 1M steps (MuJoCo v3, mean of 10 seeds, its ``examples/mujoco`` README):
  a strong off-policy score at this project's budget, for every env of the suite.
- **Classic control**: the random policy measured the same way, and gymnasium's
  ``reward_threshold`` (the return at which the env counts as solved).
"""
from __future__ import annotations

import re
import sys

import numpy as np

SOURCES = {
    "atari": "human-normalized: random and human scores of Mnih et al. 2015 and Badia et al. 2020",
    "mujoco": "random policy (measured on v5, 100 episodes) to Tianshou's SAC at 1M steps (v3)",
    "classic": "random policy (measured, 100 episodes) to gymnasium's reward_threshold",
}

ATARI_RANDOM = {
    "alien": 227.8, "amidar": 5.8, "assault": 222.4, "asterix": 210.0, "asteroids": 719.1,
    "atlantis": 12850.0, "bankheist": 14.2, "battlezone": 2360.0, "beamrider": 363.9,
    "berzerk": 123.7, "bowling": 23.1, "boxing": 0.1, "breakout": 1.7, "centipede": 2090.9,
    "choppercommand": 811.0, "crazyclimber": 10780.5, "defender": 2874.5, "demonattack": 152.1,
    "doubledunk": -18.6, "enduro": 0.0, "fishingderby": -91.7, "freeway": 0.0, "frostbite": 65.2,
    "gopher": 257.6, "gravitar": 173.0, "hero": 1027.0, "icehockey": -11.2, "jamesbond": 29.0,
    "kangaroo": 52.0, "krull": 1598.0, "kungfumaster": 258.5, "montezumarevenge": 0.0,
    "mspacman": 307.3, "namethisgame": 2292.3, "phoenix": 761.4, "pitfall": -229.4,
    "pong": -20.7, "privateeye": 24.9, "qbert": 163.9, "riverraid": 1338.5, "roadrunner": 11.5,
    "robotank": 2.2, "seaquest": 68.4, "skiing": -17098.1, "solaris": 1236.3,
    "spaceinvaders": 148.0, "stargunner": 664.0, "surround": -10.0, "tennis": -23.8,
    "timepilot": 3568.0, "tutankham": 11.4, "upndown": 533.4, "venture": 0.0,
    "videopinball": 0.0, "wizardofwor": 563.5, "yarsrevenge": 3092.9, "zaxxon": 32.5,
}
ATARI_HUMAN = {
    "alien": 7127.7, "amidar": 1719.5, "assault": 742.0, "asterix": 8503.3, "asteroids": 47388.7,
    "atlantis": 29028.1, "bankheist": 753.1, "battlezone": 37187.5, "beamrider": 16926.5,
    "berzerk": 2630.4, "bowling": 160.7, "boxing": 12.1, "breakout": 30.5, "centipede": 12017.0,
    "choppercommand": 7387.8, "crazyclimber": 35829.4, "defender": 18688.9, "demonattack": 1971.0,
    "doubledunk": -16.4, "enduro": 860.5, "fishingderby": -38.7, "freeway": 29.6,
    "frostbite": 4334.7, "gopher": 2412.5, "gravitar": 3351.4, "hero": 30826.4, "icehockey": 0.9,
    "jamesbond": 302.8, "kangaroo": 3035.0, "krull": 2665.5, "kungfumaster": 22736.3,
    "montezumarevenge": 4753.3, "mspacman": 6951.6, "namethisgame": 8049.0, "phoenix": 7242.6,
    "pitfall": 6463.7, "pong": 14.6, "privateeye": 69571.3, "qbert": 13455.0, "riverraid": 17118.0,
    "roadrunner": 7845.0, "robotank": 11.9, "seaquest": 42054.7, "skiing": -4336.9,
    "solaris": 12326.7, "spaceinvaders": 1668.7, "stargunner": 10250.0, "surround": 6.5,
    "tennis": -8.3, "timepilot": 5229.2, "tutankham": 167.6, "upndown": 11693.2,
    "venture": 1187.5, "videopinball": 17667.9, "wizardofwor": 4756.5, "yarsrevenge": 54576.9,
    "zaxxon": 9173.3,
}
# env id without its version -> (random policy, reference); the suite each belongs to
OTHER = {
    "HalfCheetah": (-282.5, 12138.8, "mujoco"),
    "Hopper": (16.7, 3542.2, "mujoco"),
    "Walker2d": (1.8, 5007.0, "mujoco"),
    "Ant": (-48.0, 5850.2, "mujoco"),
    "Humanoid": (112.6, 5488.5, "mujoco"),
    "CartPole": (23.7, 475.0, "classic"),
    "Acrobot": (-497.1, -100.0, "classic"),
}


def atari_game(env_id: str) -> str | None:
    """``PongNoFrameskip-v4``, ``ALE/Pong-v5`` -> ``pong``; None if no Atari game's id."""
    name = re.sub(r"(NoFrameskip|Deterministic)?-v\d+$", "", env_id.split("/")[-1]).lower()
    return name if env_id.startswith("ALE/") or name in ATARI_HUMAN else None


def bounds(env_id: str) -> tuple[float, float, str] | None:
    """``(random score, reference score, suite)`` of ``env_id``, None if the table lacks it."""
    game = atari_game(env_id)
    if game in ATARI_HUMAN:
        return ATARI_RANDOM[game], ATARI_HUMAN[game], "atari"
    return OTHER.get(re.sub(r"-v\d+$", "", env_id))


def random_score(env_id: str, episodes: int = 100, seed: int = 0) -> float:
    """The mean return of a uniform random policy over ``episodes`` episodes (the table's
    random scores of MuJoCo and classic control)."""
    import gymnasium as gym

    env = gym.make(env_id)
    env.action_space.seed(seed)
    returns = []
    for k in range(episodes):
        env.reset(seed=seed + k)
        total, done = 0.0, False
        while not done:
            _, reward, terminated, truncated, _ = env.step(env.action_space.sample())
            total += float(reward)
            done = terminated or truncated
        returns.append(total)
    env.close()
    return float(np.mean(returns))


if __name__ == "__main__":
    for env_id in sys.argv[1:]:
        print(f"{env_id}: random policy {random_score(env_id):.1f}")
