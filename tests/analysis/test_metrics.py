"""analysis/metrics.py: the four named metrics on run dirs written here, each against its definition
computed by hand (numpy) from what the files hold."""
import json

import numpy as np
import pytest

from a2c_ppo_acktr.analysis import metrics
from a2c_ppo_acktr.errors import LogError


def run_dir(path, curve=None, final=None):
    """A run's log dir with an evaluation curve {steps: mean} and a final evaluation's mean."""
    path.mkdir(parents=True)
    if curve is not None:
        (path / "eval").mkdir()
        rows = [f"{i},{s},10,{m},0.0" for i, (s, m) in enumerate(curve.items())]
        (path / "eval" / "eval.csv").write_text(
            "update,timesteps,episodes,mean_return,std_return\n" + "\n".join(rows) + "\n")
    if final is not None:
        (path / "final_eval.json").write_text(json.dumps({"mean_return": final, "episodes": 10}))
    return str(path)


def test_last10_and_last100_average_the_last_training_episodes(tmp_path):
    rng = np.random.default_rng(0)
    returns = [rng.normal(size=150), rng.normal(size=40)]
    dirs = [run_dir(tmp_path / "a"), run_dir(tmp_path / "b")]
    assert np.allclose(metrics.scores("last10", dirs, returns), [r[-10:].mean() for r in returns])
    assert np.allclose(metrics.scores("last100", dirs, returns), [r[-100:].mean() for r in returns])


def test_final_det_reads_each_runs_final_evaluation(tmp_path):
    dirs = [run_dir(tmp_path / "a", final=12.5), run_dir(tmp_path / "b", final=-3.0)]
    assert list(metrics.scores("final-det", dirs, [np.zeros(1)] * 2)) == [12.5, -3.0]


def test_final_det_names_the_runs_without_one_and_the_flag(tmp_path):
    dirs = [run_dir(tmp_path / "a", final=1.0), run_dir(tmp_path / "b")]
    with pytest.raises(LogError, match=r"no final_eval.json in .*b\b.*--final-eval-episodes") as e:
        metrics.scores("final-det", dirs, [np.zeros(1)] * 2)
    assert str(tmp_path / "a") not in str(e.value)


def test_max_eval_takes_each_run_at_the_seed_mean_curves_peak(tmp_path):
    # seed means: 100 -> 2.0, 200 -> 5.0 (the peak), 300 -> 4.5; run b's own best is at 300
    a = run_dir(tmp_path / "a", curve={100: 1.0, 200: 6.0, 300: 3.0})
    b = run_dir(tmp_path / "b", curve={100: 3.0, 200: 4.0, 300: 6.0, 400: 9.0})  # 400: a lacks it
    scores, step = metrics.max_eval([a, b])
    assert step == 200 and list(scores) == [6.0, 4.0]
    assert list(metrics.scores("max-eval", [a, b], [np.zeros(1)] * 2)) == [6.0, 4.0]


def test_max_eval_without_a_curve_or_a_shared_step_is_one_line(tmp_path):
    with pytest.raises(LogError, match="no evaluation curve .*--eval-interval"):
        metrics.max_eval([run_dir(tmp_path / "a")])
    with pytest.raises(LogError, match="share no env step"):
        metrics.max_eval([run_dir(tmp_path / "b", curve={1: 1.0}),
                          run_dir(tmp_path / "c", curve={2: 1.0})])
