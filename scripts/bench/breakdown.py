"""Where a run's time goes: one training run of ``main.py``, each part of the loop timed.

    python scripts/bench/breakdown.py --case a                  # PPO CartPole (cases.py)
    python scripts/bench/breakdown.py --case d -- --vec-env ale  # flags after -- go to main.py
    python scripts/bench/breakdown.py --case c --total 20480 -- --async-rollouts
    python scripts/bench/breakdown.py --case d --device cuda
    python scripts/bench/breakdown.py --recipe fast --env PongNoFrameskip-v4 --total 65536

``--case`` runs a speed case of ``cases.py`` with the flags ``fps.py`` gives it; ``--recipe`` and
``--env`` run ``main.py --env-name ENV --recipe NAME`` as a user would (its logging and
checkpoints included) for ``--total`` env steps.

The run is ``main.py`` itself (as ``scripts/bench/fps.py`` runs it), in this process, with the
functions below wrapped by a timer. Each part's time is its own, excluding the parts it calls
(the env's stepping is not counted again in ``normalize``), per thread:

  env         waiting on the numpy vector env (``step``, or ``recv`` of a pipelined group)
  normalize   ``VecNormalize``: running statistics, scaling, clipping
  to-device   numpy -> tensor (on a GPU: through pinned memory); the obs, rewards and masks
  to-host     actions back to numpy for the envs (on a GPU: the step's wait for the device)
  act         the policy's forward and sampling (``Policy.act_step``)
  storage     the rest of storing a step: episode flags, masks, monitor returns, the copies
  bootstrap   values of the last observation and of time-limit truncations (``get_value``)
  returns     GAE / n-step returns (``compute_returns``)
  update      the agent's update: every epoch and minibatch, the optimizer included
  log         progress rows, the log files, the progress line
  checkpoint  checkpoint state and its atomic write
  eval        evaluation episodes
  wait        (``--async-rollouts``) the learner waiting for the sampler thread's rollout
  start-up    from ``main()`` to the loop (``train``): checks, directories, envs, policy
  rest        the remainder of the wall time of ``main()``: the loop's own Python, ...

Figures: microseconds per env step, and the share of the wall time of ``main()``. Imports are
timed apart: a fresh interpreter loading main.py. With
``--async-rollouts`` the sampler's thread gets its own column, and ``overlap`` is the share of
its collecting time that the learner did not wait for. ``cores busy``: the process's CPU time
over its wall time (its threads, not the env worker processes of ``--vec-env shmem``). With
pipelined groups (``--vec-env ale-pipelined``) ``overlap`` is the share of the envs' stepping,
from the end of each group's ``send`` to the end of its ``recv``, that the collecting thread
spent acting, storing and serving the other groups rather than waiting in ``recv`` (near 0%
when ``step`` sends and receives at once). The timer adds about 1 µs per wrapped call (a few per env
step). Speed against other codebases is ``fps.py``'s job; this script says where to look.
"""
import argparse
import functools
import os
import runpy
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict

import fps

from a2c_ppo_acktr.algo import A2C_ACKTR, PPO
from a2c_ppo_acktr.envs import torch_vec
from a2c_ppo_acktr.envs.ale import AleVecEnv
from a2c_ppo_acktr.envs.blocks import DummyVecEnv
from a2c_ppo_acktr.envs.native import NativeVecEnv
from a2c_ppo_acktr.envs.normalize import VecNormalize
from a2c_ppo_acktr.envs.shmem import ShmemVecEnv
from a2c_ppo_acktr.evaluation import InlineEvaluations
from a2c_ppo_acktr.model import Policy
from a2c_ppo_acktr.run.logger import ProgressLine, ScalarLogger
from a2c_ppo_acktr.sampling.async_thread import AsyncCollector
from a2c_ppo_acktr.settings import recipes
from a2c_ppo_acktr.settings.arguments import Parser
from a2c_ppo_acktr.storage import RolloutStorage
from cases import CASES

MAIN = os.path.join(fps.ROOT, "main.py")
PARTS = ("env", "normalize", "to-device", "to-host", "act", "storage", "bootstrap", "returns",
         "update", "log", "checkpoint", "eval", "wait")
