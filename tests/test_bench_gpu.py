"""scripts/bench/gpu.py: the README's Pong command it runs is still the README's; on a machine
without CUDA one line and exit status 2; on CUDA a short run of each impl (skipped here)."""
import os
import shlex
import subprocess
import sys

import pytest
import torch
from gpu import README_PONG, sb3_case

from a2c_ppo_acktr.run import recipes

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "scripts", "bench", "gpu.py")


def test_it_runs_the_readmes_pong_command_and_sb3_with_its_settings():
    with open(os.path.join(ROOT, "README.md")) as f:
        readme = f.read().replace("\\\n", " ")
    commands = [shlex.split(line)[2:] for line in readme.splitlines()
                if line.startswith("python main.py --env-name PongNoFrameskip-v4")]
    assert README_PONG in commands
    recipe = recipes.settings("PongNoFrameskip-v4", "original")
    case = sb3_case(16, 4096)
    assert (case["env"], case["n_envs"], case["total"]) == ("PongNoFrameskip-v4", 16, 4096)
    assert (case["algo"], case["n_steps"], case["minibatches"], case["lr"], case["ent"],
            case["clip"], case["gae"], case["lr_decay"]) == (
        recipe["algo"], recipe["num_steps"], recipe["num_mini_batch"], recipe["lr"],
        recipe["entropy_coef"], recipe["clip_param"], recipe["use_gae"],
        recipe["use_linear_lr_decay"])
    # Ours halves the squared error (0.5 (R - V)^2 weighted --value-loss-coef): SB3's is half.
    assert case["vf_coef"] == recipe["value_loss_coef"] / 2 and case["epochs"] == 4


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_without_cuda_it_says_so_in_one_line():
    proc = subprocess.run([sys.executable, SCRIPT, "--envs", "8"], capture_output=True, text=True,
                          timeout=120, cwd=ROOT)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.strip() == ("gpu.py: error: needs a CUDA GPU (torch.cuda.is_available() is "
                                   "False here); on the CPU, scripts/bench/fps.py --ours eager "
                                   "compile bf16 measures the same options")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_short_run_on_cuda_prints_a_row_per_impl():
    proc = subprocess.run([sys.executable, SCRIPT, "--envs", "8", "--seeds", "1", "--total", "2048"],
                          capture_output=True, text=True, timeout=1800, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = [line.split() for line in proc.stdout.splitlines()[2:]]
    assert [row[:2] for row in rows] == [["8", "eager"], ["8", "compile"], ["8", "sb3"]]
    assert all(float(row[2]) > 0 for row in rows) and rows[-1][3] == "1.00x"


def test_rows_alternate_and_follow_the_documented_format(monkeypatch, capsys):
    """The loop and its table, with the measurements (a GPU's runs) replaced by given figures."""
    import gpu
    figures = {"eager": (1000.0, 1200.0), "compile": (3000.0, 2800.0), "sb3": (400.0, 600.0)}
    calls = []

    def measure(impl, envs, seed, total):
        calls.append((impl, seed))
        if impl == "bf16":
            return {"refused": "--precision bf16 needs a GPU with native bf16"}
        return {"fps": figures[impl][seed - 1], "busy": None if impl == "sb3" else 0.25 * seed,
                "compile_s": 9.5 if impl == "compile" else 0.0}
    monkeypatch.setattr(gpu, "measure", measure)
    monkeypatch.setattr(gpu.torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(gpu.torch.cuda, "get_device_name", lambda *args: "Some GPU")
    gpu.main(["--envs", "8", "--seeds", "1", "2", "--ours", "eager", "compile", "bf16"])
    # seed 2 runs the other way round; a refused variant is not asked again
    assert calls == [("eager", 1), ("compile", 1), ("bf16", 1), ("sb3", 1), ("sb3", 2),
                     ("compile", 2), ("eager", 2)]
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("Some GPU, ") and "50,000 steps a run, seeds 1 2" in lines[0]
    assert lines[1:] == [
        "envs impl           env-steps/s   / SB3  GPU busy  compile s   per seed: steps/s (GPU busy)",
        "8    eager                 1200   2.00x       38%        0.0   1000 (25%), 1200 (50%)",
        "8    compile               3000   5.00x       38%        9.5   3000 (25%), 2800 (50%)",
        "8    bf16          refused: --precision bf16 needs a GPU with native bf16",
        "8    sb3                    600   1.00x         -        0.0   400 (-), 600 (-)"]
