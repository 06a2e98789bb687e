#!/usr/bin/env python
"""Rerun a peer library on our seeds, in our run layout, so that its runs and ours are scored alike.

``--peer sb3``: stable-baselines3 with rl-baselines3-zoo's hyperparameters for the env, read from
the installed ``rl-zoo3`` package's own yml files and prepared by its own ``ExperimentManager``
(schedules, ``policy_kwargs``, ``VecNormalize`` with the algorithm's discount), on the zoo's
``DummyVecEnv`` of ``n_envs`` envs, one torch thread. Where the env id has no entry but its -v4
has (the zoo tunes MuJoCo's -v4), that entry is used and the run's first line and ``config.json``
say so. The zoo's step budget is cut to ``--num-env-steps`` where it is longer (Humanoid's 10M).

Each seed is one run in ``DIR/<algo>/<env>_seed<s>/``, as main.py's: the monitor files of its
training episodes, the evaluation curve ``eval/eval.csv`` (every ``--eval-every`` steps:
``--eval-episodes`` deterministic episodes, one on each of as many envs, normalization frozen),
the final deterministic evaluation ``final_eval.json`` (``--final-eval-episodes``) and a
``config.json`` naming the peer, its versions and every hyperparameter it used. compare.py,
plot.py and episodes.py read them as they read ours.

    python scripts/peers.py --peer sb3 --algo ppo --env-name Hopper-v5 --seeds 4 5 6 --out peers

Needs ``pip install -e .[peers]``. Bad input (an unknown peer or algo, an env the peer cannot
make or has no hyperparameters for, a missing rl-zoo3, an ``--out`` holding another run there):
one line, exit status 2, nothing created.
"""
from __future__ import annotations

import argparse
import contextlib
import importlib.util
import io
import json
import os
import platform
import re
import sys
from importlib import metadata
from typing import Any

import gymnasium as gym

from a2c_ppo_acktr.config.env import parse_env_kwargs
from a2c_ppo_acktr.envs import check_env_kwargs
from a2c_ppo_acktr.errors import ConfigError, fail
from a2c_ppo_acktr.evaluation import FINAL_EVAL_SEED, evaluation_row, write_final_eval
from a2c_ppo_acktr.run.checkpoint import CONFIG_FILE, run_paths, write_config
from a2c_ppo_acktr.run.logger import ScalarLogger
from a2c_ppo_acktr.settings.arguments import Parser
from a2c_ppo_acktr.settings.checks import count

PEERS = {"sb3": ("stable-baselines3", "rl-zoo3", "sb3-contrib")}  # a peer: the packages it is
ALGOS = ("ppo", "a2c")
EVAL_SEED = 1_000  # the curve's envs: seed + EVAL_SEED + i (final: evaluation.FINAL_EVAL_SEED)


def build_parser() -> Parser:
    p = Parser(prog="peers.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--peer", required=True, help=f"the library to run: {' | '.join(PEERS)}")
    p.add_argument("--algo", required=True, help=f"its algorithm: {' | '.join(ALGOS)}")
    p.add_argument("--env-name", required=True, help="a gymnasium id, e.g. Hopper-v5")
    p.add_argument("--env-kwargs", nargs="+", default=[], metavar="KEY=VALUE",
                   help="keyword arguments for gym.make, as main.py's (a recipe's, e.g. Ant-v5's "
                   "include_cfrc_ext_in_observation=False): the peer's envs are ours")
    p.add_argument("--seeds", type=int, nargs="+", required=True, help="one run per seed")
    p.add_argument("--num-env-steps", type=count, default=1_000_000,
                   help="the budget; the zoo's own where that is shorter (default: 1000000)")
    p.add_argument("--eval-every", type=count, default=50_000, metavar="STEPS",
                   help="env steps between evaluations of the curve (default: 50000)")
    p.add_argument("--eval-episodes", type=count, default=10,
                   help="episodes per evaluation of the curve (default: 10)")
    p.add_argument("--final-eval-episodes", type=count, default=10,
                   help="episodes of the final deterministic evaluation (default: 10)")
    p.add_argument("--out", required=True, metavar="DIR", help="runs go to DIR/<algo>/<env>_seed<s>/")
    p.add_argument("--overwrite", action="store_true", help="replace this peer's runs there")
    return p


def zoo_package() -> str | None:
    """The installed rl_zoo3's folder, found without importing it (its import patches gymnasium's
    ``TimeLimit`` for the whole process, as the zoo's own runs have it: only a run imports it)."""
    try:
        spec = importlib.util.find_spec("rl_zoo3")
    except (ImportError, ValueError):
        return None
    return None if spec is None or not spec.submodule_search_locations else \
        list(spec.submodule_search_locations)[0]


