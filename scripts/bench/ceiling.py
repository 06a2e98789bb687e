"""The fastest any torch-eager + gymnasium implementation of a speed case could be, against SB3.

    python scripts/bench/ceiling.py                  # cases a b c, 3 rounds
    python scripts/bench/ceiling.py --cases a --rounds 5
    python scripts/bench/ceiling.py --no-sb3         # the parts and the ceiling only

``scripts/bench/fps.py`` compares whole training runs. This script asks a different question:
what is the ceiling? It times only the work no implementation of the case can skip, each in its
barest form, and adds them up per env step:

  env     the same gymnasium envs (``gym.make``), stepped in a Python loop with Python-int or
          numpy actions and same-step reset; no monitor, no normalization, no conversion.
  act     one forward of the case's actor and critic MLPs (2 x 64 tanh each, plain ``F.linear``
          calls, no ``nn.Module``) on the batch of observations, plus sampling and the
          log-probability, under ``torch.inference_mode``.
  update  one gradient step on a minibatch: the same forward, the PPO (or A2C) loss, backward,
          gradient-norm clipping and fused Adam (foreach RMSprop for A2C; torch's functional
          step, ``speed/optim.py``, without ``torch.optim.Optimizer``'s hooks), times the number of
          such steps per env step the case makes (PPO: epochs x minibatches / (envs x steps)).

ceiling fps = 1 / (env / N + act / N + update share). Nothing a real trainer needs on top
(storage, GAE, normalization, monitor files, logging) is counted, so a real run is slower.
Each round alternates the timing of these parts with one full SB3 run of the case in a fresh
process (measured by ``scripts/bench/fps.py``), on the same machine; the ratio ceiling / SB3 is
an upper bound on ours / SB3 for any implementation that keeps gymnasium's per-env Python
stepping and torch's eager CPU kernels.
"""
import argparse
import json
import os
import subprocess
import sys
import time

import gymnasium as gym
import torch
import torch.nn.functional as F

from a2c_ppo_acktr.speed.optim import functional_step
from cases import CASES

BENCH_FPS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fps.py")

TARGETS = {"a": 3.0, "b": 3.0, "c": 2.0}


def sb3_fps(case, seed):
    """SB3's env-steps/s on ``case``: one run measured by scripts/bench/fps.py (a fresh process)."""
    out = subprocess.run([sys.executable, BENCH_FPS, "--one", "sb3", case, "--seed", str(seed)],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.splitlines()[-1])["fps"]


def per_call_us(fn, seconds=1.0):
    """Median over 5 batches of the time of one ``fn()`` in microseconds (after a warm-up)."""
    for _ in range(20):
        fn()
    calls = 1
    while True:  # size a batch to ~seconds / 5
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        elapsed = time.perf_counter() - start
        if elapsed > seconds / 5:
            break
        calls *= 2
    times = []
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        times.append((time.perf_counter() - start) / calls)
    return sorted(times)[2] * 1e6


def mlp_params(n_in, n_out, hidden=64):
    """Weights of two 2 x ``hidden`` tanh MLPs (actor with ``n_out`` outputs, critic with 1)."""
    def layer(i, o):
        w = torch.nn.init.orthogonal_(torch.empty(o, i))
        return [w.requires_grad_(), torch.zeros(o, requires_grad=True)]
    actor = layer(n_in, hidden) + layer(hidden, hidden) + layer(hidden, n_out)
    critic = layer(n_in, hidden) + layer(hidden, hidden) + layer(hidden, 1)
    return actor, critic


def mlp(x, p):
    x = torch.tanh(F.linear(x, p[0], p[1]))
    x = torch.tanh(F.linear(x, p[2], p[3]))
    return F.linear(x, p[4], p[5])


def log_prob_and_entropy(out, actions, discrete, logstd):
    if discrete:
        logp = torch.log_softmax(out, -1)
        return logp.gather(-1, actions), -(logp.exp() * logp).sum(-1).mean()
    z = (actions - out) * torch.exp(-logstd)
    lp = (-0.5 * z.pow(2) - logstd - 0.9189385332046727).sum(-1, keepdim=True)
    return lp, (1.4189385332046727 + logstd).sum()


