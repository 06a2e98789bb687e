"""Acting without learning: ``run_episodes`` (the one act loop), ``evaluate`` and training's
``Evaluations`` (``WorkerGroup.evaluations`` is the Ray workers' kind).

``evaluate`` (training's evaluation), ``enjoy.py`` (watching, recording videos) and
``gail_experts/generate.py`` (recording expert trajectories) all play through ``run_episodes``.
"""
import os
import tempfile
from collections.abc import Callable
from typing import Any, Protocol

import numpy as np
import torch

from a2c_ppo_acktr.envs import TorchVecEnv, VecEnvWrapper, get_vec_normalize, make_vec_envs
from a2c_ppo_acktr.envs.torch_vec import to_device
from a2c_ppo_acktr.files import save_json
from a2c_ppo_acktr.model import Policy

# on_step(action, reward, infos): after the reset (None, None, []) and after every step.
OnStep = Callable[[torch.Tensor | None, torch.Tensor | None, list[dict]], None]


def run_episodes(policy: Policy, envs: TorchVecEnv, num_episodes: int,
                 deterministic: bool = True, on_step: OnStep | None = None,
                 max_steps: int | None = None, first_per_env: bool = False) -> list[float]:
    """Let ``policy`` act on ``envs`` (a torch vector env, as ``make_vec_envs`` builds) until
    ``num_episodes`` episodes finish (or for ``max_steps`` steps); return the first
    ``num_episodes`` raw returns to finish. ``first_per_env``: only each env's first episode,
    in env order (``num_episodes`` envs or more: no bias towards the episodes that end soonest).

    Raw: the Monitor's, unclipped and whole games for Atari. ``deterministic`` takes the mode of
    the action distribution. ``on_step`` is for the callers that render, record frames or record
    transitions.
    """
    returns: list[float] = []
    firsts: dict[int, float] = {}  # first_per_env: env index -> its first episode's return
    steps = 0
    obs = envs.reset()
    rnn_hxs = torch.zeros(obs.shape[0], policy.recurrent_hidden_state_size, device=obs.device)
    masks = torch.zeros(obs.shape[0], 1, device=obs.device)
    if on_step is not None:
        on_step(None, None, [])
    while (len(firsts if first_per_env else returns) < num_episodes
           and (max_steps is None or steps < max_steps)):
        with torch.inference_mode():
            _, action, _, rnn_hxs = policy.act(obs, rnn_hxs, masks, deterministic=deterministic)
        obs, reward, terminated, truncated, infos = envs.step(action)
        masks = to_device((~(terminated | truncated)).astype(np.float32)[:, None], obs.device)
        steps += 1
        if on_step is not None:
            on_step(action, reward, infos)
        ended = [(i, float(info["episode"]["r"])) for i, info in enumerate(infos) if "episode" in info]
        returns += [r for _, r in ended]
        for i, r in ended:
            firsts.setdefault(i, r)
    if first_per_env:
        return [firsts[i] for i in sorted(firsts)][:num_episodes]
    return returns[:num_episodes]


def freeze_normalization(envs: VecEnvWrapper, obs_rms: dict | None) -> None:
    """Normalize observations with the training run's statistics ``obs_rms``
    (``VecNormalize.state_dict()``), not updated; a no-op for envs without a normalizer."""
    vec_norm = get_vec_normalize(envs)
    if vec_norm is not None:
        vec_norm.eval()
        if obs_rms is not None:
            vec_norm.load_state_dict(obs_rms)


def evaluation_row(update: int, env_steps: int, returns: list[float]) -> dict:
    """One row of ``eval/eval.csv``: the evaluation of the policy after ``update`` updates and
    ``env_steps`` env steps, from its episodes' raw ``returns``."""
    return {"update": update, "timesteps": env_steps, "episodes": len(returns),
            "mean_return": float(np.mean(returns)), "std_return": float(np.std(returns))}


