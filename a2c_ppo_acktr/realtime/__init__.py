"""Real-time environments with rtgym's timing semantics (``env``); ``drone`` is a demo device.

``import a2c_ppo_acktr`` registers the demo's id ``RealTimeDrone-v0`` (``drone.register()``).
"""
from a2c_ppo_acktr.realtime.env import (
    BENCHMARK_KEYS,
    DEFAULT_CONFIG,
    RealTimeEnv,
    RealTimeGymInterface,
    mean_benchmarks,
    merge_config,
)

__all__ = ["BENCHMARK_KEYS", "DEFAULT_CONFIG", "RealTimeEnv", "RealTimeGymInterface",
           "mean_benchmarks", "merge_config"]
