"""a2c_ppo_acktr: minimal, hackable on-policy deep RL (A2C, PPO) for gymnasium and torch."""
from a2c_ppo_acktr import realtime  # noqa: E402,F401  (registers RealTimeDrone-v0)