def time_parts(c, seconds=1.0):
    """-> (env_us per vector step, act_us per vector step, update_us per env step)."""
    torch.set_num_threads(1)  # the faster setting for these MLPs on this machine
    n = c["n_envs"]
    envs = [gym.make(c["env"]) for _ in range(n)]
    for i, env in enumerate(envs):
        env.reset(seed=i)
        env.action_space.seed(i)
    discrete = isinstance(envs[0].action_space, gym.spaces.Discrete)
    n_obs = envs[0].observation_space.shape[0]
    n_act = int(envs[0].action_space.n) if discrete else envs[0].action_space.shape[0]
    actions = [env.action_space.sample() for env in envs]
    if discrete:
        actions = [int(a) for a in actions]  # Discrete.contains' fast path

    def env_step():
        for env, a in zip(envs, actions):
            _, _, term, trunc, _ = env.step(a)
            if term or trunc:
                env.reset()

    actor, critic = mlp_params(n_obs, n_act)
    logstd = torch.zeros(n_act, requires_grad=True)
    obs = torch.randn(n, n_obs)

    def act():
        with torch.inference_mode():
            out, value = mlp(obs, actor), mlp(obs, critic)
            if discrete:
                logp = torch.log_softmax(out, -1)
                a = torch.searchsorted(logp.exp().cumsum(-1), torch.rand(n, 1)).clamp_(max=n_act - 1)
            else:
                a = out + logstd.exp() * torch.randn_like(out)
            lp, _ = log_prob_and_entropy(out, a, discrete, logstd)
            return a.numpy(), value.numpy(), lp.numpy()

    params = actor + critic + ([] if discrete else [logstd])
    ppo = c["algo"] == "ppo"
    batch = n * c["n_steps"] // (c["minibatches"] if ppo else 1)
    if ppo:
        opt: torch.optim.Optimizer = torch.optim.Adam(params, lr=c["lr"], eps=1e-5, fused=True)
    else:
        opt = torch.optim.RMSprop(params, lr=c["lr"], eps=1e-5, alpha=0.99, foreach=True)
    functional_step(opt)
    xb = torch.randn(batch, n_obs)
    ab = torch.randint(0, n_act, (batch, 1)) if discrete else torch.randn(batch, n_act)
    adv, ret, old_lp = torch.randn(batch, 1), torch.randn(batch, 1), torch.randn(batch, 1)

    def update():
        out, values = mlp(xb, actor), mlp(xb, critic)
        lp, entropy = log_prob_and_entropy(out, ab, discrete, logstd)
        if ppo:
            ratio = torch.exp(lp - old_lp)
            policy_loss = -torch.min(ratio * adv, ratio.clamp(0.8, 1.2) * adv).mean()
        else:
            policy_loss = -(adv * lp).mean()
        loss = policy_loss + 0.5 * (ret - values).pow(2).mean() - c["ent"] * entropy
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 0.5, foreach=True)
        opt.step()

    steps_per_update = (c["epochs"] * c["minibatches"]) if ppo else 1
    env_us, act_us = per_call_us(env_step, seconds), per_call_us(act, seconds)
    update_us = per_call_us(update, seconds) * steps_per_update / (n * c["n_steps"])
    for env in envs:
        env.close()
    return env_us, act_us, update_us


def main(argv=None):
    p = argparse.ArgumentParser(allow_abbrev=False, description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cases", nargs="+", default=["a", "b", "c"], choices=sorted(TARGETS))
    p.add_argument("--rounds", type=int, default=3, help="alternating rounds (parts, SB3) per case")
    p.add_argument("--no-sb3", action="store_true", help="time the parts only, no SB3 runs")
    p.add_argument("--seconds", type=float, default=1.0, help="time spent timing each part")
    args = p.parse_args(argv)
    print(f"{'case':<5}{'env us':>8}{'act us':>8}{'upd us':>8}{'ceiling':>9}{'SB3':>7}"
          f"{'ceiling/SB3':>13}{'target':>8}   (us per vector step; update per env step)")
    for case in args.cases:
        c = CASES[case]
        ceilings, sb3 = [], []
        parts = None
        for r in range(args.rounds):
            parts = time_parts(c, args.seconds)
            env_us, act_us, update_us = parts
            ceilings.append(1e6 / ((env_us + act_us) / c["n_envs"] + update_us))
            if not args.no_sb3:
                sb3.append(sb3_fps(case, seed=r + 1))
        ceiling = sorted(ceilings)[len(ceilings) // 2]
        if sb3:
            base = sorted(sb3)[len(sb3) // 2]
            versus = f"{base:>7.0f}{ceiling / base:>12.2f}x"
        else:
            versus = f"{'-':>7}{'-':>13}"
        print(f"{case:<5}{parts[0]:>8.0f}{parts[1]:>8.0f}{parts[2]:>8.1f}{ceiling:>9.0f}{versus}"
              f"{TARGETS[case]:>7.1f}x", flush=True)


if __name__ == "__main__":
    sys.exit(main())
