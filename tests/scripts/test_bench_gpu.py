"""scripts/bench/gpu.py: the README's Pong command it runs is still the README's; on a machine
without CUDA one line and exit status 2; on CUDA a short run of each impl (skipped here)."""
import json
import os
import shlex
import subprocess
import sys

import pytest
import torch
from gpu import README_PONG, sb3_case

from a2c_ppo_acktr.settings import recipes

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
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


@pytest.mark.slow
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


# --- the measuring modes (--steady, --score, --sweep, --all): what runs without a GPU ---

PROGRESS = ("update,timesteps,fps,mean_return,median_return,min_return,max_return,time\n"
            "0,1024,100,,,,,10.0\n"
            "1,2048,200,-21.0,-21,-21,-21,11.0\n"
            "2,3072,300,-20.0,-20,-20,-20,11.5\n"
            "3,4096,400,18.5,18,18,19,12.0\n"
            "4,5120,500,20.0,20,20,20,12.25\n"
            "5,6144,600,19")  # a row being written: left for the next reading


def test_rows_give_start_up_steady_rate_and_the_first_update_at_a_threshold():
    from watch import Row, first_reach, loop_start, parse_rows, startup, steady_rate, wall
    rows = parse_rows(PROGRESS, seen=20.0)
    assert [(r.update, r.steps, r.mean_return) for r in rows] == [
        (0, 1024, None), (1, 2048, -21.0), (2, 3072, -20.0), (3, 4096, 18.5), (4, 5120, 20.0)]
    assert parse_rows(PROGRESS, seen=21.0, known=4) == [Row(4, 5120, 12.25, 20.0, 21.0)]
    # each row read at its loop time + 3 s, one 0.5 s late: the loop began 3 s after the command
    rows = [Row(r.update, r.steps, r.time, r.mean_return, r.time + (3.5 if r.update == 2 else 3.0))
            for r in rows]
    assert loop_start(rows) == 3.0 and startup(rows) == 13.0 and wall(rows[3], rows) == 15.0
    # after the first 2 updates: (5120 - 2048) steps in (12.25 - 11.0) s
    assert steady_rate(rows, 2) == 3072 / 1.25
    assert steady_rate(rows, 5) is None and steady_rate(rows[:1], 1) is None
    assert first_reach(rows, 18).update == 3 and first_reach(rows, 20).update == 4
    assert first_reach(rows, 21) is None


FAKE_MAIN = '''
import os, signal, sys, time
log_dir = sys.argv[sys.argv.index("--log-dir") + 1]
returns = [float(x) for x in sys.argv[1].split(",")]
print("torch.compile: 4.5 s compiling the act step and the update", flush=True)
signal.signal(signal.SIGTERM, lambda *a: sys.exit(143))
time.sleep(0.5)  # start-up
os.makedirs(os.path.join(log_dir, "ppo", "Fake_seed1"))
with open(os.path.join(log_dir, "ppo", "Fake_seed1", "progress.csv"), "w") as f:
    f.write("update,timesteps,mean_return,time\\n")
    f.flush()
    for j, r in enumerate(returns):
        time.sleep(0.2)
        f.write(f"{j},{100 * (j + 1)},{r},{0.2 * (j + 1)}\\n")
        f.flush()
    time.sleep(60)
'''


@pytest.mark.slow
@pytest.mark.parametrize("stop_at, limit, ended, rows", [(18, 30, "stopped", 3),
                                                         (99, 1.6, "time limit", None)])
def test_watch_reads_a_growing_progress_csv_and_stops_the_run(tmp_path, stop_at, limit, ended, rows):
    """A fake main.py writes a row every 0.2 s after 0.5 s of start-up, then sleeps: watch reads
    the rows as they come and ends it (SIGTERM) at the threshold or at the time limit."""
    from watch import compile_seconds, reached, startup, watch
    fake = tmp_path / "fake_main.py"
    fake.write_text(FAKE_MAIN)
    work = tmp_path / "work"
    work.mkdir()
    result = watch(["-20,10,18.5,20"], str(work), limit, reached(stop_at), program=str(fake))
    assert result.ended == ended and result.rc == 143
    assert compile_seconds(result.stdout) == 4.5
    if rows is not None:
        assert [r.mean_return for r in result.rows] == [-20, 10, 18.5]
        assert result.elapsed < 10  # stopped, not slept out
    else:
        assert 1.6 <= result.elapsed < 10 and len(result.rows) == 4
    assert 0.6 < startup(result.rows) < 5  # 0.5 s start-up + the first 0.2 s row, read late


