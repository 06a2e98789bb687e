"""Training throughput: ours vs stable-baselines3 on identical settings, side by side.

    python scripts/bench/fps.py                 # all cases, seeds 1 and 2
    python scripts/bench/fps.py --cases a b --seeds 1 2 3
    python scripts/bench/fps.py --cases a c --against async   # ours: sync vs --async-rollouts
    python scripts/bench/fps.py --cases c --against async --vec-env shmem

Each measurement runs in a fresh subprocess (so peak memory is its own), alternating ours and
SB3 seed by seed so that machine noise hits both alike. Reported: env-steps/s (wall time of
env creation + model creation + training; the imports are done before the clock starts), peak
RSS of the process and its children, the ratio ours / SB3, and the mean return of the last 20
training episodes of each run (so that ``--seeds 1 2 3`` also compares what was learned at
equal env steps). Case (e), raw vector-env stepping, comes from ``scripts/bench/envs.py``.
``--against async`` compares our synchronous loop with ``--async-rollouts`` (same settings,
alternating the same way) instead of with SB3.

Both optimise the same loss: SB3 gets ``clip_range_vf`` (our PPO clips the value loss, as the
original), ours a value-loss coefficient that matches SB3's ``vf_coef`` (``value_loss_coef``).
One difference remains: ours normalizes advantages over the whole rollout (as the original),
SB3 per minibatch.

Cases (as issue #2 defines them):
  a  PPO CartPole-v1, 8 envs x 128 steps, 4 epochs, 4 minibatches, 100k steps
  b  A2C CartPole-v1, 8 envs x 5 steps, 100k steps
  c  PPO HalfCheetah-v5, 1 env x 2048 steps, 10 epochs, 32 minibatches, 50k steps
  d  PPO PongNoFrameskip-v4, 8 envs x 128 steps, CNN, 4 epochs, 4 minibatches, 20k steps
  e  raw random-action stepping, 8 envs: our shmem vs SB3 SubprocVecEnv (CartPole, HalfCheetah)
"""
import argparse
import glob
import json
import os
import resource
import runpy
import subprocess
import sys
import tempfile
import time

from a2c_ppo_acktr.envs.episodes import load_run
from cases import CASES

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def load_main():
    """``main`` of main.py: the script's code run here (as ``python main.py`` would, without its
    ``__main__`` block), so that its imports are done before a clock starts."""
    return runpy.run_path(os.path.join(ROOT, "main.py"))["main"]


def peak_rss_mb():
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return (own + children) / 1024.0


def value_loss_coef(c):
    """Ours for SB3's ``vf_coef=0.5``: our PPO (as the original) halves the squared error
    (``0.5 * (R - V)^2``), SB3's does not; A2C does not in either."""
    return "1.0" if c["algo"] == "ppo" else "0.5"


def run_ours(train, c, seed, workdir, extra=()):
    argv = ["--algo", c["algo"], "--env-name", c["env"], "--num-processes", str(c["n_envs"]),
            "--num-steps", str(c["n_steps"]), "--ppo-epoch", str(c["epochs"]),
            "--num-mini-batch", str(c["minibatches"]), "--num-env-steps", str(c["total"]),
            "--lr", str(c["lr"]), "--entropy-coef", str(c["ent"]), "--gamma", "0.99",
            "--gae-lambda", "0.95", "--value-loss-coef", value_loss_coef(c),
            "--max-grad-norm", "0.5",
            "--eps", "1e-5", "--seed", str(seed), "--log-interval", "1000000",
            "--save-interval", "1000000", "--log-dir", os.path.join(workdir, "logs"),
            "--save-dir", os.path.join(workdir, "models"), "--no-cuda",
            # SB3 always bootstraps episodes cut by a time limit; this is our flag for that.
            "--use-proper-time-limits"]
    if c["gae"]:
        argv.append("--use-gae")
    argv += extra
    with open(os.devnull, "w") as devnull:
        stdout, sys.stdout = sys.stdout, devnull
        try:
            train(argv)
        finally:
            sys.stdout = stdout


def run_sb3(c, seed, workdir):
    from stable_baselines3 import A2C, PPO
    from stable_baselines3.common.env_util import make_atari_env, make_vec_env
    from stable_baselines3.common.vec_env import VecFrameStack, VecNormalize

    if "NoFrameskip" in c["env"]:
        import ale_py
        import gymnasium as gym
        gym.register_envs(ale_py)
        env = VecFrameStack(make_atari_env(c["env"], n_envs=c["n_envs"], seed=seed,
                                           monitor_dir=workdir), 4)
        policy = "CnnPolicy"
    else:
        # Our make_vec_envs normalizes vector observations and returns; so must SB3 here.
        env = VecNormalize(make_vec_env(c["env"], n_envs=c["n_envs"], seed=seed,
                                        monitor_dir=workdir), gamma=0.99)
        policy = "MlpPolicy"
    common = dict(learning_rate=c["lr"], n_steps=c["n_steps"], gamma=0.99, ent_coef=c["ent"],
                  vf_coef=0.5, max_grad_norm=0.5, seed=seed, device="cpu", verbose=0)
    if c["algo"] == "ppo":
        model = PPO(policy, env, batch_size=c["n_envs"] * c["n_steps"] // c["minibatches"],
                    n_epochs=c["epochs"], gae_lambda=0.95, clip_range=0.2,
                    clip_range_vf=0.2,  # ours clips the value loss too, as the original
                    **common)
    else:
        model = A2C(policy, env, gae_lambda=1.0, rms_prop_eps=1e-5, **common)
    model.learn(total_timesteps=c["total"])
    env.close()