def zoo_entry(algo: str, env_name: str) -> tuple[str, dict, str]:
    """The zoo's yml entry for ``env_name`` (or its -v4): (entry id, its values, a note)."""
    import yaml

    path = os.path.join(zoo_package() or "", "hyperparams", f"{algo}.yml")
    with open(path) as f:
        table = yaml.safe_load(f)
    older = re.sub(r"-v\d+$", "-v4", env_name)
    for entry, note in ((env_name, ""), (older, f"rl-zoo3 has no {algo} entry for {env_name}: "
                                                f"its {older} entry is used")):
        if entry in table:
            return entry, dict(table[entry]), note
    raise ValueError(f"rl-zoo3 has no {algo} hyperparameters for {env_name} (nor {older}) in "
                     f"{path}")


def zoo_setup(algo: str, entry: str, seed: int) -> Any:
    """The zoo's ExperimentManager with ``entry``'s hyperparameters read and prepared as its
    ``train.py`` prepares them (schedules, policy_kwargs, normalization); its printing kept out."""
    from rl_zoo3.exp_manager import ExperimentManager

    manager = ExperimentManager(argparse.Namespace(), algo, entry, log_folder=os.devnull,
                                seed=seed, verbose=0)
    with contextlib.redirect_stdout(io.StringIO()):
        hyperparams, saved = manager.read_hyperparameters()
        prepared, wrapper, callbacks, vec_wrapper = manager._preprocess_hyperparams(hyperparams)
    if wrapper is not None or callbacks or vec_wrapper is not None:
        raise ValueError(f"rl-zoo3's {entry} entry uses wrappers or callbacks this harness does "
                         "not run")
    return manager, prepared, saved


def check(args: argparse.Namespace) -> dict:
    """Everything about the command that can be wrong, before anything is on disk."""
    if args.peer not in PEERS:
        fail(f"unknown --peer {args.peer!r}; expected one of: {', '.join(PEERS)}", prog="peers.py")
    if args.algo not in ALGOS:
        fail(f"unknown --algo {args.algo!r}; expected one of: {', '.join(ALGOS)}", prog="peers.py")
    if zoo_package() is None:
        fail("--peer sb3 needs rl-zoo3: pip install -e .[peers]", prog="peers.py")
    try:
        gym.spec(args.env_name)
    except gym.error.Error as e:
        fail(f"--env-name {args.env_name!r}: the peer cannot make it ({e})", prog="peers.py")
    try:
        args.env_kwargs = parse_env_kwargs(args.env_kwargs)
        check_env_kwargs(args.env_name, args.env_kwargs)
    except ConfigError as e:
        fail(str(e), prog="peers.py")
    try:
        entry, values, note = zoo_entry(args.algo, args.env_name)
    except ValueError as e:
        fail(str(e), prog="peers.py")
    for seed in args.seeds:
        paths = run_paths(argparse.Namespace(log_dir=args.out, save_dir="", algo=args.algo,
                                             env_name=args.env_name, seed=seed))
        if not os.path.exists(paths.log_dir):
            continue
        peer = peer_of(paths.log_dir)
        if peer != args.peer:
            fail(f"--out {args.out}: {paths.log_dir} holds "
                 f"{'a run of ours' if peer is None else f'a run of peer {peer}'}; give another "
                 "--out", prog="peers.py")
        if not args.overwrite:
            fail(f"--out {args.out}: {paths.log_dir} already holds this run; --overwrite "
                 "replaces it", prog="peers.py")
    return {"entry": entry, "values": values, "note": note}


def peer_of(log_dir: str) -> str | None:
    """The peer whose run ``log_dir`` holds (its config.json's ``peer``), None for ours."""
    try:
        with open(os.path.join(log_dir, CONFIG_FILE)) as f:
            return json.load(f).get("peer")
    except (OSError, ValueError, AttributeError):
        return None


def versions(peer: str) -> dict:
    found = {name: metadata.version(name) for name in PEERS[peer]}
    return {**found, "python": platform.python_version(), "torch": metadata.version("torch"),
            "gymnasium": metadata.version("gymnasium")}