def test_each_part_gets_its_share_of_what_is_left(monkeypatch, capsys):
    """The budget planner: shares by weight, a part's unused time going to the parts after it,
    a part with under MIN_CAP_S left skipped."""
    import gpu_modes
    from gpu_report import next_cap, plan
    assert plan(100, [1, 3]) == [25, 75] and next_cap(60, [1, 2]) == 20 and next_cap(-5, [1]) == 0
    clock = [0.0]
    monkeypatch.setattr(gpu_modes.time, "perf_counter", lambda: clock[0])
    caps = []

    def measure(part, cap, skip, thresholds, cuda):  # each part takes half its cap
        caps.append(round(cap, 6))
        clock[0] += cap / 2 if part.part != "sweep" else 1000
        return gpu_modes.skipped(part, cap) | {"ended": "ran"}
    monkeypatch.setattr(gpu_modes, "measure", measure)
    parts = gpu_modes.make_parts("all", ["eager"], [8], [4, 8], "eager", [15, 20], 1.0, 1, 1,
                                 cuda=False)
    assert [(p.part, p.envs, p.weight) for p in parts] == [
        ("steady", 8, 1.0), ("score", 8, 4.5), ("sweep", 4, 0.75), ("sweep", 8, 0.75)]
    results = gpu_modes.run_parts(parts, 1, [15, 20], False, budget=100 + gpu_modes.GRACE_S)
    # 100 s for 7 weights: steady 100/7; score 4.5/6 of what is left; the first sweep part ...
    first = 100 / 7
    second = (100 - first / 2) * 4.5 / 6
    third = (100 - first / 2 - second / 2) * 0.75 / 1.5
    assert caps == [round(first, 6), round(second, 6), round(third, 6)]
    assert [r["ended"] for r in results] == ["ran", "ran", "ran", "skipped: 0 s left for it"]
    printed = capsys.readouterr().out.splitlines()
    assert printed[0].startswith("| part | command | envs | steady env-steps/s") and len(printed) == 6


def test_the_table_file_names_the_machine_and_each_run(tmp_path):
    from gpu_report import write_table
    result = {"part": "steady", "command": "--env-name PongNoFrameskip-v4 --recipe original",
              "envs": 8, "rate": 4012.4, "target": 3728, "startup": 9.25, "compile_s": None,
              "busy": 0.125, "reach": {}, "last": -20.5, "steps": 123904,
              "ended": "stopped (measured)"}
    score = result | {"part": "score", "rate": 15000.0, "target": None, "busy": None,
                      "reach": {18.0: (120.4, 1_200_000)}, "last": 20.1, "ended": "stopped (reached)"}
    path = tmp_path / "t.md"
    write_table(str(path), "scripts/bench/gpu.py --all", "NVIDIA H200 (143771 MiB), 16 CPUs",
                [result, score, result | {"rate": 100.0}], [18, 20], ["a note"])
    lines = path.read_text().splitlines()
    assert lines[0] == "# scripts/bench/gpu.py --all"
    assert lines[2] == "Machine: NVIDIA H200 (143771 MiB), 16 CPUs" and lines[3].startswith("Date: ")
    assert lines[5:] == [
        "| part | command | envs | steady env-steps/s | target | start-up s | compile s | GPU busy "
        "| to 18: s (steps) | to 20: s (steps) | last mean-10 | steps | ended |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
        "| steady | `--env-name PongNoFrameskip-v4 --recipe original` | 8 | 4,012 | >= 3,728: yes "
        "| 9.2 | - | 12% | - | - | -20.5 | 123,904 | stopped (measured) |",
        "| score | `--env-name PongNoFrameskip-v4 --recipe original` | 8 | 15,000 | - | 9.2 | - "
        "| - | 120 s (1,200,000) | - | 20.1 | 123,904 | stopped (reached) |",
        "| steady | `--env-name PongNoFrameskip-v4 --recipe original` | 8 | 100 | >= 3,728: no "
        "| 9.2 | - | 12% | - | - | -20.5 | 123,904 | stopped (measured) |",
        "", "- a note"]


