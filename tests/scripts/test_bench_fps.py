"""scripts/bench/fps.py, run as a user runs it, cut to a few updates (--total): a row per impl,
our variants (--ours) among them, and a row that says so where main.py refuses a variant."""
import getpass
import os
import subprocess
import sys

import fps
import pytest

from a2c_ppo_acktr.evaluation import FINAL_EVAL_FILE
from a2c_ppo_acktr.speed import cpu_has_native_bf16
from cases import CASES

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "scripts", "bench", "fps.py")


@pytest.mark.slow
def test_variants_get_a_row_each_and_a_refused_one_says_why(tmp_path):
    proc = subprocess.run([sys.executable, SCRIPT, "--cases", "b", "--seeds", "1", "--total", "640",
                           "--ours", "eager", "bf16"], capture_output=True, text=True, timeout=600,
                          cwd=ROOT, env={**os.environ, "TMPDIR": str(tmp_path)})
    assert proc.returncode == 0, proc.stderr[-3000:]
    # Its runs' directories are gone, and SB3's logger made none of its own (SB3's optimizer
    # leaves torch's compiler cache directory, which is torch's to keep).
    assert [p.name for p in tmp_path.iterdir()] in ([], ["torchinductor_" + getpass.getuser()])
    rows = {line.split()[1]: line for line in proc.stdout.splitlines()[1:]
            if line.startswith("b ") and "ratio" not in line}
    assert list(rows) == ["ours", "ours+bf16", "sb3"]
    for impl in ("ours", "sb3"):
        assert float(rows[impl].split()[2]) > 0, rows[impl]
    if cpu_has_native_bf16():
        assert float(rows["ours+bf16"].split()[2]) > 0
    else:
        assert rows["ours+bf16"].split(None, 2)[2] == (
            "refused: --precision bf16 needs a CPU with native bf16 (avx512_bf16 or AMX); this "
            "one has neither")
    assert "b    ratio ours/sb3: " in proc.stdout


@pytest.mark.slow
def test_a_case_run_does_the_work_sb3s_does_no_final_evaluation(tmp_path):
    """SB3's ``learn`` plays no evaluation episodes, so a case's run of ours plays none either
    (``SAME_WORK``); the same run without it writes its final evaluation."""
    case = dict(CASES["b"], total=400)
    train = fps.load_main()
    for name, drop in (("case", []), ("default", fps.SAME_WORK)):
        argv = fps.case_argv(case, 1, str(tmp_path / name))
        if drop:  # the flags themselves, wherever they stand (not any equal value elsewhere)
            at = argv.index(drop[0])
            del argv[at:at + len(drop)]
        fps.train_quietly(train, argv)
    written = {p.relative_to(tmp_path).parts[0] for p in tmp_path.rglob(FINAL_EVAL_FILE)}
    assert written == {"default"}
    assert list((tmp_path / "case").rglob("*.monitor.csv"))  # it trained
