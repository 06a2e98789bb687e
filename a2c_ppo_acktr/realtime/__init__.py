"""Real-time environments with rtgym's timing semantics (``env``); ``drone`` is a demo device.

Importing this package registers nothing: ``drone.register()`` adds ``RealTimeDrone-v0``.
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
