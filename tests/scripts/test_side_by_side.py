"""scripts/side_by_side.py: ours against a peer, a row per (env, metric), from run dirs in both
layouts; each IQM and P(ours > peer) as compare.py gives it for that metric."""
import json

import side_by_side


def write_run(root, algo, env, seed, final_return, final_eval=True):
    run = root / algo / f"{env}_seed{seed}"
    (run / "eval").mkdir(parents=True)
    rows = "\n".join(f"{final_return},100,{i + 1}" for i in range(20))
    (run / "0.monitor.csv").write_text(
        "#" + json.dumps({"t_start": 1.0, "env_id": env}) + "\nr,l,t\n" + rows + "\n")
    (run / "eval" / "eval.csv").write_text(
        "update,timesteps,episodes,mean_return,std_return\n"
        f"1,1000,10,{final_return - 1},0\n2,2000,10,{final_return},0\n")
    if final_eval:
        (run / "final_eval.json").write_text(json.dumps({"mean_return": final_return + 5}))


def test_a_row_per_env_and_metric_with_the_seeds_both_hold(tmp_path, capsys):
    for seed, (ours, zoo) in enumerate([(10, 1), (20, 2), (30, 3)], start=4):
        write_run(tmp_path / "ours", "ppo", "Hopper-v5", seed, ours)
        write_run(tmp_path / "zoo", "ppo", "Hopper-v5", seed, zoo, final_eval=seed != 6)
    write_run(tmp_path / "ours", "ppo", "Hopper-v5", 7, 99)  # no peer run of seed 7: left out
    assert side_by_side.main(["--ours", str(tmp_path / "ours"), "--peer", str(tmp_path / "zoo"),
                              "--algo", "ppo", "--resamples", "100"]) == 0
    out = capsys.readouterr().out
    table = [line for line in out.splitlines() if line.startswith("| Hopper-v5")]
    assert [line.split(" | ")[1] for line in table] == ["last10", "last100", "final-det",
                                                         "max-eval"]
    last10 = table[0].split(" | ")
    assert last10[2] == "4, 5, 6" and last10[3].startswith("20.0 [") and last10[4].startswith("2.00")
    assert last10[5].startswith("1.00")  # every run of ours above every run of the zoo
    assert last10[6] == "10 / 20 / 30; 1 / 2 / 3 |"  # per seed, in seed order
    assert table[2].endswith("| - | - | - | - |")  # seed 6 of the zoo has no final evaluation
    assert "note: Hopper-v5, final-det:" in out and "--final-eval-episodes" in out
    assert table[3].split(" | ")[3].startswith("20.0 [")  # max-eval: the curves' last point


def test_no_runs_in_common_is_one_line(tmp_path, capsys):
    write_run(tmp_path / "ours", "ppo", "Hopper-v5", 1, 1)
    write_run(tmp_path / "zoo", "ppo", "Walker2d-v5", 1, 1)
    assert side_by_side.main(["--ours", str(tmp_path / "ours"), "--peer", str(tmp_path / "zoo"),
                              "--algo", "ppo"]) == 2
    assert "no env and seed has runs in both" in capsys.readouterr().err
    assert side_by_side.main(["--ours", str(tmp_path / "ours"), "--peer", str(tmp_path / "x"),
                              "--algo", "ppo"]) == 2
    assert "--peer" in capsys.readouterr().err


def test_runs_of_other_env_kwargs_are_noted_as_not_the_same_env(tmp_path, capsys):
    """Ours record --env-kwargs as flags, a peer as a dict; a difference is said under the table."""
    for seed in (4, 5):
        write_run(tmp_path / "ours", "ppo", "Ant-v5", seed, 10)
        write_run(tmp_path / "zoo", "ppo", "Ant-v5", seed, 1)
        (tmp_path / "ours" / "ppo" / f"Ant-v5_seed{seed}" / "config.json").write_text(json.dumps(
            {"flags": {"env_kwargs": ["include_cfrc_ext_in_observation=False"]}}))
        (tmp_path / "zoo" / "ppo" / f"Ant-v5_seed{seed}" / "config.json").write_text(json.dumps(
            {"peer": "sb3", "env_kwargs": {"include_cfrc_ext_in_observation": False}}))
    args = ["--ours", str(tmp_path / "ours"), "--peer", str(tmp_path / "zoo"), "--algo", "ppo",
            "--resamples", "50"]
    assert side_by_side.main(args) == 0
    assert "not the same env" not in capsys.readouterr().out
    (tmp_path / "zoo" / "ppo" / "Ant-v5_seed5" / "config.json").write_text(json.dumps(
        {"peer": "sb3", "env_kwargs": {}}))
    assert side_by_side.main(args) == 0
    out = capsys.readouterr().out
    assert ("note: Ant-v5: the runs made their envs with other gym.make kwargs ({'include_cfrc_ext"
            "_in_observation': False}, {}): not the same env") in out