def evaluate_sb3(model: Any, train_env: Any, env_name: str, episodes: int, seed: int,
                 env_kwargs: dict | None = None) -> list:
    """``episodes`` deterministic episodes, one on each of as many fresh envs seeded from
    ``seed``, the training normalizer's statistics frozen: their raw returns."""
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.evaluation import evaluate_policy
    from stable_baselines3.common.vec_env import VecNormalize

    env = make_vec_env(env_name, n_envs=episodes, seed=seed, env_kwargs=env_kwargs)
    if isinstance(train_env, VecNormalize):
        env = VecNormalize(env, training=False, norm_reward=False)
        env.obs_rms = train_env.obs_rms.copy()
    try:
        returns, _ = evaluate_policy(model, env, n_eval_episodes=episodes, deterministic=True,
                                     return_episode_rewards=True)
    finally:
        env.close()
    return [float(r) for r in returns]


def run_sb3(args: argparse.Namespace, zoo: dict, seed: int) -> float:
    """One seed's run of the zoo's recipe; -> its final deterministic mean return."""
    import torch
    from rl_zoo3 import ALGOS
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import VecNormalize

    torch.set_num_threads(1)
    manager, hyperparams, saved = zoo_setup(args.algo, zoo["entry"], seed)
    budget = min(int(manager.n_timesteps), args.num_env_steps)
    paths = run_paths(argparse.Namespace(log_dir=args.out, save_dir="", algo=args.algo,
                                         env_name=args.env_name, seed=seed))
    os.makedirs(paths.eval_dir, exist_ok=True)
    for name in os.listdir(paths.log_dir):  # --overwrite: this peer's earlier run
        if name.endswith(".monitor.csv") or name in ("final_eval.json", CONFIG_FILE):
            os.remove(os.path.join(paths.log_dir, name))
    env = make_vec_env(args.env_name, n_envs=manager.n_envs, seed=seed, monitor_dir=paths.log_dir,
                       env_kwargs=args.env_kwargs)
    if manager.normalize:
        env = VecNormalize(env, **manager.normalize_kwargs)
    record = {"peer": args.peer, "algo": args.algo, "env_name": args.env_name,
              "env_kwargs": args.env_kwargs, "seed": seed,
              "versions": versions(args.peer), "zoo_entry": zoo["entry"], "zoo_note": zoo["note"],
              "zoo_hyperparams": {k: str(v) if not isinstance(v, int | float | bool) else v
                                  for k, v in saved.items()},
              "n_envs": manager.n_envs, "normalize": manager.normalize_kwargs
              if manager.normalize else False, "num_env_steps": budget,
              "zoo_num_env_steps": int(zoo["values"].get("n_timesteps", budget)),
              "eval_every": args.eval_every, "eval_episodes": args.eval_episodes,
              "final_eval_episodes": args.final_eval_episodes, "torch_threads": 1,
              "argv": sys.argv}
    write_config(record, paths.log_dir)
    model = ALGOS[args.algo](env=env, seed=seed, verbose=0, device="cpu", **hyperparams)
    curve = ScalarLogger(paths.eval_dir, "eval.csv", tensorboard=False)

    class Evaluations(BaseCallback):
        """The curve: an evaluation each time training passes a multiple of --eval-every."""

        def _on_step(self) -> bool:
            if self.num_timesteps // args.eval_every > (self.num_timesteps - env.num_envs) \
                    // args.eval_every:
                returns = evaluate_sb3(self.model, env, args.env_name, args.eval_episodes,
                                       seed + EVAL_SEED, args.env_kwargs)
                row = evaluation_row(self.num_timesteps // (self.model.n_steps * env.num_envs),
                                     self.num_timesteps, returns)
                curve.log(row, self.num_timesteps)
                print(f" {args.env_name} seed {seed}: evaluation at {self.num_timesteps:,} steps: "
                      f"mean reward {row['mean_return']:.2f}", flush=True)
            return True

    try:
        model.learn(total_timesteps=budget, callback=Evaluations())
    finally:
        curve.close()
    returns = evaluate_sb3(model, env, args.env_name, args.final_eval_episodes,
                           seed + FINAL_EVAL_SEED, args.env_kwargs)
    env.close()
    return write_final_eval(paths.log_dir, int(model.num_timesteps), returns,
                            seed + FINAL_EVAL_SEED)["mean_return"]


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    zoo = check(args)
    for seed in args.seeds:
        first = (f"{args.peer} {args.algo} {args.env_name} seed {seed}: rl-zoo3's "
                 f"{zoo['entry']} hyperparameters")
        print(f"{first} ({zoo['note']})" if zoo["note"] else first, flush=True)
        final = run_sb3(args, zoo, seed)
        print(f" {args.env_name} seed {seed}: final deterministic evaluation: mean reward "
              f"{final:.2f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
