"""``scripts/episodes.py``: a run's games window by window, and by score, from its monitor files."""
import episodes
import pytest

from tests.analysis.test_episodes import write_monitor


def run(d, rows, name="0.monitor.csv"):
    """A run dir with one monitor file of rows (return, length, time)."""
    write_monitor(d / name, rows, env_id="PongNoFrameskip-v4")
    return str(d)


def table(capsys, *argv):
    assert episodes.main(list(argv)) == 0
    lines = capsys.readouterr().out.splitlines()
    return [[c.strip() for c in line.strip("|").split("|")] for line in lines]


def test_windows_give_each_window_its_games(tmp_path, capsys):
    # Ends at steps 10, 30, 60, 100 (lengths 10, 20, 30, 40): windows (0, 30] and (30, 100].
    a = run(tmp_path / "a", [(1, 10, 1.0), (3, 20, 2.0), (100, 30, 3.0), (2, 40, 4.0)])
    head, rule, row = table(capsys, f"A={a}", "--windows", "0", "30", "100")
    assert head == ["run", "0-30", "30-100"] and set(rule) == {"---"}
    assert row == ["A", "2.0 ± 1.0 (median 2), 2 games of 15 steps",
                   "51.0 ± 49.0 (median 51), 2 games of 35 steps"]


def test_a_label_pools_its_dirs_and_the_default_window_is_the_whole_run(tmp_path, capsys):
    a = run(tmp_path / "a", [(4, 10, 1.0), (6, 10, 2.0)])
    b = run(tmp_path / "b", [(8, 5, 1.0)])
    head, _, row = table(capsys, f"both={a},{b}")
    assert head == ["run", "0-20"]
    assert row == ["both", "6.0 ± 1.2 (median 6), 3 games of 8 steps"]


def test_by_score_gives_each_bins_mean_length(tmp_path, capsys):
    # Two env ranks, merged by time: their lengths follow their games whatever the order.
    d = tmp_path / "r"
    run(d, [(-21, 800, 1.0), (-20, 900, 3.0)], "0.monitor.csv")
    run(d, [(5, 3000, 2.0), (7, 2000, 4.0)], "1.monitor.csv")
    head, _, row = table(capsys, f"r={d}", "--by-score", "-21", "-20", "0", "21.5")
    assert head == ["run", "score [-21, -20)", "score [-20, 0)", "score [0, 21.5)"]
    assert row == ["r", "800 (1 games)", "900 (1 games)", "2500 (2 games)"]


def test_a_bin_or_window_without_games_is_a_dash(tmp_path, capsys):
    a = run(tmp_path / "a", [(1, 10, 1.0)])
    assert table(capsys, f"A={a}", "--windows", "10", "20")[2] == ["A", "-"]
    assert table(capsys, f"A={a}", "--by-score", "5", "6")[2] == ["A", "-"]


@pytest.mark.parametrize("argv, says", [
    (["--windows", "5", "3"], "--windows takes 2 or more increasing edges, got 5 3"),
    (["--by-score", "1"], "--by-score takes 2 or more increasing edges, got 1"),
    (["--windows", "0", "9", "--by-score", "0", "1"], "not allowed with argument"),
])
def test_bad_edges_are_one_line(tmp_path, capsys, argv, says):
    a = run(tmp_path / "a", [(1, 10, 1.0)])
    with pytest.raises(SystemExit) as e:
        episodes.main([f"A={a}", *argv])
    err = capsys.readouterr().err
    assert e.value.code == 2 and says in err and len(err.strip().splitlines()) == 1


def test_a_missing_run_is_one_line(tmp_path, capsys):
    assert episodes.main([f"A={tmp_path / 'nope'}"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("episodes.py: error: ") and "nope" in err and "\n" not in err


def test_a_log_dir_of_seeds_is_pooled_with_one_row_per_env(tmp_path, capsys):
    logs = tmp_path / "logs" / "ppo"
    for seed in (1, 2, 3):
        run(logs / f"PongNoFrameskip-v4_seed{seed}", [(seed, 10, 1.0)])
    write_monitor(logs / "Breakout_seed1" / "0.monitor.csv", [(7, 10, 1.0)], env_id="Breakout")
    head, _, *rows = table(capsys, f"ppo={tmp_path / 'logs'}")
    assert head == ["run", "0-10"] and rows == [  # each seed's one episode ends at step 10
        ["ppo [Breakout]", "7.0 ± nan (median 7), 1 games of 10 steps"],
        ["ppo [PongNoFrameskip-v4]", "2.0 ± 0.6 (median 2), 3 games of 10 steps"]]
