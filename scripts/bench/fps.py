"""Training throughput: ours vs stable-baselines3 on identical settings, side by side.

    python scripts/bench/fps.py                 # all cases, seeds 1 and 2
    python scripts/bench/fps.py --cases a b --seeds 1 2 3
    python scripts/bench/fps.py --cases a c --against async   # ours: sync vs --async-rollouts
    python scripts/bench/fps.py --cases c --against async --vec-env shmem
    python scripts/bench/fps.py --cases a d --ours eager compile bf16   # our speed options
    python scripts/bench/fps.py --cases a --seeds 1 --total 2048        # a quick check of the script
    A2C_PPO_ACKTR_SPEED=layers python scripts/bench/fps.py --cases a --against plain  # the seam

Each measurement runs in a fresh subprocess (so peak memory is its own), alternating ours and SB3
seed by seed so that machine noise hits both alike. Reported: env-steps/s (wall time of env
creation + model creation + training; the imports are done before the clock starts), peak RSS of
the process (and of its env workers under --vec-env shmem), the ratio ours / SB3, and the mean
return of the last 20 training episodes of each run (so that ``--seeds 1 2 3`` also compares what
was learned at equal env steps). Case (e), raw vector-env stepping, comes from
``scripts/bench/envs.py``. ``--against async`` compares our synchronous loop with
``--async-rollouts`` (same settings, alternating the same way) instead of with SB3. ``--ours`` runs
ours as several variants, each a row with its ratio to SB3: ``eager`` (as ``main.py`` runs by
default), ``compile`` (``--compile``), ``bf16`` (``--precision bf16``), ``compile+bf16``. A variant
that ``main.py`` refuses here (bf16 on a CPU without native bf16) gets a row saying so instead of
figures. ``--against plain`` compares ours, with the speed seam's mechanisms that
``A2C_PPO_ACKTR_SPEED`` names (default all), with ours with the seam off (docs/design.md, "The
speed seam").

Both optimise the same loss: SB3 gets ``clip_range_vf`` (our PPO clips the value loss, as the
original), ours a value-loss coefficient that matches SB3's ``vf_coef`` (``value_loss_coef``).
One difference remains: ours normalizes advantages over the whole rollout (as the original),
SB3 per minibatch. Ours runs without its final evaluation (``SAME_WORK``): SB3's ``learn``
plays no evaluation episodes.

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

from cases import CASES

# main.py's flags that keep its run to the work SB3's ``learn`` does: its default final evaluation
# (deterministic episodes on fresh envs) has no counterpart there.
SAME_WORK = ["--final-eval-episodes", "0"]
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# Our variants (--ours): the flags each adds to the case's command; "ours" is the plain one.
VARIANTS = {"eager": [], "compile": ["--compile"], "bf16": ["--precision", "bf16"],
            "compile+bf16": ["--compile", "--precision", "bf16"]}
IMPLS = {"ours": [], "async": ["--async-rollouts"], "plain": [],
         **{f"ours+{name}": flags for name, flags in VARIANTS.items() if flags}}


def load_main():
    """``main`` of main.py: the script's code run here (as ``python main.py`` would, without its
    ``__main__`` block), so that its imports are done before a clock starts."""
    return runpy.run_path(os.path.join(ROOT, "main.py"))["main"]


_WORKERS = False  # this measurement runs env worker processes (--vec-env shmem)


def peak_rss_mb():
    """Peak RSS of the training process and, with ``--vec-env shmem``, its env workers.

    Other children are left out: a child that execs (``git`` for config.json) reports the
    parent's RSS at its start as its own peak (Linux records it at exec), doubling the figure."""
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss if _WORKERS else 0
    return (own + children) / 1024.0


def value_loss_coef(c):
    """Ours for SB3's ``vf_coef=0.5``: our PPO (as the original) halves the squared error
    (``0.5 * (R - V)^2``), SB3's does not; A2C does not in either."""
    return "1.0" if c["algo"] == "ppo" else "0.5"


def case_argv(c, seed, workdir):
    """``main.py``'s flags for case ``c`` (a ``CASES`` entry) with ``seed``, its run files under
    ``workdir``."""
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
            "--use-proper-time-limits", *SAME_WORK]
    if c["gae"]:
        argv.append("--use-gae")
    return argv


