"""Recipes: the ``main.py`` flags of each suite's envs, the original's and tuned ones, as data.

``main.py --env-name HalfCheetah-v5 --recipe tuned`` runs one (flags given on the command line
win), ``scripts/benchmark.py`` runs suites of them, docs/results.md gives what they reached. A
recipe holds every flag except ``--env-name``, ``--seed`` and the output directories; its
``--num-env-steps`` is the suite's budget (``BUDGETS``). ``python -m a2c_ppo_acktr.settings.recipes
HalfCheetah-v5 tuned`` prints the full command.

Where each tuned recipe comes from (Tianshou, rl-baselines3-zoo, CleanRL) and how its settings
translate to our flags: docs/notes.md, "The recipes".
"""
import argparse
import shlex
import sys
from typing import Any

RECIPES = ("original", "tuned", "a2c", "acktr", "fast")  # a2c, acktr: Atari, MuJoCo; fast: Atari
SUITES = {
    "mujoco": ("HalfCheetah-v5", "Hopper-v5", "Walker2d-v5", "Ant-v5", "Humanoid-v5"),
    "atari": ("PongNoFrameskip-v4", "BreakoutNoFrameskip-v4", "BeamRiderNoFrameskip-v4"),
    "classic": ("CartPole-v1", "Acrobot-v1"),
}
BUDGETS = {"mujoco": 1_000_000, "atari": 10_000_000, "classic": 100_000}
ENVS = tuple(env for envs in SUITES.values() for env in envs)

# A recipe maps main.py's argparse destinations to values: "lr": 3e-4 is --lr 3e-4, True a bare
# flag (--use-gae). What it leaves out keeps main.py's default (the original's).
_PPO = {"algo": "ppo", "use_gae": True, "log_interval": 1}
ORIGINAL = {  # the original's README commands (classic: this project's CartPole quick start)
    "mujoco": {**_PPO, "num_steps": 2048, "num_processes": 1, "lr": 3e-4, "entropy_coef": 0.0,
               "value_loss_coef": 0.5, "ppo_epoch": 10, "num_mini_batch": 32, "gamma": 0.99,
               "gae_lambda": 0.95, "use_linear_lr_decay": True, "use_proper_time_limits": True},
    "atari": {**_PPO, "lr": 2.5e-4, "clip_param": 0.1, "value_loss_coef": 0.5, "num_processes": 8,
              "num_steps": 128, "num_mini_batch": 4, "use_linear_lr_decay": True,
              "entropy_coef": 0.01},
    "classic": {**_PPO, "num_processes": 8, "num_steps": 32, "num_mini_batch": 1, "ppo_epoch": 20,
                "gae_lambda": 0.8, "entropy_coef": 0.0, "lr": 1e-3, "use_linear_lr_decay": True,
                "use_proper_time_limits": True},
}

_CLEANRL_MUJOCO = {**ORIGINAL["mujoco"], "advantage_norm": "minibatch", "action_mean_gain": 0.01,
                   "log_std_init": -0.7}
# 64 envs x 32 steps = Tianshou's 2048 per update; 32 minibatches of 64.
_TIANSHOU_MUJOCO = {**_PPO, "num_processes": 64, "num_steps": 32, "ppo_epoch": 10,
                    "num_mini_batch": 32, "lr": 3e-4, "entropy_coef": 0.0, "value_loss_coef": 0.5,
                    "gamma": 0.99, "gae_lambda": 0.95, "use_proper_time_limits": True,
                    "advantage_norm": "none", "no_clipped_value_loss": True,
                    "action_mean_gain": 0.01, "log_std_init": -0.5, "max_grad_norm": 0.5,
                    "clip_param": 0.2}
# Atari: the original's command with twice the gradient steps at the same compute (8 minibatches
# of 128, not 4 of 256) and a constant learning rate, so that the schedule does not depend on the
# budget (docs/notes.md, "Atari: Pong, the tuned recipe (issue #25)").
_ATARI_TUNED = {key: value for key, value in ORIGINAL["atari"].items()
                if key != "use_linear_lr_decay"} | {"num_mini_batch": 8}
