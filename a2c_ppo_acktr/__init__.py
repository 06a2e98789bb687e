"""a2c_ppo_acktr: minimal, hackable on-policy deep RL (A2C, PPO) for gymnasium and torch."""