def evaluate(actor_critic: Policy, obs_rms: dict | None, env_name: str, seed: int,
             num_processes: int, eval_log_dir: str, device: torch.device | str,
             num_episodes: int = 10, deterministic: bool = True,
             **options: Any) -> list[float]:
    """Run ``num_episodes`` episodes, one on each of as many fresh envs (seeded from ``seed +
    num_processes``, after the training envs), and return their raw returns.

    One episode per env, not the first ``num_episodes`` to end on ``num_processes`` envs (the
    original's): those favour short episodes, a falling Hopper's. ``obs_rms`` is the training
    normalizer's state (``freeze_normalization``), or None for envs without one (images).
    ``options``: ``make_vec_envs``'s keywords the run's envs were built with (``env_kwargs``,
    ``scale_actions``: ``EnvConfig.options``), as in training. Atari episodes are whole games (no
    episodic life).
    """
    eval_envs = make_vec_envs(env_name, seed + num_processes, num_episodes, None,
                              eval_log_dir, device, True, episodic_life=False, **options)
    freeze_normalization(eval_envs, obs_rms)
    try:
        episode_returns = run_episodes(actor_critic, eval_envs, num_episodes, deterministic,
                                       first_per_env=True)
    finally:
        eval_envs.close()
    print(f" Evaluation using {len(episode_returns)} episodes: mean reward "
          f"{np.mean(episode_returns):.5f}")
    return episode_returns


FINAL_EVAL_FILE = "final_eval.json"  # in the run's log dir: compare.py --metric final-det
FINAL_EVAL_SEED = 10_000  # its envs' seeds start here, above the training and evaluation envs'


def final_evaluation(actor_critic: Policy, obs_rms: dict | None, env_steps: int,
                     num_episodes: int, log_dir: str, env_name: str, seed: int,
                     device: torch.device | str, **options: Any) -> dict:
    """The run's final evaluation, as the zoo reports one: ``final_returns``, written to
    ``<log_dir>/final_eval.json`` atomically and returned."""
    returns = final_returns(actor_critic, obs_rms, num_episodes, env_name, seed, device, **options)
    return write_final_eval(log_dir, env_steps, returns, seed + FINAL_EVAL_SEED)


def final_returns(actor_critic: Policy, obs_rms: dict | None, num_episodes: int, env_name: str,
                  seed: int, device: torch.device | str, **options: Any) -> list[float]:
    """The final evaluation's episodes: ``evaluate``'s deterministic ones on envs seeded from
    ``seed + FINAL_EVAL_SEED`` (their monitor files are not kept). ``options``:
    ``make_vec_envs``'s keywords of the run's envs."""
    with tempfile.TemporaryDirectory() as monitors:
        return evaluate(actor_critic, obs_rms, env_name, seed + FINAL_EVAL_SEED, 0, monitors,
                        device, num_episodes, **options)


def write_final_eval(log_dir: str, env_steps: int, returns: list[float], first_seed: int) -> dict:
    """``<log_dir>/final_eval.json`` (atomic), the deterministic ``returns`` of one episode on
    each env seeded from ``first_seed`` after ``env_steps``; -> its dict."""
    row = evaluation_row(-1, env_steps, returns)
    result = {key: row[key] for key in ("timesteps", "episodes", "mean_return", "std_return")}
    result |= {"returns": [float(r) for r in returns], "deterministic": True,
               "normalization": "frozen", "env_seeds": [first_seed, first_seed + len(returns) - 1]}
    save_json(result, os.path.join(log_dir, FINAL_EVAL_FILE))
    return result


class Evaluations(Protocol):
    """Training's evaluations, built beside its collector: ``evaluations(actor_critic, update,
    env_steps, wait)`` evaluates ``actor_critic`` (None: nothing new) -> the result rows
    (``evaluation_row``) finished by now, oldest first (``wait``: all of them)."""

    def evaluations(self, actor_critic: Policy | None, update: int, env_steps: int,
                    wait: bool = False) -> list[dict]: ...


class InlineEvaluations:
    """Evaluations in this process, at once: ``evaluate(actor_critic, obs_rms)`` -> episode
    returns (e.g. a partial of ``evaluate``), with ``obs_rms()`` the training normalizer's
    statistics as of then."""

    def __init__(self, evaluate: Callable[[Policy, dict | None], list[float]],
                 obs_rms: Callable[[], dict | None]) -> None:
        self._evaluate, self._obs_rms = evaluate, obs_rms

    def evaluations(self, actor_critic: Policy | None, update: int, env_steps: int,
                    wait: bool = False) -> list[dict]:
        if actor_critic is None:
            return []
        return [evaluation_row(update, env_steps, self._evaluate(actor_critic, self._obs_rms()))]
