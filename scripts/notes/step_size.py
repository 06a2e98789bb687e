#!/usr/bin/env python
"""How far each update moves the policy, and under ACKTR which loss term spends the trust region.

From a checkpoint (its weights, optimizer state and flags; flags given after it override
those, e.g. ``--kfac-kl-clip 0.01``) or from a fresh start (main.py's flags), run ``--updates``
updates of the run's own agent on new rollouts and print, for each, KL(before || after) of the
policy on that rollout's states (E[(r - 1) - log r] over the actions taken, r = new / old
probability), also per 1,000 env steps. Under ACKTR also K-FAC's predicted KL of the step
(``KFACOptimizer.predicted_kl``, what the KL clip bounds) for the gradient of each term of the
loss alone and of the whole loss, and the clip's factor nu. Nothing is written: the episodes'
monitor files go to a temporary directory and the checkpoint is not saved.

    python scripts/notes/step_size.py --checkpoint runs/models/acktr/BreakoutNoFrameskip-v4_seed1.pt
    python scripts/notes/step_size.py --env-name BreakoutNoFrameskip-v4 --recipe acktr --updates 20
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from collections import deque

import torch

from a2c_ppo_acktr.algo import A2C_ACKTR, Agent
from a2c_ppo_acktr.envs import TorchVecEnv
from a2c_ppo_acktr.errors import Error, fail
from a2c_ppo_acktr.model import Policy
from a2c_ppo_acktr.rollout import collect_rollout
from a2c_ppo_acktr.run.build import build_run
from a2c_ppo_acktr.run.checkpoint import RunPaths, load_policy_checkpoint
from a2c_ppo_acktr.settings.arguments import build_parser, config_from_args, get_args
from a2c_ppo_acktr.storage import RolloutStorage


def parse(argv: list[str]) -> tuple[argparse.Namespace, argparse.Namespace, dict | None]:
    """(this script's options, the run's flags, the checkpoint or None); one line if bad."""
    own = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], add_help=False)
    own.add_argument("--checkpoint", help="a checkpoint of main.py (default: a fresh start)")
    own.add_argument("--updates", type=int, default=10, help="updates to measure (default 10)")
    opts, rest = own.parse_known_args(argv)
    if "-h" in rest or "--help" in rest:
        own.print_help()
        print("\nThe other options are main.py's (python main.py --help).")
        raise SystemExit(0)
    if opts.updates < 1:
        fail(f"--updates must be at least 1, got {opts.updates}")
    parser, ckpt = build_parser(), None
    if opts.checkpoint:
        try:
            ckpt = load_policy_checkpoint(opts.checkpoint)
        except Error as e:
            fail(str(e))
        if not ckpt.get("config"):
            fail(f"{opts.checkpoint} holds no saved flags (written before runs kept them)")
        parser.set_defaults(**{**ckpt["config"]["flags"], "recipe": None, "resume": False})
    args = get_args(rest, parser)  # main.py's checks: one line and exit 2 where bad
    args.num_workers = 0  # sampled here whatever the run used: the same envs and policy
    if args.recurrent_policy:
        fail("--recurrent-policy: step_size.py measures feed-forward policies only")
    return opts, args, ckpt


def kfac_budget(agent: A2C_ACKTR, obs: torch.Tensor, rnn_hxs: torch.Tensor, masks: torch.Tensor,
                actions: torch.Tensor, returns: torch.Tensor) -> dict[str, float]:
    """K-FAC's predicted KL (lr^2 v.g) of each loss term's gradient alone, and of their sum,
    under the optimizer's current factors, on a rollout flattened to (T * N, ...); the
    parameters' gradients are left as they were."""
    assert agent.kfac is not None
    value_loss, action_loss, entropy, _, _ = agent.terms(obs, rnn_hxs, masks, actions, returns)
    terms = {"policy": action_loss, "value": value_loss * agent.value_loss_coef,
             "entropy": -entropy * agent.entropy_coef}
    terms["all"] = sum(terms.values())
    out = {}
    for name, loss in terms.items():
        agent.optimizer.zero_grad(set_to_none=True)
        loss.backward(retain_graph=name != "all")
        out[name] = agent.kfac.predicted_kl(agent.kfac.natural_gradient())
    agent.optimizer.zero_grad(set_to_none=True)
    return out


def main(argv: list[str] | None = None) -> int:
    opts, args, ckpt = parse(sys.argv[1:] if argv is None else argv)
    torch.manual_seed(args.seed)
    with tempfile.TemporaryDirectory() as log_dir:
        paths = RunPaths(log_dir, log_dir, opts.checkpoint)
        try:
            cfg = config_from_args(args)
            envs, policy, agent, _ = build_run(cfg, paths, torch.device("cpu"), ckpt, 0)
        except Error as e:
            fail(str(e))
        if ckpt is not None and getattr(agent, "kfac", None) is not None:  # flags over saved
            agent.optimizer.param_groups[0].update(cfg.algo.kfac)
        try:
            measure(opts.updates, args, envs, policy, agent)
        finally:
            envs.close()
    return 0


def measure(updates: int, args: argparse.Namespace, envs: TorchVecEnv, policy: Policy,
            agent: Agent) -> None:
    """``updates`` rollouts and updates of ``agent``, each followed by its line; then medians."""
    rollouts = RolloutStorage(args.num_steps, args.num_processes, envs.observation_space.shape,
                              envs.action_space, policy.recurrent_hidden_state_size)
    rollouts.obs[0].copy_(envs.reset())
    steps = args.num_steps * args.num_processes
    kls, nus = [], []
    for u in range(1, updates + 1):
        collect_rollout(envs, policy, rollouts, deque(maxlen=10), args.use_proper_time_limits)
        with torch.no_grad():
            next_value = policy.get_value(rollouts.obs[-1], rollouts.recurrent_hidden_states[-1],
                                          rollouts.masks[-1])
        rollouts.compute_returns(next_value, args.use_gae, args.gamma, args.gae_lambda,
                                 args.use_proper_time_limits)
        T, N = args.num_steps, args.num_processes
        obs, masks, actions, returns, old_log_probs = (
            x[:T].reshape(T * N, *x.shape[2:]) for x in (rollouts.obs, rollouts.masks,
                                                          rollouts.actions, rollouts.returns,
                                                          rollouts.action_log_probs))
        hxs = rollouts.recurrent_hidden_states[0]
        kfac = getattr(agent, "kfac", None)
        budget = (kfac_budget(agent, obs, hxs, masks, actions, returns)
                  if kfac is not None and kfac.steps > 0 else None)
        agent.update(rollouts)
        with torch.no_grad():
            _, log_probs, _, _ = policy.evaluate_actions(obs, hxs, masks, actions)
            log_ratio = log_probs - old_log_probs
            kl = float((log_ratio.exp() - 1 - log_ratio).mean())
        kls.append(kl)
        line = (f"update {u} ({steps:,} env steps): policy KL {kl:.2e}, "
                f"per 1,000 env steps {kl * 1000 / steps:.2e}")
        if kfac is not None:
            nus.append(kfac.nu)
            line += f"; K-FAC nu {kfac.nu:.3f}"
            if budget is not None:
                line += ", predicted KL " + ", ".join(f"{k} {v:.2e}" for k, v in budget.items())
        print(line, flush=True)
        rollouts.after_update()
    median = statistics.median(kls)
    print(f"median policy KL per update {median:.2e}, per 1,000 env steps "
          f"{median * 1000 / steps:.2e}" + (f"; median nu {statistics.median(nus):.3f}" if nus else ""))


if __name__ == "__main__":
    sys.exit(main())
