"""Benchmark recipes: the ``main.py`` flags of each suite's envs, the original's and tuned ones.

One place for ``scripts/benchmark.py`` and the commands in docs/results.md. A recipe holds every
flag except ``--env-name``, ``--num-env-steps``, ``--seed`` and the output directories.
``python -m a2c_ppo_acktr.run.recipes HalfCheetah-v5 tuned`` prints the full command.

The tuned HalfCheetah and Ant recipes follow Tianshou's MuJoCo PPO example
(examples/mujoco/mujoco_ppo.py): 2048 steps per update from many envs at once, minibatches of 64,
raw advantages, the value's squared error unclipped, a small initial action mean
(``--action-mean-gain 0.01``) and std (``--log-std-init -0.5``); unlike Tianshou, a constant
learning rate and advantages computed once per update. Humanoid's translates rl-baselines3-zoo's
tuned PPO hyper-parameters (hyperparams/ppo.yml, MuJoCo v3): one env, so the zoo's ``batch_size``
b of ``n_steps`` n is our ``--num-mini-batch n/b``; SB3's loss (advantages standardized per
minibatch, no value clipping, and no 1/2 on the squared error: its ``vf_coef`` c is our
``--value-loss-coef`` 2c); its ``policy_kwargs`` as ``--hidden-size``, ``--activation``,
``--log-std-init``, ``--init``. Hopper's and Walker2d's start from CleanRL's settings (see
``TUNED``). What each recipe reached, and the alternatives tried: docs/results.md.
"""
import argparse
import shlex
import sys

RECIPES = ("original", "tuned")
SUITES = {
    "mujoco": ("HalfCheetah-v5", "Hopper-v5", "Walker2d-v5", "Ant-v5", "Humanoid-v5"),
    "atari": ("PongNoFrameskip-v4", "BreakoutNoFrameskip-v4", "BeamRiderNoFrameskip-v4"),
    "classic": ("CartPole-v1", "Acrobot-v1"),
}
BUDGETS = {"mujoco": 1_000_000, "atari": 10_000_000, "classic": 100_000}

_PPO = "--algo ppo --use-gae --log-interval 1"
ORIGINAL = {  # the original's README commands (classic: this project's CartPole quick start)
    "mujoco": f"{_PPO} --num-steps 2048 --num-processes 1 --lr 3e-4 --entropy-coef 0 "
              "--value-loss-coef 0.5 --ppo-epoch 10 --num-mini-batch 32 --gamma 0.99 "
              "--gae-lambda 0.95 --use-linear-lr-decay --use-proper-time-limits",
    "atari": f"{_PPO} --lr 2.5e-4 --clip-param 0.1 --value-loss-coef 0.5 --num-processes 8 "
             "--num-steps 128 --num-mini-batch 4 --use-linear-lr-decay --entropy-coef 0.01",
    "classic": f"{_PPO} --num-processes 8 --num-steps 32 --num-mini-batch 1 --ppo-epoch 20 "
               "--gae-lambda 0.8 --entropy-coef 0 --lr 1e-3 --use-linear-lr-decay "
               "--use-proper-time-limits",
}

_SB3_MUJOCO = (f"{_PPO} --num-processes 1 --use-proper-time-limits --advantage-norm minibatch "
               "--no-clipped-value-loss")
_CLEANRL_MUJOCO = (f"{ORIGINAL['mujoco']} --advantage-norm minibatch --action-mean-gain 0.01 "
                   "--log-std-init -0.7")
_BIG_RELU = "--hidden-size 256 --activation relu --log-std-init -2 --init default"
# 64 envs x 32 steps = Tianshou's 2048 per update; 32 minibatches of 64.
_TIANSHOU_MUJOCO = (f"{_PPO} --num-processes 64 --num-steps 32 --ppo-epoch 10 --num-mini-batch 32 "
                    "--lr 3e-4 --entropy-coef 0 --value-loss-coef 0.5 --gamma 0.99 "
                    "--gae-lambda 0.95 --use-proper-time-limits --advantage-norm none "
                    "--no-clipped-value-loss --action-mean-gain 0.01 --log-std-init -0.5 "
                    "--max-grad-norm 0.5 --clip-param 0.2")
