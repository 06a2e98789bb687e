"""Start-up: a fresh process from its start to its first env step, ours against stable-baselines3.

    python scripts/bench/startup.py --cases a b c d --pairs 5
    python scripts/bench/startup.py --cases a --pairs 3 --sides ours sb3 torch python

Each side runs as ``whole.py`` runs it, in a fresh process: ours is ``python main.py`` with the
case's flags (``fps.case_argv``), SB3 is ``python scripts/bench/fps.py --one sb3 CASE`` (SB3's PPO
or A2C on the same settings, nothing of ours imported). A small hook runs first in the child
(before the script, importing nothing but the standard library): when the module holding the
side's env step is imported (ours: ``VecPyTorch.step``, or ``AleVecEnv.send`` where the pipelined
collector steps ALE's groups itself; SB3's ``VecEnv.step``) it wraps that step so that the first
call prints the system's monotonic clock and ends the process at once. The time is that clock less
the parent's, taken just before the process started: interpreter start, imports, parsing, building
the envs and the model, the first action. Floors, each to its end: ``python`` (``python -c
pass``), ``torch`` (``import torch``), ``dynamo`` (``import torch, torch._dynamo``: the compiler
stack that the first ``torch.optim`` optimizer imports, in ours and SB3 alike) and, when asked,
``dynamo_nogc``, the same with the garbage collector off during the imports, as main.py imports.
Sides alternate pair by pair; printed: each side's median (min-max) over the pairs, its peak RSS,
and SB3 / ours. ``--importtime`` runs ours once more under ``python -X importtime`` and prints
where its imports' time goes, package by package, and what of it is ours.
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

from fps import ROOT, case_argv

from cases import CASES

# Run in the child before the script: patch the side's env step when its module is imported.
HOOK = r'''
import importlib.abc, importlib.machinery, os, sys, time
TARGETS = {targets!r}  # module -> [(class, method)]
def _first(*args, **kwargs):
    sys.stdout.write("FIRST_STEP %.6f\n" % time.monotonic()); sys.stdout.flush()
    os._exit(0)
class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name not in TARGETS:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        run = spec.loader.exec_module
        def exec_module(module):
            run(module)
            for cls, method in TARGETS[name]:
                setattr(getattr(module, cls), method, _first)
        spec.loader.exec_module = exec_module
        return spec
sys.meta_path.insert(0, _Finder())
import runpy
sys.argv = {argv!r}
runpy.run_path(sys.argv[0], run_name="__main__")
'''
FLOORS = ("python", "torch", "dynamo", "dynamo_nogc")
# Where each side's first env step passes: ours through the torch layer, or (the pipelined
# collector of ``--vec-env ale-pipelined``) straight to ALE's groups.
STEPS = {"ours": {"a2c_ppo_acktr.envs.torch_vec": [("VecPyTorch", "step")],
                  "a2c_ppo_acktr.envs.ale": [("AleVecEnv", "send")]},
         "sb3": {"stable_baselines3.common.vec_env.base_vec_env": [("VecEnv", "step")]}}


def command(side: str, case: str, seed: int, workdir: str) -> list[str]:
    """The child's command line for ``side``."""
    if side == "python":
        return [sys.executable, "-c", "pass"]
    if side == "torch":
        return [sys.executable, "-c", "import torch"]
    if side == "dynamo":  # what torch.optim's first optimizer adds: its compiler stack
        return [sys.executable, "-c", "import torch, torch._dynamo"]
    if side == "dynamo_nogc":  # the same with the collector off, as main.py imports
        return [sys.executable, "-c", "import gc; gc.disable(); import torch, torch._dynamo"]
    if side == "ours":
        argv = [os.path.join(ROOT, "main.py"), *case_argv(CASES[case], seed, workdir)]
    else:
        argv = [os.path.join(ROOT, "scripts", "bench", "fps.py"), "--one", "sb3", case,
                "--seed", str(seed)]
    return [sys.executable, "-c", HOOK.format(targets=STEPS[side], argv=argv)]