# MuJoCo's A2C: Tianshou's MuJoCo A2C example without its entropy bonus (which grew the std
# here), with both networks 256 wide, as HalfCheetah's PPO, and rollouts of 32 steps, not 5, so
# that GAE reaches past the critic's guess (docs/notes.md, "A2C on MuJoCo").
_A2C_MUJOCO = {"algo": "a2c", "num_processes": 16, "num_steps": 32, "lr": 7e-4, "eps": 1e-5,
               "alpha": 0.99, "gamma": 0.99, "use_gae": True, "gae_lambda": 0.95,
               "entropy_coef": 0.0, "value_loss_coef": 0.5, "max_grad_norm": 0.5,
               "use_linear_lr_decay": True, "log_std_init": -0.5, "action_mean_gain": 0.01,
               "hidden_size": 256, "use_proper_time_limits": True, "log_interval": 25}
# HalfCheetah and Walker2d discount by 0.995, as their PPO recipes: a flip or a fall ends the
# good part of a game, and a longer horizon counts it (Hopper's A2C stands with it).
_A2C_LONG_HORIZON = {env: {**_A2C_MUJOCO, "gamma": 0.995}
                     for env in ("HalfCheetah-v5", "Walker2d-v5")}
# MuJoCo's ACKTR: the ACKTR paper's continuous-control settings (OpenAI baselines' acktr_cont) as
# far as this ACKTR, one K-FAC optimizer on the joint loss, takes them; K-FAC's own step, as the
# paper's step grows while the KL stays small and this ACKTR's does not (docs/notes.md, "ACKTR on
# MuJoCo").
_ACKTR_MUJOCO = {"algo": "acktr", "num_processes": 1, "num_steps": 2500, "use_gae": True,
                 "gamma": 0.99, "gae_lambda": 0.97, "entropy_coef": 0.0, "kfac_lr": 0.25,
                 "kfac_kl_clip": 0.01, "use_proper_time_limits": True, "log_interval": 1}
# The recipes of an algorithm other than PPO, per suite and, where an env has its own, per env.
# Atari: the original's A2C and ACKTR commands (its README), beside its PPO one: A2C is main.py's
# defaults, ACKTR takes 32 envs x 20 steps.
BY_ALGO: dict[str, dict[str, dict[str, Any]]] = {
    "a2c": {"atari": {"algo": "a2c"}, "mujoco": _A2C_MUJOCO, **_A2C_LONG_HORIZON},
    "acktr": {"atari": {"algo": "acktr", "num_processes": 32, "num_steps": 20},
              "mujoco": _ACKTR_MUJOCO}}
# fast (many cores, a GPU): the tuned recipe's minibatches of 128 and gradient steps per env step,
# with 64 envs x 32 steps a rollout for the cores to step at once (docs/notes.md, "The recipes").
_ATARI_FAST = _ATARI_TUNED | {"num_processes": 64, "num_steps": 32, "num_mini_batch": 16}
# Recipes for some suites only: {recipe: {suite or env: values}} and what each is, for the
# refusal.
ONLY_FOR: dict[str, dict[str, dict[str, Any]]] = {
    **BY_ALGO, "fast": {"atari": _ATARI_FAST}}
_WHAT = {"a2c": "A2C's recipe", "acktr": "ACKTR's recipe",
         "fast": "the many-env PPO recipe"}
# Tianshou's example as Tianshou runs it: its learning rate decayed to 0 and the advantages computed
# again before each epoch (its lr_decay and recompute_adv).
_TIANSHOU_MUJOCO_DECAY = {**_TIANSHOU_MUJOCO, "use_linear_lr_decay": True,
                          "recompute_advantages": True}
