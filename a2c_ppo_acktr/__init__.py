"""a2c_ppo_acktr: minimal, hackable on-policy deep RL (A2C, PPO, ACKTR, GAIL) for gymnasium and torch.

Importing it registers the real-time demo's id ``RealTimeDrone-v0`` with gymnasium, as ale-py
registers the ALE ids: ``gym.make("RealTimeDrone-v0")`` after ``import a2c_ppo_acktr``, or
``gym.make("a2c_ppo_acktr:RealTimeDrone-v0")`` from any library.
"""
from a2c_ppo_acktr.realtime import drone

drone.register()
