"""scripts/bench/instructions.py: cachegrind's count read from a real run, the per-step
difference and the ratio as printed, and bad input in one line."""
import shutil
import subprocess
import sys

import instructions
import pytest


@pytest.mark.skipif(shutil.which("valgrind") is None, reason="valgrind not installed")
def test_reads_cachegrind_count_of_a_real_process():
    out = subprocess.run(["valgrind", "--tool=cachegrind", "--cache-sim=no",
                          "--cachegrind-out-file=/dev/null", "/bin/true"],
                         capture_output=True, text=True, timeout=120)
    assert instructions.refs(out.stderr) > 10_000  # the dynamic loader alone runs more


def test_a_summary_without_a_count_is_one_line():
    with pytest.raises(SystemExit, match="no instruction count from ckpt: valgrind: bad option"):
        instructions.refs("==1== something\nvalgrind: bad option\n", "ckpt")


def test_per_step_takes_start_up_out():
    # start-up 1,000,000 in both; 50 a step
    assert instructions.per_step((1_000_000 + 50 * 100, 1_000_000 + 50 * 300), (100, 300)) == 50


def test_prints_each_checkout_and_the_ratio(monkeypatch, capsys, tmp_path):
    (tmp_path / "scripts" / "bench").mkdir(parents=True)
    (tmp_path / "scripts" / "bench" / "fps.py").write_text("")
    per_run = {(instructions.ROOT, 100): 1_000, (instructions.ROOT, 200): 2_100,
               (str(tmp_path), 100): 1_000, (str(tmp_path), 200): 2_000}
    monkeypatch.setattr(instructions, "instructions", lambda c, case, total: per_run[(c, total)])
    monkeypatch.setattr(shutil, "which", lambda name: "/usr/bin/valgrind")
    assert instructions.main(["--case", "b", "--against", str(tmp_path), "--totals", "100", "200"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("ours (") and out[0].endswith("): 11 instructions per env step")
    assert out[1] == f"theirs ({tmp_path}): 10 instructions per env step"
    assert out[2] == "case (b): ours / theirs 1.100"


@pytest.mark.parametrize("argv, words", [
    (["--against", "/nonexistent"], "--against /nonexistent: no scripts/bench/fps.py there"),
    (["--against", ".", "--totals", "200", "100"], "--totals 200 100: expected two budgets"),
])
def test_bad_input_is_one_line(argv, words, capsys, monkeypatch):
    monkeypatch.setattr(shutil, "which", lambda name: "/usr/bin/valgrind")
    monkeypatch.chdir(instructions.ROOT)
    with pytest.raises(SystemExit) as e:
        instructions.main(argv)
    assert e.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert words in err[-1] and "Traceback" not in "\n".join(err)


def test_without_valgrind_one_line(capsys, monkeypatch):
    monkeypatch.setattr(shutil, "which", lambda name: None)
    with pytest.raises(SystemExit) as e:
        instructions.main(["--against", "."])
    assert e.value.code == 2 and "valgrind not found" in capsys.readouterr().err


def test_runs_as_a_script_with_help():
    out = subprocess.run([sys.executable, instructions.__file__, "--help"], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0 and "--against" in out.stdout