def run_ours(train, c, seed, workdir, extra=()):
    train_quietly(train, case_argv(c, seed, workdir) + list(extra))


def train_quietly(train, argv):
    """``train(argv)`` (main.py's ``main``) with its log lines sent to /dev/null."""
    with open(os.devnull, "w") as devnull:
        stdout, sys.stdout = sys.stdout, devnull
        try:
            train(argv)
        finally:
            sys.stdout = stdout


def run_sb3(c, seed, workdir, device="cpu"):
    from stable_baselines3 import A2C, PPO
    from stable_baselines3.common.env_util import make_atari_env, make_vec_env
    from stable_baselines3.common.logger import configure
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
    # Optional keys of a case (scripts/bench/gpu.py's README command): clip range, SB3's vf_coef,
    # a linear decay of the learning rate to 0 (SB3 passes the remaining progress, 1 -> 0).
    lr = (lambda remaining: c["lr"] * remaining) if c.get("lr_decay") else c["lr"]
    common = dict(learning_rate=lr, n_steps=c["n_steps"], gamma=0.99, ent_coef=c["ent"],
                  vf_coef=c.get("vf_coef", 0.5), max_grad_norm=0.5, seed=seed, device=device,
                  verbose=0)
    if c["algo"] == "ppo":
        clip = c.get("clip", 0.2)
        model = PPO(policy, env, batch_size=c["n_envs"] * c["n_steps"] // c["minibatches"],
                    n_epochs=c["epochs"], gae_lambda=0.95, clip_range=clip,
                    clip_range_vf=clip,  # ours clips the value loss too, as the original
                    **common)
    else:
        model = A2C(policy, env, gae_lambda=1.0, rms_prop_eps=1e-5, **common)
    # A logger that writes nothing, into the run's own directory: SB3's default one makes a
    # new empty directory in the system's temp directory for every run.
    model.set_logger(configure(workdir, []))
    model.learn(total_timesteps=c["total"])
    env.close()


def last_returns(workdir, n=20):
    """Mean return of the last ``n`` finished episodes in the run's monitor files."""
    # Here, not at the top: a run of SB3 (``--one sb3``) imports nothing of ours.
    from a2c_ppo_acktr.analysis.episodes import load_run
    log_dir = os.path.dirname(glob.glob(os.path.join(workdir, "**", "*.monitor.csv"),
                                        recursive=True)[0])
    _, returns, _ = load_run(log_dir)
    return float(returns[-n:].mean())


def one_measurement(impl, case, seed, vec_env, total=None):
    """Runs inside the subprocess: prints one JSON line."""
    global _WORKERS
    _WORKERS = vec_env == "shmem"
    c = dict(CASES[case], total=total or CASES[case]["total"])
    extra = ["--vec-env", vec_env] if vec_env else []
    # Imports (torch, gymnasium, SB3: ~2 s for either side) are done before the clock starts:
    # they are no part of the training throughput, and would squeeze any ratio towards 1.
    if impl == "sb3":
        import stable_baselines3.common.env_util  # noqa: F401
    else:
        if impl == "plain":  # the speed seam off: read when main.py imports the package
            os.environ["A2C_PPO_ACKTR_SPEED"] = "none"
        train = load_main()
    with tempfile.TemporaryDirectory() as workdir:
        start = time.perf_counter()
        if impl == "sb3":
            run_sb3(c, seed, workdir)
        else:
            run_ours(train, c, seed, workdir, extra + IMPLS[impl])
        elapsed = time.perf_counter() - start
        final = last_returns(workdir)
    print(json.dumps({"fps": c["total"] / elapsed, "seconds": elapsed,
                      "peak_rss_mb": peak_rss_mb(), "return": final}))


def refusal(out: subprocess.CompletedProcess) -> str | None:
    """The message of a run that main.py refused (exit status 2 and its one error line)."""
    lines = out.stderr.strip().splitlines()
    if out.returncode == 2 and lines and ": error: " in lines[-1] and "Traceback" not in out.stderr:
        return lines[-1].split(": error: ", 1)[1]
    return None