TUNED = {
    # HalfCheetah and Ant: above the zoo's settings, which were their recipes before.
    "HalfCheetah-v5": _TIANSHOU_MUJOCO,
    "Ant-v5": _TIANSHOU_MUJOCO,
    # Hopper and Walker2d: CleanRL's ppo_continuous_action settings (the original's command with
    # advantages per minibatch) plus SB3's small initial action mean (gain 0.01) and a narrower
    # start (std 0.5); Hopper also drops value clipping. The zoo's stood still or fell on Hopper;
    # Tianshou's did no better on either.
    "Hopper-v5": f"{_CLEANRL_MUJOCO} --no-clipped-value-loss",
    "Walker2d-v5": _CLEANRL_MUJOCO,
    # Humanoid: the zoo's, made for 10M steps; at 1M level with the original's, above Tianshou's.
    "Humanoid-v5": f"{_SB3_MUJOCO} {_BIG_RELU} --num-steps 512 --num-mini-batch 2 --ppo-epoch 5 "
                   "--lr 3.56987e-5 --gamma 0.95 --gae-lambda 0.9 --clip-param 0.3 "
                   "--entropy-coef 0.00238306 --value-loss-coef 0.863784 --max-grad-norm 2",
    # The zoo's Atari PPO is the original's command (it also decays the clip range).
    **{env: ORIGINAL["atari"] for env in SUITES["atari"]},
    "CartPole-v1": f"{_PPO} --num-processes 8 --num-steps 32 --num-mini-batch 1 --ppo-epoch 20 "
                   "--gamma 0.98 --gae-lambda 0.8 --entropy-coef 0 --lr 1e-3 "
                   "--use-linear-lr-decay --use-proper-time-limits",
    "Acrobot-v1": f"{_PPO} --num-processes 16 --num-steps 256 --num-mini-batch 64 --ppo-epoch 4 "
                  "--lr 3e-4 --gamma 0.99 --gae-lambda 0.94 --entropy-coef 0 "
                  "--advantage-norm minibatch --no-clipped-value-loss --use-proper-time-limits",
}


def suite_of(env: str) -> str:
    """The suite whose env list holds ``env``; ``KeyError`` for an env without recipes."""
    for suite, envs in SUITES.items():
        if env in envs:
            return suite
    raise KeyError(f"no recipes for {env!r}; known: {', '.join(e for v in SUITES.values() for e in v)}")


def recipe(env: str, name: str) -> list[str]:
    """``main.py`` flags of recipe ``name`` (original | tuned) for ``env``."""
    if name not in RECIPES:
        raise KeyError(f"unknown recipe {name!r}; choose one of: {', '.join(RECIPES)}")
    suite = suite_of(env)
    flags = ORIGINAL[suite] if name == "original" else TUNED[env]
    return shlex.split(flags)


def command(env: str, name: str, num_env_steps: int | None = None, seed: int = 1) -> list[str]:
    """The full ``python main.py ...`` argv of one run (without output directories)."""
    steps = BUDGETS[suite_of(env)] if num_env_steps is None else num_env_steps
    return (["python", "main.py", "--env-name", env] + recipe(env, name)
            + ["--num-env-steps", str(steps), "--seed", str(seed)])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(allow_abbrev=False, description="print the main.py command of a recipe")
    p.add_argument("env")
    p.add_argument("recipe", nargs="?", default="tuned", choices=RECIPES)
    p.add_argument("--num-env-steps", type=int, default=None)
    args = p.parse_args(argv)
    try:
        print(shlex.join(command(args.env, args.recipe, args.num_env_steps)))
    except KeyError as e:
        print(f"recipes: error: {e.args[0]}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