def last_returns(workdir, n=20):
    """Mean return of the last ``n`` finished episodes in the run's monitor files."""
    log_dir = os.path.dirname(glob.glob(os.path.join(workdir, "**", "*.monitor.csv"),
                                        recursive=True)[0])
    _, returns, _ = load_run(log_dir)
    return float(returns[-n:].mean())


def one_measurement(impl, case, seed, vec_env):
    """Runs inside the subprocess: prints one JSON line."""
    c = CASES[case]
    extra = ["--vec-env", vec_env] if vec_env else []
    # Imports (torch, gymnasium, SB3: ~2 s for either side) are done before the clock starts:
    # they are no part of the training throughput, and would squeeze any ratio towards 1.
    if impl == "sb3":
        import stable_baselines3.common.env_util  # noqa: F401
    else:
        train = load_main()
    with tempfile.TemporaryDirectory() as workdir:
        start = time.perf_counter()
        if impl == "sb3":
            run_sb3(c, seed, workdir)
        else:
            run_ours(train, c, seed, workdir,
                     extra + (["--async-rollouts"] if impl == "async" else []))
        elapsed = time.perf_counter() - start
        final = last_returns(workdir)
    print(json.dumps({"fps": c["total"] / elapsed, "seconds": elapsed,
                      "peak_rss_mb": peak_rss_mb(), "return": final}))


def measure(impl, case, seed, vec_env=None):
    out = subprocess.run([sys.executable, os.path.abspath(__file__), "--one", impl, case,
                          "--seed", str(seed)] + (["--vec-env", vec_env] if vec_env else []),
                         capture_output=True, text=True, cwd=ROOT)
    if out.returncode != 0:
        raise RuntimeError(f"{impl} case {case} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None):
    p = argparse.ArgumentParser(allow_abbrev=False, description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cases", nargs="+", default=list("abcde"), choices=list("abcde"))
    p.add_argument("--seeds", type=int, nargs="+", default=[1, 2],
                   help="one alternating round (ours, SB3) per seed")
    p.add_argument("--against", choices=["sb3", "async"], default="sb3",
                   help="compare ours with SB3 (default) or with ours under --async-rollouts")
    p.add_argument("--vec-env", choices=["dummy", "shmem", "ale", "ale-pipelined", "native"],
                   default=None,
                   help="our --vec-env (default: auto)")
    p.add_argument("--seed", type=int, default=1, help=argparse.SUPPRESS)
    p.add_argument("--one", nargs=2, metavar=("IMPL", "CASE"), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.one:
        return one_measurement(args.one[0], args.one[1], args.seed, args.vec_env)

    print(f"{'case':<5}{'impl':<6}{'env-steps/s':>13}{'peak MB':>10}{'return':>9}   per seed: fps/return")
    for case in args.cases:
        if case == "e":
            subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "bench_envs.py")],
                           check=True)
            continue
        other = args.against
        results = {"ours": [], other: []}
        for r, seed in enumerate(args.seeds):
            order = ("ours", other) if r % 2 == 0 else (other, "ours")
            for impl in order:
                results[impl].append(measure(impl, case, seed, args.vec_env))
        summary = {}
        for impl, runs in results.items():
            fps = sorted(x["fps"] for x in runs)[len(runs) // 2]  # median
            mem = max(x["peak_rss_mb"] for x in runs)
            summary[impl] = (fps, mem)
            mean_return = sum(x["return"] for x in runs) / len(runs)
            print(f"{case:<5}{impl:<6}{fps:>13.0f}{mem:>10.0f}{mean_return:>9.1f}   "
                  + ", ".join(f"{x['fps']:.0f}/{x['return']:.1f}" for x in runs), flush=True)
        (a, b), name = (("ours", "sb3"), "ours/sb3") if other == "sb3" else (("async", "ours"),
                                                                              "async/sync")
        ratio = summary[a][0] / summary[b][0]
        print(f"{case:<5}ratio {name}: {ratio:.2f}x fps, {summary[a][1] / summary[b][1]:.2f}x "
              f"peak memory  ({CASES[case]['algo'].upper()} {CASES[case]['env']}"
              f"{', --vec-env ' + args.vec_env if args.vec_env else ''})", flush=True)


if __name__ == "__main__":
    sys.exit(main())
