#!/usr/bin/env python
"""Read OpenAI baselines' published Atari learning curves at given env steps.

baselines' ``benchmarks_atari10M.htm`` (github.com/openai/baselines, at the top of the
repository) holds a table of 7 algorithms x 7 games, each row with its colour swatch, and one
matplotlib SVG per game with their learning curves over 10M env steps ("reward, avg. over 6
runs") drawn in those colours.

    python scripts/notes/baselines_curves.py benchmarks_atari10M.htm --game Breakout Pong \
        --algo acktr a2c ppo2 --steps 500000 1000000 2000000 5000000 10000000

prints each curve's reward at the plotted point nearest each step (points every ~100k steps).
"""
from __future__ import annotations

import argparse
import html
import re
import sys

# One tick: where its grid line starts (x, y) and its label (matplotlib writes a minus as U+2212).
_TICK = re.compile(r'<g id="([xy])tick_\d+">.*?<path[^>]*d="M ([\d.]+) ([\d.]+)\s.*?'
                   r'<text[^>]*>([^<]+)</text>', re.S)
_PATH = re.compile(r"<path\b[^>]*>")
_ATTR = {"d": re.compile(r'\bd="(M [^"]*)"'), "stroke": re.compile(r"stroke:\s*#([0-9a-f]{6})")}
_POINT = re.compile(r"[ML] (-?[\d.]+) (-?[\d.]+)")


def fail(message: str) -> None:
    print(f"baselines_curves.py: error: {message}", file=sys.stderr)
    raise SystemExit(2)


def _text(cell: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", " ", cell)).strip()


def table(page: str) -> tuple[dict[str, str], dict[str, dict[str, float]]]:
    """({curve colour "rrggbb": algo}, {algo: {game: score}}) from the page's score table."""
    rows = [re.findall(r"<t[dh][^>]*>(.*?)</t[dh]>", r, re.S)
            for r in re.findall(r"<tr>(.*?)</tr>", page, re.S)]
    header = [_text(c) for c in rows[0]]
    games = header[header.index("mean") + 1:header.index("commit")]
    first = header.index("mean") + 1
    colours, scores = {}, {}
    for row in rows[1:]:
        algo = _text(row[0])
        rgb = re.search(r"rgba?\((\d+),\s*(\d+),\s*(\d+)", row[1])
        if rgb is None:
            raise ValueError(f"row {algo} has no colour swatch")
        colours["".join(f"{int(v):02x}" for v in rgb.groups())] = algo
        scores[algo] = {g: float(_text(c)) for g, c in zip(games, row[first:])}
    return colours, scores


def curves(svg: str, colours: dict[str, str]) -> dict[str, list[tuple[float, float]]]:
    """{algo: [(env steps, reward), ...]} from one game's SVG, each curve's algorithm by its
    colour, its coordinates mapped through the axes' tick marks (the first and last of each)."""
    ticks: dict[str, list[tuple[float, float]]] = {"x": [], "y": []}
    for axis, x, y, label in _TICK.findall(svg):
        ticks[axis].append((float(x) if axis == "x" else float(y),
                            float(html.unescape(label).replace("\u2212", "-"))))
    offset = re.search(r">1e(\d+)</text>", svg)  # the x labels' unit, matplotlib's offset text
    scale = {}
    for axis, factor in (("x", 10.0 ** int(offset.group(1)) if offset else 1.0), ("y", 1.0)):
        (p0, v0), (p1, v1) = ticks[axis][0], ticks[axis][-1]
        scale[axis] = (p0, v0 * factor, (v1 - v0) * factor / (p1 - p0))
    (x0, xv, xs), (y0, yv, ys) = scale["x"], scale["y"]
    out = {}
    for tag in _PATH.findall(svg):  # the curves: clipped to the axes, in a table row's colour
        d, stroke = (a.search(tag) for a in _ATTR.values())
        if "clip-path" in tag and d and stroke and stroke.group(1) in colours:
            out[colours[stroke.group(1)]] = [(xv + (float(px) - x0) * xs, yv + (float(py) - y0) * ys)
                                             for px, py in _POINT.findall(d.group(1))]
    return out


def read(page: str) -> tuple[dict[str, dict[str, float]], dict[str, dict[str, list]]]:
    """(the table's scores, {game: {algo: curve}}) of a benchmarks page."""
    colours, scores = table(page)
    games = {}
    for svg in re.findall(r"<svg.*?</svg>", page, re.S):
        titles = re.findall(r">([A-Za-z]+)</text>", svg)
        if titles:
            games[titles[-1]] = curves(svg, colours)
    return scores, games


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("page", help="baselines' benchmarks_atari10M.htm")
    parser.add_argument("--game", nargs="+", default=["Breakout", "Pong"])
    parser.add_argument("--algo", nargs="+", default=["acktr", "a2c", "ppo2"])
    parser.add_argument("--steps", nargs="+", type=int,
                        default=[250_000, 500_000, 1_000_000, 2_000_000, 5_000_000, 10_000_000])
    args = parser.parse_args(argv)
    try:
        with open(args.page, encoding="utf-8") as f:
            scores, games = read(f.read())
    except OSError as e:
        fail(f"cannot read {args.page}: {e.strerror}")
    except (ValueError, IndexError):
        fail(f"{args.page} is not a baselines benchmarks page (no score table or curves)")
    for game in args.game:
        if game not in games:
            fail(f"--game {game}: not on the page; it has {', '.join(sorted(games))}")
    for algo in args.algo:
        if algo not in scores:
            fail(f"--algo {algo}: not on the page; it has {', '.join(scores)}")
    print("| game | algo | " + " | ".join(f"{s:,}" for s in args.steps) + " | table score |")
    print("|---|---|" + "---|" * (len(args.steps) + 1))
    for game in args.game:
        for algo in args.algo:
            curve = games[game][algo]
            at = [min(curve, key=lambda p: abs(p[0] - s))[1] for s in args.steps]
            print(f"| {game} | {algo} | " + " | ".join(f"{r:.1f}" for r in at)
                  + f" | {scores[algo][game]:g} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
