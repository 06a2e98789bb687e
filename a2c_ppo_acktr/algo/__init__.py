"""One module per algorithm; each agent has ``update(rollouts) -> value_loss, action_loss, dist_entropy``."""
from a2c_ppo_acktr.algo.a2c_acktr import A2C_ACKTR
from a2c_ppo_acktr.algo.kfac import KFACOptimizer
from a2c_ppo_acktr.algo.ppo import PPO

ALGOS = ("a2c", "ppo", "acktr")  # --algo's names

__all__ = ["ALGOS", "A2C_ACKTR", "KFACOptimizer", "PPO"]