def test_cuda_parts_are_the_readme_command_and_the_fast_recipe():
    from gpu_modes import make_parts
    parts = make_parts("all", ["eager", "compile"], [8], [16, 128], "eager", [18, 20], 30, 3, 2,
                       cuda=True)
    assert [(p.part, p.envs, p.target, p.weight) for p in parts] == [
        ("steady", 8, 3728, 1.0), ("steady", 8, 7000, 3.0), ("score", 64, None, 4.5),
        ("sweep", 16, None, 0.75), ("sweep", 128, None, 0.75)]
    assert parts[1].argv == README_PONG + ["--num-processes", "8", "--compile", "--seed", "2"]
    assert parts[2].argv == ["--env-name", "PongNoFrameskip-v4", "--recipe", "fast", "--seed", "2"]
    # the sweep keeps the fast recipe's minibatches of 128 samples (32 steps an env)
    assert parts[3].argv[4:8] == ["--num-processes", "16", "--num-mini-batch", "4"]
    assert parts[4].argv[4:8] == ["--num-processes", "128", "--num-mini-batch", "32"]


@pytest.mark.slow
def test_all_on_the_cpu_runs_the_whole_flow_and_writes_its_table(tmp_path):
    """--device cpu: the flow of --all (steady, score, sweep, the table) on CartPole."""
    out = tmp_path / "table.md"
    proc = subprocess.run([sys.executable, SCRIPT, "--all", "--device", "cpu", "--ours", "eager",
                           "--sweep-envs", "4", "--thresholds", "10", "20", "--budget", "200",
                           "--measure", "1", "--skip", "1", "--out", str(out)],
                          capture_output=True, text=True, timeout=400, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = [line for line in out.read_text().splitlines() if line.startswith("| ")][1:]
    assert [row.split(" | ")[0] for row in rows] == ["| steady", "| score", "| sweep"]
    steady, score, sweep = ([cell.strip() for cell in row.strip("|").split("|")] for row in rows)
    assert float(steady[3].replace(",", "")) > 0 and steady[-1] == "stopped (measured)", steady
    assert score[-1] == "stopped (reached)" and score[9] != "-", score  # 20 reached, when
    assert sweep[2] == "4" and proc.stdout.count("| sweep |") == 1
    assert f"table: {out}" in proc.stdout


@pytest.mark.slow
@pytest.mark.parametrize("argv, message", [
    (["--all", "--device", "cpu", "--budget", "0"],
     "argument --budget: '0' is not a number above 0 (see --help)"),
    (["--all", "--device", "cpu", "--out", "/nonexistent/dir/t.md"],
     "--out /nonexistent/dir/t.md: its directory does not exist"),
    (["--device", "cpu"], "--device cpu runs --steady, --score, --sweep or --all, not the "
                          "comparison with SB3"),
    (["--steady", "--score"], "argument --score: not allowed with argument --steady (see --help)")])
def test_bad_input_exits_2_in_one_line(argv, message, tmp_path):
    proc = subprocess.run([sys.executable, SCRIPT, *argv], capture_output=True, text=True,
                          timeout=120, cwd=tmp_path)
    assert proc.returncode == 2 and proc.stdout == "" and list(tmp_path.iterdir()) == []
    assert proc.stderr == f"gpu.py: error: {message}\n"


@pytest.mark.slow
@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_all_without_cuda_says_so_in_one_line(tmp_path):
    proc = subprocess.run([sys.executable, SCRIPT, "--all"], capture_output=True, text=True,
                          timeout=120, cwd=tmp_path)
    assert proc.returncode == 2 and proc.stdout == "" and list(tmp_path.iterdir()) == []
    assert proc.stderr.startswith("gpu.py: error: needs a CUDA GPU") and proc.stderr.count("\n") == 1


def test_a_runs_row_from_its_rows_output_and_gpu_samples(monkeypatch):
    """measure(): the CUDA branch's figures from a watched run, given its rows, its output and
    the GPU's samples (the run and NVML replaced)."""
    import gpu_modes
    from watch import Row, Watched
    # the loop began 5 s after the command (at perf_counter 100); an update a second after 10 s
    rows = [Row(j, 1024 * (j + 1), 10.0 + j, None if j < 2 else -21.0 + 10 * j,
                15.0 + j + (0.05 if j == 1 else 0.0))  # update 1 read 0.05 s late
            for j in range(5)]
    watched = Watched(rows, 143, "stopped", 21.0,
                      "torch.compile: 8.5 s compiling the act step and the update\n",
                      "main.py: torch.compile: Inductor's compile workers failed (...); compiling "
                      "in this process\n", started=100.0)

    class FakeBusy:
        # at the command's 16.5 s and 18 s (inside the window after update 1: 16-19 s); 25 s after
        samples = [(100.0 + t, share) for t, share in ((3.0, 0.9), (16.5, 0.2), (18.0, 0.4),
                                                      (25.0, 1.0))]

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            pass
    monkeypatch.setattr(gpu_modes, "GpuBusy", FakeBusy)
    monkeypatch.setattr(gpu_modes, "watch", lambda argv, workdir, limit, stop: watched)
    part = gpu_modes.Part("score", ["--recipe", "fast"], 64, 4.5, lambda rows: False)
    r = gpu_modes.measure(part, 300.0, 2, [18, 20], cuda=True)
    assert r["rate"] == 3 * 1024 / 3.0 and r["startup"] == 15.0
    assert r["busy"] == pytest.approx(0.3) and r["compile_s"] == 8.5 and r["in_process"]
    assert r["reach"] == {18: (19.0, 5120)}  # mean-10 -1, 9, 19 at updates 2, 3, 4: not 20
    assert (r["last"], r["steps"], r["ended"]) == (19.0, 5120, "stopped (reached)")
    rows[4].mean_return = 20.0
    r = gpu_modes.measure(part, 300.0, 2, [18, 20], cuda=True)
    assert r["reach"] == {18: (19.0, 5120), 20: (19.0, 5120)}


def _device_call_packages() -> tuple[set[str], set[str]]:
    """docs/benchmarks.md's device call: (the wheels it downloads, the packages it names as in
    the H200's image), as normalized distribution names."""
    with open(os.path.join(ROOT, "docs", "benchmarks.md")) as f:
        text = f.read()
    download = next(line for line in text.splitlines()
                    if line.strip().startswith("python3 -m pip download") and "-d .whl" in line)
    wheels = {spec.split("==")[0] for spec in download.split("-d .whl", 1)[1].split()}
    named = text.split("In the image, by its package list of", 1)[1].split(";", 1)[0]
    image = {name.strip() for name in named.split(":", 1)[1].replace("\n", " ").split(",")}
    return {_normal(n) for n in wheels}, {_normal(n) for n in image}


def _normal(name: str) -> str:
    return name.lower().replace("_", "-")


LOADS = """
import importlib.metadata, json, sys
import main
from a2c_ppo_acktr.envs import make_vec_envs
for env in ("PongNoFrameskip-v4", "CartPole-v1"):
    make_vec_envs(env, 1, 2, 0.99, None, "cpu", False).close()
owners = importlib.metadata.packages_distributions()
print(json.dumps(sorted({d for m in list(sys.modules) for d in owners.get(m.split(".")[0], [])})))
"""


@pytest.mark.slow
def test_the_device_calls_wheels_and_image_hold_what_main_loads():
    """The GPU machine has torch but not gymnasium, ale-py nor stable-baselines3: the documented
    call must carry every package that main.py loads to train and that its image lacks."""
    wheels, image = _device_call_packages()
    assert {"gymnasium", "ale-py", "stable-baselines3"} <= wheels and "torch" in image
    proc = subprocess.run([sys.executable, "-c", LOADS], capture_output=True, text=True,
                          timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    loaded = {_normal(d) for d in json.loads(proc.stdout.splitlines()[-1])} - {"a2c-ppo-acktr"}
    # Imported only where installed, by a try of the importer, and not needed to train:
    # torch._dynamo's optree pytrees (envpool brings optree), tqdm's rich bar (SB3 asks for it).
    optional = {"optree", "rich"}
    assert loaded - wheels - image - optional == set()
