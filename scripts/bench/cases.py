"""The speed cases of issue #2: hyper-parameters shared by ours and stable-baselines3.

``scripts/bench/fps.py`` times whole training runs of them, ``scripts/bench/ceiling.py`` the
parts of them that no implementation can skip.
"""
CASES = {
    "a": dict(algo="ppo", env="CartPole-v1", n_envs=8, n_steps=128, epochs=4, minibatches=4,
              total=100_000, lr=2.5e-4, ent=0.01, gae=True),
    "b": dict(algo="a2c", env="CartPole-v1", n_envs=8, n_steps=5, epochs=1, minibatches=1,
              total=100_000, lr=7e-4, ent=0.01, gae=False),
    "c": dict(algo="ppo", env="HalfCheetah-v5", n_envs=1, n_steps=2048, epochs=10, minibatches=32,
              total=50_000, lr=3e-4, ent=0.0, gae=True),
    "d": dict(algo="ppo", env="PongNoFrameskip-v4", n_envs=8, n_steps=128, epochs=4,
              minibatches=4, total=20_000, lr=2.5e-4, ent=0.01, gae=True),
}
