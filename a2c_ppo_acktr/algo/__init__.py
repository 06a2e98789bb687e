"""One module per algorithm, each an ``Agent`` (``agent.py``): ``update(rollouts) -> {statistic:
value}``, ``adjust_lr(env_steps)``, ``optimizer``, ``state_dict`` / ``load_state_dict``; reward
models (``gail.py``'s) are ``RewardModel``s."""
from a2c_ppo_acktr.algo.a2c_acktr import A2C_ACKTR
from a2c_ppo_acktr.algo.agent import Agent, LinearDecay, RewardModel
from a2c_ppo_acktr.algo.kfac import KFACOptimizer
from a2c_ppo_acktr.algo.ppo import PPO

ALGOS = ("a2c", "ppo", "acktr")  # --algo's names

__all__ = ["ALGOS", "A2C_ACKTR", "PPO", "Agent", "KFACOptimizer", "LinearDecay", "RewardModel"]
