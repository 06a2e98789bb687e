"""scripts/notes/baselines_curves.py against a page drawn as baselines drew theirs: matplotlib SVGs (text
as <text>, a white grid) of known curves, a score table with a colour swatch per row."""
import io

import baselines_curves
import matplotlib
import numpy as np
import pytest

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

STEPS = np.linspace(0, 1e7, 101)
CURVES = {  # algo: (its swatch colour, reward as a function of env steps)
    "acktr": ((141, 160, 203), lambda s: -21 + 40 * s / 1e7),
    "a2c": ((255, 217, 47), lambda s: -21 + 30 * (s / 1e7) ** 2),
}


def svg(game: str, curves: dict) -> str:
    with plt.rc_context({"svg.fonttype": "none", "axes.facecolor": "#eaeaf2",
                         "grid.color": "#ffffff", "axes.grid": True}):
        fig, ax = plt.subplots(figsize=(8, 2))
        for (r, g, b), f in curves.values():
            ax.plot(STEPS, f(STEPS), color=(r / 255, g / 255, b / 255))
        ax.set_title(game)
        out = io.StringIO()
        fig.savefig(out, format="svg")
        plt.close(fig)
    return out.getvalue()


def page(curves: dict = CURVES) -> str:
    header = "<tr><th> algo </th><td> </td><td>user</td><td>mean</td><td>Pong</td><td>commit</td></tr>"
    rows = "".join(
        f'<tr><td><div>{algo}</div></td><td><div style="background-color:rgba({r}, {g}, {b}, 1.0)">'
        f"&nbsp;</div></td><td>cron</td><td>{i}.5</td><td>{i}.5</td><td>abc</td></tr>"
        for i, (algo, ((r, g, b), _)) in enumerate(curves.items()))
    return f"<html><table>{header}{rows}</table>{svg('Pong', curves)}</html>"


def test_reads_each_curve_by_its_colour_at_the_plotted_points():
    scores, games = baselines_curves.read(page())
    assert scores == {"acktr": {"Pong": 0.5}, "a2c": {"Pong": 1.5}}
    assert set(games) == {"Pong"} and set(games["Pong"]) == {"acktr", "a2c"}
    for algo, (_, f) in CURVES.items():
        points = np.array(games["Pong"][algo])
        assert len(points) == len(STEPS)
        # the SVG keeps ~6 significant digits of a 576-point-wide figure
        np.testing.assert_allclose(points[:, 0], STEPS, atol=2e3)
        np.testing.assert_allclose(points[:, 1], f(STEPS), atol=0.02)


def test_the_legend_is_the_swatch_not_the_drawing_order():
    reversed_curves = dict(reversed(list(CURVES.items())))
    _, games = baselines_curves.read(page(reversed_curves))
    for algo, (_, f) in CURVES.items():
        np.testing.assert_allclose(np.array(games["Pong"][algo])[-1, 1], f(1e7), atol=0.02)


def test_prints_the_reward_nearest_each_step(tmp_path, capsys):
    path = tmp_path / "benchmarks.htm"
    path.write_text(page())
    assert baselines_curves.main([str(path), "--game", "Pong", "--algo", "a2c", "acktr",
                                  "--steps", "5000000", "10000000"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "| game | algo | 5,000,000 | 10,000,000 | table score |"
    assert lines[2] == "| Pong | a2c | -13.5 | 9.0 | 1.5 |"
    assert lines[3] == "| Pong | acktr | -1.0 | 19.0 | 0.5 |"


@pytest.mark.parametrize("argv, message", [
    (["--game", "Breakout"], "--game Breakout: not on the page; it has Pong"),
    (["--game", "Pong", "--algo", "ppo2"], "--algo ppo2: not on the page; it has acktr, a2c"),
])
def test_a_name_not_on_the_page_is_one_line(tmp_path, capsys, argv, message):
    path = tmp_path / "benchmarks.htm"
    path.write_text(page())
    with pytest.raises(SystemExit) as e:
        baselines_curves.main([str(path), *argv])
    assert e.value.code == 2
    assert capsys.readouterr().err == f"baselines_curves.py: error: {message}\n"


def test_not_a_benchmarks_page_is_one_line(tmp_path, capsys):
    for name, text in (("empty.htm", ""), ("other.htm", "<table><tr><td>x</td></tr></table>")):
        path = tmp_path / name
        path.write_text(text)
        with pytest.raises(SystemExit) as e:
            baselines_curves.main([str(path)])
        assert e.value.code == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and f"{path} is not a baselines benchmarks page" in err
    with pytest.raises(SystemExit):
        baselines_curves.main([str(tmp_path / "missing.htm")])
    assert "cannot read" in capsys.readouterr().err