# (object, attribute, part): the functions timed. Module-level functions are patched where the
# caller looks them up; main.py's and run/life.py's imports in their globals (``instrument``).
TIMED = [
    *[(cls, name, "env") for cls in (DummyVecEnv, ShmemVecEnv, NativeVecEnv, AleVecEnv)
      for name in ("step", "recv", "send") if name in vars(cls)],
    (VecNormalize, "step", "normalize"),
    (torch_vec, "to_device", "to-device"),
    (torch_vec.VecPyTorch, "_actions", "to-host"),
    (Policy, "act_step", "act"),
    (Policy, "get_value", "bootstrap"),
    (RolloutStorage, "compute_returns", "returns"),
    (PPO, "update", "update"),
    (A2C_ACKTR, "update", "update"),
    (ScalarLogger, "log", "log"),
    (ProgressLine, "update", "log"),
    (InlineEvaluations, "evaluations", "eval"),
    (AsyncCollector, "collect", "wait"),
]
MAIN_TIMED = {"_store": "storage", "progress_row": "log", "format_report": "log",
              "checkpoint_state": "checkpoint", "save_checkpoint": "checkpoint"}


class Timer:
    """Exclusive time per (thread, part): a part's time less that of the parts it calls."""

    def __init__(self) -> None:
        self.seconds: dict[tuple[str, str], float] = defaultdict(float)
        self._local = threading.local()

    def wrap(self, fn, part):
        @functools.wraps(fn)
        def timed(*args, **kwargs):
            stack = self._local.__dict__.setdefault("stack", [])
            stack.append(0.0)  # time of the timed calls inside this one
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                elapsed = time.perf_counter() - start
                inner = stack.pop()
                self.seconds[threading.current_thread().name, part] += elapsed - inner
                if stack:
                    stack[-1] += elapsed
        return timed


class Overlap:
    """Grouped envs' steps seen from the collecting thread: per group, the time from the end of
    its ``send`` to the end of its ``recv`` (``span``) and the part of it inside ``recv``
    (``waited``); ``1 - waited / span`` of the stepping ran while that thread did other work."""

    def __init__(self) -> None:
        self.span = self.waited = 0.0
        self._sent: dict[tuple[int, int], float] = {}

    def wrap(self, cls) -> None:
        """Record the ``send(actions, group)`` / ``recv(group)`` calls of ``cls``'s envs."""
        send, recv = cls.send, cls.recv

        @functools.wraps(send)
        def sent(env, actions, group=0):
            try:
                return send(env, actions, group)
            finally:
                self._sent[id(env), group] = time.perf_counter()

        @functools.wraps(recv)
        def received(env, group=0):
            start = time.perf_counter()
            try:
                return recv(env, group)
            finally:
                end = time.perf_counter()
                since = self._sent.pop((id(env), group), None)
                if since is not None:
                    self.span += end - since
                    self.waited += end - start
        cls.send, cls.recv = sent, received


def instrument(timer: Timer, main_globals: dict, overlap: Overlap | None = None) -> None:
    """Wrap every function of ``TIMED`` and ``MAIN_TIMED`` (for the rest of this process), and
    the grouped envs' ``send`` / ``recv`` for ``overlap``."""
    if overlap is not None:
        overlap.wrap(AleVecEnv)
    for owner, name, part in TIMED:
        setattr(owner, name, timer.wrap(getattr(owner, name), part))
    import a2c_ppo_acktr.rollout as rollout
    rollout._store = timer.wrap(rollout._store, "storage")
    rollout.to_device = timer.wrap(rollout.to_device, "to-device")
    import a2c_ppo_acktr.run.life as life
    for name, part in MAIN_TIMED.items():
        for where in (main_globals, vars(life)):
            if name in where:
                where[name] = timer.wrap(where[name], part)


def import_seconds() -> float:
    """Wall time of a fresh interpreter that loads main.py (its imports) and exits."""
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", f"import runpy; runpy.run_path({MAIN!r})"], check=True)
    return time.perf_counter() - start


def recipe_argv(env: str, recipe: str, total: int, workdir: str) -> list[str]:
    """``main.py``'s flags for ``--env-name env --recipe recipe``, ``total`` env steps, its files
    under ``workdir``; on the CPU, as ``fps.run_ours``'s (``--device cuda`` drops ``--no-cuda``)."""
    return ["--env-name", env, "--recipe", recipe, "--num-env-steps", str(total), "--seed", "1",
            "--log-dir", os.path.join(workdir, "logs"), "--save-dir",
            os.path.join(workdir, "models"), "--no-cuda"]