TUNED = {
    # HalfCheetah, Hopper and Ant: Tianshou's MuJoCo PPO example with its lr decay and recomputed
    # advantages. HalfCheetah discounts less (0.995): a cheetah that flips onto its back stays
    # there, and a longer horizon counts that loss; and its two networks are 256 wide, as the
    # zoo's, where Tianshou's are 64 (notes).
    "HalfCheetah-v5": {**_TIANSHOU_MUJOCO_DECAY, "gamma": 0.995, "hidden_size": 256},
    # Ant observes what the anchors' Ant-v3 did: Ant-v5 without its 78 contact forces (all zeros
    # in Ant-v3 under mujoco-py >= 2.0); Ant-v5's reward and dynamics. Chosen on seeds 1-3 over
    # the same 256 wide, and its discount of 0.995 (a fall ends the game) over 0.99 (docs/notes.md,
    # "Ant-v5: Tianshou's settings as Tianshou runs them").
    "Ant-v5": {**_TIANSHOU_MUJOCO_DECAY, "gamma": 0.995,
               "env_kwargs": ["include_cfrc_ext_in_observation=False"]},
    "Hopper-v5": _TIANSHOU_MUJOCO_DECAY,
    # Walker2d: CleanRL's ppo_continuous_action settings (the original's command with advantages
    # per minibatch) plus SB3's small initial action mean (gain 0.01), a narrower start (std 0.5)
    # and, as HalfCheetah, a discount of 0.995: a fall ends the game (notes).
    "Walker2d-v5": {**_CLEANRL_MUJOCO, "gamma": 0.995},
    # Humanoid: Tianshou's example as Ant's, on Ant's kind of observation (Humanoid-v5 without
    # its contact forces), its policy acting in [-1, 1] scaled onto Humanoid's Box of +-0.4 as
    # Tianshou's does, and minibatches of 256: with 64, half the ratios were clipped mid-run.
    # Chosen on seeds 1-3 over the zoo's tuned PPO and seven other candidates (docs/notes.md,
    # "Humanoid-v5: the next candidate").
    "Humanoid-v5": {**_TIANSHOU_MUJOCO_DECAY, "scale_actions": True, "num_mini_batch": 8,
                    "env_kwargs": ["include_cfrc_ext_in_observation=False"]},
    **{env: _ATARI_TUNED for env in SUITES["atari"]},
    "CartPole-v1": {**ORIGINAL["classic"], "gamma": 0.98},
    "Acrobot-v1": {**_PPO, "num_processes": 16, "num_steps": 256, "num_mini_batch": 64,
                   "ppo_epoch": 4, "lr": 3e-4, "gamma": 0.99, "gae_lambda": 0.94,
                   "entropy_coef": 0.0, "advantage_norm": "minibatch",
                   "no_clipped_value_loss": True, "use_proper_time_limits": True},
}


def suite_of(env: str) -> str:
    """The suite whose env list holds ``env``; ``KeyError`` for an env without recipes."""
    for suite, envs in SUITES.items():
        if env in envs:
            return suite
    raise KeyError(f"no recipes for {env!r}; known: {', '.join(ENVS)}")


def settings(env: str, name: str) -> dict[str, Any]:
    """Recipe ``name`` (original | tuned | a2c | acktr | fast) for ``env`` with its suite's budget: {argparse
    destination: value}; ``KeyError`` (one line) for an unknown recipe or an env without one."""
    if name not in RECIPES:
        raise KeyError(f"unknown recipe {name!r}; choose one of: {', '.join(RECIPES)}")
    suite = suite_of(env)
    if name in ONLY_FOR:
        by = ONLY_FOR[name]
        if suite not in by:
            raise KeyError(f"recipe {name!r} is {_WHAT[name]} for "
                           f"{', '.join(k for k in by if k in SUITES)} envs, not for {env}")
        values = by.get(env, by[suite])
    else:
        values = ORIGINAL[suite] if name == "original" else TUNED[env]
    return {**values, "num_env_steps": BUDGETS[suite]}


def names(env: str) -> list[str]:
    """The recipes ``env`` has: original and tuned, and a2c / acktr / fast where its suite has
    them."""
    suite = suite_of(env)
    return [n for n in RECIPES if n not in ONLY_FOR or suite in ONLY_FOR[n]]


def option(dest: str) -> str:
    """The ``main.py`` flag of an argparse destination: ``num_env_steps`` -> ``--num-env-steps``."""
    return "--" + dest.replace("_", "-")


def flags(values: dict[str, Any]) -> list[str]:
    """{destination: value} as ``main.py`` flags: True is a bare flag, False and None none."""
    argv = []
    for dest, value in values.items():
        if value is False or value is None:
            continue
        argv.append(option(dest))
        if value is not True:
            argv += [str(v) for v in value] if isinstance(value, list) else [str(value)]
    return argv


def recipe(env: str, name: str) -> list[str]:
    """``main.py`` flags of recipe ``name`` (original | tuned) for ``env``."""
    return flags(settings(env, name))


def command(env: str, name: str, num_env_steps: int | None = None, seed: int = 1,
            **overrides: Any) -> list[str]:
    """The full ``python main.py ...`` argv of one run (without output directories);
    ``overrides`` (argparse destinations, like ``vec_env="shmem"``) replace the recipe's."""
    values = settings(env, name) | overrides
    if num_env_steps is not None:
        values["num_env_steps"] = num_env_steps
    return ["python", "main.py", "--env-name", env] + flags({**values, "seed": seed})


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(allow_abbrev=False, description="print the main.py command of a recipe")
    p.add_argument("env")
    p.add_argument("recipe", nargs="?", default="tuned", help="|".join(RECIPES) + " (default: tuned)")
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
