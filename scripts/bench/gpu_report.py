"""What ``scripts/bench/gpu.py``'s measuring modes report: the budget's split into parts, the
machine's name, and each run as a row of one markdown table (printed as it comes, and written to a
file with the machine named)."""
import os
import platform
import subprocess
import time
from collections.abc import Sequence

COLUMNS = ("part", "command", "envs", "steady env-steps/s", "target", "start-up s", "compile s",
           "GPU busy")
TAIL = ("last mean-10", "steps", "ended")


def plan(budget: float, weights: Sequence[float]) -> list[float]:
    """Each part's share of ``budget`` seconds, in proportion to its weight."""
    return [budget * w / sum(weights) for w in weights]


def next_cap(remaining: float, weights_left: Sequence[float]) -> float:
    """The seconds the next part may take: its weight's share of what is left, so that the time
    a part leaves unused goes to the parts after it."""
    return max(0.0, remaining) * weights_left[0] / sum(weights_left)


def machine(cuda: bool) -> str:
    """The machine in one line: the GPU as nvidia-smi names it (else torch), the CPUs, versions."""
    parts = []
    if cuda:
        try:
            out = subprocess.run(["nvidia-smi", "--query-gpu=name,memory.total,driver_version",
                                  "--format=csv,noheader"], capture_output=True, text=True,
                                 timeout=10)
            first = out.stdout.strip().splitlines()[0] if out.returncode == 0 else ""
        except (OSError, subprocess.TimeoutExpired, IndexError):
            first = ""
        if first:
            name, memory, driver = (x.strip() for x in first.split(","))
            parts.append(f"{name} ({memory}, driver {driver})")
        else:
            import torch
            props = torch.cuda.get_device_properties(0)
            parts.append(f"{props.name} ({props.total_memory / 2 ** 30:.0f} GiB)")
    parts.append(f"{os.cpu_count()} CPUs ({cpu_model()})")
    parts.append(versions())
    return ", ".join(parts)


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def versions() -> str:
    from importlib.metadata import PackageNotFoundError, version
    found = [f"Python {platform.python_version()}"]
    for package in ("torch", "gymnasium", "ale-py"):
        try:
            found.append(f"{package} {version(package)}")
        except PackageNotFoundError:
            found.append(f"{package} missing")
    return ", ".join(found)


def number(x: float | None, digits: int = 0) -> str:
    return "-" if x is None else f"{x:,.{digits}f}"


def reach_cell(hit: tuple[float, int] | None) -> str:
    """Seconds from the command's start (its env steps) at which a threshold was first reached."""
    return "-" if hit is None else f"{hit[0]:.0f} s ({hit[1]:,})"


def header(thresholds: Sequence[float]) -> list[str]:
    names = list(COLUMNS) + [f"to {t:g}: s (steps)" for t in thresholds] + list(TAIL)
    return ["| " + " | ".join(names) + " |", "|" + "---|" * len(names)]


def row(r: dict, thresholds: Sequence[float]) -> str:
    """One run's table row; ``r`` as ``gpu_modes.measure`` returns it."""
    busy = None if r["busy"] is None else f"{100 * r['busy']:.0f}%"
    target = "-" if r["target"] is None else (
        f">= {r['target']:,}: " + ("yes" if r["rate"] is not None and r["rate"] >= r["target"]
                                   else "no"))
    cells = [r["part"], f"`{r['command']}`", str(r["envs"]), number(r["rate"]), target,
             number(r["startup"], 1), number(r["compile_s"], 1), busy or "-"]
    cells += [reach_cell(r["reach"].get(t)) for t in thresholds]
    cells += [number(r["last"], 1), number(r["steps"]), r["ended"]]
    return "| " + " | ".join(cells) + " |"


def write_table(path: str, title: str, machine_line: str, results: Sequence[dict],
                thresholds: Sequence[float], notes: Sequence[str] = ()) -> None:
    """The table file: what ran, on what, when, then a row per run and the notes."""
    lines = [f"# {title}", "", f"Machine: {machine_line}",
             f"Date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}", "",
             *header(thresholds), *(row(r, thresholds) for r in results)]
    if notes:
        lines += [""] + [f"- {note}" for note in notes]
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write("\n".join(lines) + "\n")
    os.replace(tmp, path)