def first_step(side: str, case: str, seed: int = 1) -> tuple[float, float]:
    """Seconds from just before the process starts to its first env step (floors: to its end),
    and the process's peak RSS (MiB) by then."""
    with tempfile.TemporaryDirectory() as workdir, tempfile.TemporaryFile("w+") as out, \
            tempfile.TemporaryFile("w+") as err:
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(
            [ROOT, os.path.join(ROOT, "scripts", "bench"), os.environ.get("PYTHONPATH", "")]))
        start = time.monotonic()
        proc = subprocess.Popen(command(side, case, seed, workdir), cwd=workdir, env=env,
                                stdout=out, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        end = time.monotonic()
        proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here, not by Popen
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
    if proc.returncode != 0:
        raise RuntimeError(f"{side} {case} exited {proc.returncode}:\n{stderr[-3000:]}")
    peak = usage.ru_maxrss / 1024.0
    if side in FLOORS:
        return end - start, peak
    marks = re.findall(r"FIRST_STEP ([0-9.]+)", stdout)
    if not marks:
        raise RuntimeError(f"{side} {case}: no env step seen\n{stderr[-2000:]}")
    return float(marks[0]) - start, peak


# Modules of ours that a plain run (one process, no GAIL, no Ray, no torchrun, no real-time env)
# imports but never uses: what lazy imports could still cut.
UNUSED = ("a2c_ppo_acktr.sampling.ray_learner", "a2c_ppo_acktr.sampling.ray_actors",
          "a2c_ppo_acktr.sampling.ddp", "a2c_ppo_acktr.sampling.async_thread",
          "a2c_ppo_acktr.algo.gail", "a2c_ppo_acktr.algo.kfac", "a2c_ppo_acktr.realtime.drone",
          "a2c_ppo_acktr.envs.ale", "a2c_ppo_acktr.envs.native", "a2c_ppo_acktr.envs.envpool",
          "a2c_ppo_acktr.run.tracking")


def import_costs(case: str, top: int = 12) -> tuple[list[tuple[float, str]], float, float]:
    """Ours under ``-X importtime``, to the first env step: the ``top`` packages by the import
    time spent in their own modules (s; ours counted apart), ours in all, and ``UNUSED``'s."""
    with tempfile.TemporaryDirectory() as workdir:
        cmd = command("ours", case, 1, workdir)
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(
            [ROOT, os.path.join(ROOT, "scripts", "bench"), os.environ.get("PYTHONPATH", "")]))
        err = subprocess.run([cmd[0], "-X", "importtime", *cmd[1:]], cwd=workdir, env=env,
                             capture_output=True, text=True).stderr
    by_package: dict[str, float] = {}
    unused = 0.0
    for line in err.splitlines():
        m = re.match(r"import time:\s+(\d+) \|\s+\d+ \|\s*(\S+)", line)
        if m:
            seconds, name = int(m.group(1)) / 1e6, m.group(2)
            package = ("torch._dynamo" if name.startswith("torch._dynamo")
                       else name.split(".")[0])
            by_package[package] = by_package.get(package, 0.0) + seconds
            unused += seconds if name in UNUSED else 0.0
    ranked = sorted(((t, n) for n, t in by_package.items()), reverse=True)[:top]
    return ranked, by_package.get("a2c_ppo_acktr", 0.0), unused


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n\n")[0])
    p.add_argument("--cases", nargs="+", default=["a"], choices=sorted(CASES))
    p.add_argument("--pairs", type=int, default=5)
    p.add_argument("--sides", nargs="+", default=["ours", "sb3", *FLOORS[:3]],
                   choices=["ours", "sb3", *FLOORS])
    p.add_argument("--importtime", action="store_true", help="also list ours' costliest imports")
    args = p.parse_args(argv)
    if args.pairs < 1:
        p.error(f"--pairs must be at least 1; got {args.pairs}")
    for case in args.cases:
        times: dict[str, list[float]] = {side: [] for side in args.sides}
        peaks: dict[str, list[float]] = {side: [] for side in args.sides}
        for pair in range(args.pairs):
            for side in args.sides:
                seconds, peak = first_step(side, case, seed=pair + 1)
                times[side].append(seconds)
                peaks[side].append(peak)
            print(f"case {case} pair {pair + 1}: " + ", ".join(
                f"{side} {t[-1]:.2f}s" for side, t in times.items()), flush=True)
        print(f"case {case} ({CASES[case]['algo']} {CASES[case]['env']}), start to first env "
              f"step, median (min-max) of {args.pairs}, peak RSS:")
        for side, t in times.items():
            print(f"  {side:<11} {statistics.median(t):6.2f}s ({min(t):.2f}-{max(t):.2f})  "
                  f"{statistics.median(peaks[side]):5.0f} MiB")
        if "ours" in times and "sb3" in times:
            print(f"  SB3 / ours: {statistics.median(times['sb3']) / statistics.median(times['ours']):.2f}x")
        if args.importtime:
            ranked, ours, unused = import_costs(case)
            print("  ours' imports by package, time in its own modules (s; torch._dynamo apart):")
            for seconds, name in ranked:
                print(f"    {seconds:6.3f}  {name}")
            print(f"  of ours ({ours:.3f}s), modules a plain run never uses: {unused:.3f}s")


if __name__ == "__main__":
    main()