def run_measurement(script, args, what):
    """``script --one args`` in a fresh process -> the figures it printed as its last line, or
    {"refused": main.py's one error line}; ``what`` names the run if it fails."""
    out = subprocess.run([sys.executable, script, "--one", *args], capture_output=True, text=True,
                         cwd=ROOT)
    if refusal(out):
        return {"refused": refusal(out)}
    if out.returncode != 0:
        raise RuntimeError(f"{what} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def measure(impl, case, seed, vec_env=None, total=None):
    """One run in a fresh process -> its figures, or {"refused": main.py's one error line}."""
    args = [impl, case, "--seed", str(seed)] + (["--vec-env", vec_env] if vec_env else []) + (
        ["--total", str(total)] if total else [])
    return run_measurement(os.path.abspath(__file__), args, f"{impl} case {case}")


def main(argv=None):
    p = argparse.ArgumentParser(allow_abbrev=False, description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cases", nargs="+", default=list("abcde"), choices=list("abcde"))
    p.add_argument("--seeds", type=int, nargs="+", default=[1, 2],
                   help="one alternating round (ours, SB3) per seed")
    p.add_argument("--against", choices=["sb3", "async", "plain"], default="sb3",
                   help="compare ours with SB3 (default), with ours under --async-rollouts, or "
                   "with ours with the speed seam off (plain)")
    p.add_argument("--vec-env", choices=["dummy", "shmem", "ale", "ale-pipelined", "native"],
                   default=None,
                   help="our --vec-env (default: auto)")
    p.add_argument("--ours", nargs="+", choices=VARIANTS, default=["eager"],
                   help="our variants, a row each: eager | compile (--compile) | bf16 "
                   "(--precision bf16) | compile+bf16 (default: eager)")
    p.add_argument("--total", type=int, default=None,
                   help="env steps per run instead of the case's (a quick check of the script)")
    p.add_argument("--seed", type=int, default=1, help=argparse.SUPPRESS)
    p.add_argument("--one", nargs=2, metavar=("IMPL", "CASE"), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.one:
        return one_measurement(args.one[0], args.one[1], args.seed, args.vec_env, args.total)

    ours = ["ours" if v == "eager" else f"ours+{v}" for v in args.ours]
    print(f"{'case':<5}{'impl':<18}{'env-steps/s':>13}{'peak MB':>10}{'return':>9}   "
          "per seed: fps/return")
    for case in args.cases:
        if case == "e":
            subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "bench", "envs.py")],
                           check=True)
            continue
        compare(case, ours, args.against, args.seeds, args.vec_env, args.total)


def compare(case, ours, other, seeds, vec_env, total):
    """Rounds of ``ours`` (impl names) and ``other`` on ``case``, alternating their order seed by
    seed; prints a row per impl and its ratio to ``other`` (SB3) or async's to sync."""
    results = {impl: [] for impl in ours + [other]}
    refused = {}
    for r, seed in enumerate(seeds):
        order = ours + [other] if r % 2 == 0 else [other] + ours
        for impl in order:
            if impl not in refused:
                result = measure(impl, case, seed, vec_env, total)
                if "refused" in result:
                    refused[impl] = result["refused"]
                else:
                    results[impl].append(result)
    summary = {}
    for impl, runs in results.items():
        if impl in refused:
            print(f"{case:<5}{impl:<18}refused: {refused[impl]}", flush=True)
            continue
        fps = sorted(x["fps"] for x in runs)[len(runs) // 2]  # median
        mem = max(x["peak_rss_mb"] for x in runs)
        summary[impl] = (fps, mem)
        mean_return = sum(x["return"] for x in runs) / len(runs)
        print(f"{case:<5}{impl:<18}{fps:>13.0f}{mem:>10.0f}{mean_return:>9.1f}   "
              + ", ".join(f"{x['fps']:.0f}/{x['return']:.1f}" for x in runs), flush=True)
    pairs = ([(impl, other, f"{impl}/{other}") for impl in ours] if other in ("sb3", "plain")
             else [("async", ours[0], f"async/{ours[0]}")])
    c = CASES[case]
    for a, b, name in pairs:
        if a in summary and b in summary:
            print(f"{case:<5}ratio {name}: {summary[a][0] / summary[b][0]:.2f}x fps, "
                  f"{summary[a][1] / summary[b][1]:.2f}x peak memory  ({c['algo'].upper()} "
                  f"{c['env']}{', --vec-env ' + vec_env if vec_env else ''})", flush=True)


if __name__ == "__main__":
    sys.exit(main())