def run(case: str | None, total: int | None, extra: list[str], device: str,
        recipe: tuple[str, str] | None = None) -> dict:
    """One instrumented run of speed ``case``, or of ``recipe`` (env, name) for ``total`` env
    steps -> the timer's figures and the run's wall and CPU times."""
    imports = import_seconds()
    main_globals = runpy.run_path(MAIN)["main"].__globals__  # run_path returns a copy
    timer, overlap = Timer(), Overlap()
    instrument(timer, main_globals, overlap)
    first: dict[str, float] = {}
    train = main_globals["train"]

    def timed_train(*args):  # its start ends the start-up
        first["t"] = time.perf_counter()
        first["timed"] = sum(s for (t, _), s in timer.seconds.items() if t == "MainThread")
        return train(*args)
    main_globals["train"] = timed_train
    main = main_globals["main"]
    if device == "cuda":  # the runs below pass --no-cuda, as the cases run on the CPU
        main = functools.partial(_without_no_cuda, main)
    with tempfile.TemporaryDirectory() as workdir:
        cpu0, start = time.process_time(), time.perf_counter()
        if recipe is not None:
            assert total is not None, "a recipe's run needs its total"
            fps.train_quietly(main, recipe_argv(*recipe, total, workdir) + extra)
        else:
            assert case is not None, "a case or a recipe"
            c = dict(CASES[case], total=total or CASES[case]["total"])
            total = c["total"]
            fps.run_ours(main, c, 1, workdir, extra)
        wall, cpu = time.perf_counter() - start, time.process_time() - cpu0
    start_up = first.get("t", start) - start - first.get("timed", 0.0)
    return {"timer": dict(timer.seconds), "wall": wall, "cpu": cpu, "imports": imports,
            "start-up": start_up, "steps": total, "overlap": (overlap.span, overlap.waited)}


def _without_no_cuda(main, argv):
    return main([a for a in argv if a != "--no-cuda"])


def report(r: dict) -> str:
    """The table: a column per thread, a row per part (µs per env step), the main thread's
    share of the wall time."""
    steps, wall, timer = r["steps"], r["wall"], r["timer"]
    threads = sorted({t for t, _ in timer}, key=lambda t: t != "MainThread")
    timed_main = sum(s for (t, _), s in timer.items() if t == "MainThread")
    timer = {**timer, ("MainThread", "start-up"): r["start-up"],
             ("MainThread", "rest"): wall - timed_main - r["start-up"]}
    lines = [f"{steps:,} env steps in {wall:.2f} s: {steps / wall:,.0f} env-steps/s; cores busy "
             f"{r['cpu'] / wall:.2f}; imports (apart) {r['imports']:.2f} s",
             f"{'part':<12}" + "".join(f"{t[:18]:>20}" for t in threads)
             + f"{'share':>8}   (µs per env step; share of the wall time)"]
    for part in (*PARTS, "start-up", "rest"):
        row = [timer.get((t, part), 0.0) for t in threads]
        if any(row):
            lines.append(f"{part:<12}" + "".join(f"{1e6 * s / steps:>20.2f}" for s in row)
                         + f"{100 * row[0] / wall:>7.1f}%")
    sampler = sum(s for (t, _), s in timer.items() if t != "MainThread")
    if len(threads) > 1 and sampler:
        waited = timer.get(("MainThread", "wait"), 0.0)
        lines.append(f"overlap: {1 - waited / sampler:.0%} of the sampler thread's {sampler:.2f} s "
                     "ran while the learner updated")
    span, waited = r.get("overlap", (0.0, 0.0))
    if span:
        lines.append(f"overlap: {1 - waited / span:.0%} of the envs' stepping ({span:.2f} s from "
                     "each group's send to its recv's end) ran while the collecting thread acted, "
                     "stored or served the other groups")
    return "\n".join(lines)


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    extra = argv[argv.index("--") + 1:] if "--" in argv else []
    argv = argv[:argv.index("--")] if "--" in argv else argv
    p = Parser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--case", choices=sorted(CASES), default=None,
                   help="a speed case of cases.py (default: a, without --recipe)")
    p.add_argument("--recipe", choices=recipes.RECIPES, default=None,
                   help="run main.py --recipe RECIPE --env-name ENV instead of a case")
    p.add_argument("--env", default=None, help="--recipe's env (one of its suites' envs)")
    p.add_argument("--total", type=int, default=None,
                   help="env steps (default: the case's; needed with --recipe)")
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    args = p.parse_args(argv)
    if args.total is not None and args.total <= 0:
        p.error(f"--total must be a positive number of env steps, got {args.total}")
    recipe = None
    if args.recipe is not None or args.env is not None:
        if args.case is not None:
            p.error("--case runs a speed case, --recipe and --env a recipe: give one of the two")
        if args.recipe is None or args.env is None or args.total is None:
            p.error("--recipe needs --env and --total (e.g. --recipe fast --env "
                    "PongNoFrameskip-v4 --total 65536)")
        try:
            recipes.settings(args.env, args.recipe)
        except KeyError as e:
            p.error(f"--recipe {args.recipe} --env {args.env}: {e.args[0]}")
        recipe = (args.env, args.recipe)
    case = None if recipe is not None else args.case or "a"
    print(report(run(case, args.total, extra, args.device, recipe)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
