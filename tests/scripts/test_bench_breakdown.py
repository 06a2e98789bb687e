"""scripts/bench/breakdown.py: the timer's exclusive accounting, and a short run as a user runs it
whose parts add up to its wall time."""
import os
import subprocess
import sys
import threading
import time

from breakdown import Timer

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "scripts", "bench", "breakdown.py")


def test_a_part_excludes_the_timed_parts_it_calls_per_thread():
    timer = Timer()
    inner = timer.wrap(lambda: time.sleep(0.05), "env")

    def outer_body():
        time.sleep(0.02)
        inner()
    outer = timer.wrap(outer_body, "normalize")
    start = time.perf_counter()
    outer()
    inclusive = time.perf_counter() - start
    worker = threading.Thread(target=inner, name="sampler")
    worker.start()
    worker.join()
    s = timer.seconds
    assert s["MainThread", "env"] >= 0.05 and s["MainThread", "normalize"] >= 0.02
    # normalize's own time only: with the env's, the two make the outer call's time once
    assert abs(s["MainThread", "normalize"] + s["MainThread", "env"] - inclusive) < 0.005
    assert s["sampler", "env"] >= 0.05 and ("sampler", "normalize") not in s


def test_a_short_run_is_broken_down_into_parts_that_add_up():
    proc = subprocess.run([sys.executable, SCRIPT, "--case", "a", "--total", "2048"],
                          capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("2,048 env steps in ") and "env-steps/s" in lines[0]
    rows = {line.split()[0]: line.split()[1:] for line in lines[2:]}
    assert {"env", "normalize", "act", "storage", "update", "start-up", "rest"} <= set(rows)
    shares = [float(row[-1].rstrip("%")) for row in rows.values()]
    assert all(float(row[0]) >= 0 for row in rows.values())
    assert abs(sum(shares) - 100) < 1.0, shares  # the parts and the rest make the wall time
