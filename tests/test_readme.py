"""Every command the README shows runs as written, cut short, so that the docs cannot drift.

The commands of the fenced ``bash`` blocks run one after another in one fresh directory, as a
user going through the README would run them (later commands use what earlier ones made: an
expert file, a checkpoint to resume or watch, logs to plot); the set-up command runs for seeds
1-3, so that those read a log dir of three seeds. The only changes: training runs are
cut to one update (``--num-env-steps``; each resume of a run, one more), and main.py's default
``--log-dir /tmp/gym`` becomes one inside that directory. A command followed by a comment line
``# main.py: error: ...`` must fail with exit status 2 and that line on stderr, with no traceback.

The commands that are slow even at one update (MuJoCo video, Atari, Ray, torchrun) run in a
second chain, marked ``slow``, in a directory of their own, so that under ``pytest -n 2`` the two
chains run side by side; the slow chain's commands depend on nothing the fast chain makes.
"""
import os
import re
import shlex
import subprocess
import sys
import time

import pytest

from a2c_ppo_acktr.settings import recipes
from a2c_ppo_acktr.settings.config_file import read_flags

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ENTRY_POINTS = ("main.py", "enjoy.py", "gail_experts", "scripts")
# Not run here, with the reason: what they need is not on a test machine or would take minutes.
SKIP = {"ray start": "starts a Ray cluster node", "--ray-address": "joins a Ray cluster",
        "pytest": "the test suite itself", "scripts/bench/": "benchmarks take minutes",
        "convert_to_pytorch": "needs openai/imitation's h5 file, which is not in the repository"}
# Slow even at one update; they run in the slow chain. Each command that reads what an earlier
# one made must land in the same chain as it.
SLOW = ("HalfCheetah", "Walker2d", "Hopper", "Ant-v5", "Humanoid", "Pong", "--num-workers", "torchrun",
        "logs/ppo-cartpole-ddp")
# More than one update: the set-up command's policy is the GAIL expert, and GAIL subsamples every
# 20th step of its episodes, so they must last longer than a one-update policy's (~10 steps).
UPDATES = {"logs/ppo-cartpole": 20, "logs/history": 10}  # --save-history 10: one copy
# Run again with these --seed values, as a user checking the set-up command's seeds 1-3 does: the
# later commands then read a log dir and a save dir of three seeds.
SEEDS = {"logs/ppo-cartpole": (2, 3)}
RAY = ("--num-workers", "logs/ppo-cartpole-ray")


def readme_blocks(path=os.path.join(ROOT, "README.md")):
    """-> [(line number, [(argv, expected error or None), ...])] for each ``bash`` block."""
    blocks, block, start, pending = [], None, 0, ""
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.rstrip("\n")
            if block is None:
                if line.strip() == "```bash":
                    block, start = [], n
                continue
            if line.strip() == "```":
                blocks.append((start, block))
                block = None
                continue
            expected = re.match(r"\s*#\s*(main\.py: error: .*)", line)
            if expected and block:
                block[-1] = (block[-1][0], expected.group(1).rstrip(". "))
                continue
            if line.lstrip().startswith("#"):
                continue
            pending += line.rstrip("\\") + " "
            if line.endswith("\\"):
                continue
            command, pending = pending.split(" && ")[-1].strip(), ""
            try:
                argv = shlex.split(command, comments=True)
            except ValueError:  # an apostrophe in a placeholder, as in <this node's ip>
                argv = command.split()
            if argv:
                block.append((argv, None))
    return [(start, cmds) for start, cmds in blocks
            if any(_runnable(argv) for argv, _ in cmds)]


def _runnable(argv):
    words = " ".join(argv)
    if any(key in words for key in SKIP):
        return False
    env_free = [a for a in argv if not re.match(r"^[A-Z_]+=", a)]
    if env_free[:1] == ["torchrun"]:
        return True
    return env_free[:1] in (["python"], ["python3"]) and len(env_free) > 1 and \
        (env_free[1].startswith(ENTRY_POINTS) or env_free[1] == "-m" and len(env_free) > 2
         and env_free[2].startswith("a2c_ppo_acktr."))  # python -m a2c_ppo_acktr.deploy.export


def _flag(argv, name, default, cwd="."):
    """An integer flag's value in ``argv``, else its ``--config`` file's (a path from ``cwd``),
    else its ``--recipe``'s, else ``default``."""
    if name in argv:
        return int(float(argv[argv.index(name) + 1]))
    if "--config" in argv:
        flags = read_flags(os.path.join(cwd, argv[argv.index("--config") + 1]), "--config")
        if name[2:].replace("-", "_") in flags:
            return flags[name[2:].replace("-", "_")]
    if "--recipe" in argv:
        values = recipes.settings(argv[argv.index("--env-name") + 1],
                                  argv[argv.index("--recipe") + 1])
        return values.get(name[2:].replace("-", "_"), default)
    return default


def _resumes_a_path(argv):
    """``--resume RUN``: the run's own directories, from its saved flags."""
    at = argv.index("--resume") if "--resume" in argv else None
    return at is not None and at + 1 < len(argv) and not argv[at + 1].startswith("--")


def _set(argv, name, value):
    if name in argv:
        argv[argv.index(name) + 1] = str(value)
    else:
        argv += [name, str(value)]


def shorten(argv, sandbox, resumed=0):
    """The same command cut to one update (main.py), or to ``resumed`` + 1 updates for the
    ``resumed``-th resume of a run, with its env variables apart."""
    env = dict(a.split("=", 1) for a in argv if re.match(r"^[A-Z_]+=", a))
    argv = [a for a in argv if not re.match(r"^[A-Z_]+=", a)]
    if argv[0].startswith("python"):
        argv[0] = sys.executable
    elif argv[0] == "torchrun":  # the one installed beside this Python
        argv[0] = os.path.join(os.path.dirname(sys.executable), "torchrun")
        env.setdefault("TMPDIR", sandbox)  # its log directory: in the test's, not in /tmp
    script = next((a for a in argv if a.endswith(".py")), "")  # "": python -m <module>
    if script == "main.py":
        ranks = _flag(argv, "--nproc_per_node", 1, sandbox)
        updates = UPDATES.get(argv[argv.index("--log-dir") + 1], 1) if "--log-dir" in argv else 1
        updates += resumed
        one_update = (_flag(argv, "--num-processes", 16, sandbox)
                      * _flag(argv, "--num-steps", 5, sandbox)
                      * max(_flag(argv, "--num-workers", 0, sandbox), 1) * ranks)
        _set(argv, "--num-env-steps", updates * one_update)
        if "--log-dir" not in argv and not _resumes_a_path(argv):
            argv += ["--log-dir", os.path.join(sandbox, "gym")]
    elif script.endswith("benchmark.py"):
        _set(argv, "--num-env-steps", 4096)
    elif script.endswith("peers.py"):  # one rollout of the zoo's 8 envs x 32 steps
        _set(argv, "--num-env-steps", 256)
        _set(argv, "--eval-every", 256)
    elif script.endswith("tune.py"):  # one trial of one seed, its run one update long
        cut = argv.index("--") if "--" in argv else len(argv)
        head, tail = argv[:cut], argv[cut:] or ["--"]
        if "--seeds" in head:
            at = end = head.index("--seeds")
            while end + 1 < len(head) and not head[end + 1].startswith("--"):
                end += 1
            head[at:end + 1] = ["--seeds", "1"]
        _set(head, "--n-trials", 1)
        _set(tail, "--num-env-steps", _flag(argv, "--num-processes", 16, sandbox)
             * _flag(argv, "--num-steps", 5, sandbox))
        argv = head + tail
    return argv, env


def _slow(argv):
    return any(key in " ".join(argv) for key in SLOW)


def _needs_missing_ray(argv):
    """Commands that need Ray, or the logs of a Ray run, where Ray is not installed."""
    try:
        import ray  # noqa: F401
    except ImportError:
        return any(key in " ".join(argv) for key in RAY)
    return False


def run_chain(tmp_path, slow):
    """Run the README's commands of one chain in order in ``tmp_path``; -> [(seconds, command)]."""
    for name in ENTRY_POINTS:
        if name == "gail_experts":  # generate.py writes its expert file here: not into the repo
            (tmp_path / name).mkdir()
            for f in os.listdir(os.path.join(ROOT, name)):
                if f.endswith(".py"):
                    os.symlink(os.path.join(ROOT, name, f), tmp_path / name / f)
        else:
            os.symlink(os.path.join(ROOT, name), tmp_path / name)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MUJOCO_GL": os.environ.get("MUJOCO_GL", "egl")}
    env.pop("DISPLAY", None)  # enjoy.py's windows: none on a test machine
    # this checkout's package, in worker processes too (not another one installed editable)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH")]))
    times, resumed = [], 0
    for start, commands in readme_blocks():
        for argv, expected in commands:
            if not _runnable(argv) or _slow(argv) != slow or _needs_missing_ray(argv):
                continue
            resumed += "--resume" in argv  # each resume of a run trains one update more
            log_dir = argv[argv.index("--log-dir") + 1] if "--log-dir" in argv else None
            for seed in [None, *SEEDS.get(log_dir, ())]:
                seeded = argv + ["--seed", str(seed)] if seed else argv
                cmd, extra_env = shorten(list(seeded), str(tmp_path),
                                         resumed if "--resume" in argv else 0)
                began = time.perf_counter()
                proc = subprocess.run(cmd, cwd=tmp_path, env={**env, **extra_env},
                                      capture_output=True, text=True, timeout=600)
                times.append((time.perf_counter() - began, shlex.join(seeded)[:100]))
                shown = f"README block at line {start}: {shlex.join(seeded)}\n{proc.stderr[-3000:]}"
                if expected is None:
                    assert proc.returncode == 0, shown
                else:
                    assert proc.returncode == 2, shown
                    assert proc.stderr.strip().startswith(expected), shown
                    assert "Traceback" not in proc.stderr, shown
    for seconds, command in times:
        print(f"{seconds:6.1f} s  {command}")
    return times


@pytest.mark.slow
def test_readme_commands_run_in_order(tmp_path):
    assert run_chain(tmp_path, slow=False)


@pytest.mark.slow
def test_readme_slow_commands_run_in_order(tmp_path):
    assert run_chain(tmp_path, slow=True)


def test_the_parser_finds_the_set_up_command():
    blocks = readme_blocks()
    first = blocks[0][1][0][0]
    assert first[:3] == ["python", "main.py", "--algo"], first


def test_no_readme_run_logs_to_the_shared_default():
    """main.py's default --log-dir /tmp/gym (the original's) is shared by every run on a machine:
    each training command of the README names its own (a resume has the run's)."""
    shared = [" ".join(argv) for _, commands in readme_blocks() for argv, expected in commands
              if "main.py" in argv and expected is None and "--log-dir" not in argv
              and "--resume" not in argv and "--help" not in argv]
    assert not shared, shared


def heading_anchors(text: str) -> set[str]:
    """The anchors GitHub gives a Markdown page's headings: lower case, punctuation dropped,
    spaces to hyphens, "-1", "-2" ... on repeats; headings inside code fences do not count."""
    anchors, seen, fenced = set(), {}, False
    for line in text.splitlines():
        fenced ^= line.startswith("```")
        heading = None if fenced else re.match(r"#{1,6}\s+(.*)", line)
        if heading:
            slug = re.sub(r"[^\w\- ]", "", heading.group(1).strip().lower()).replace(" ", "-")
            anchors.add(f"{slug}-{seen[slug]}" if slug in seen else slug)
            seen[slug] = seen.get(slug, 0) + 1
    return anchors


def test_relative_links_of_readme_and_docs_exist():
    """Every relative link and image in README.md and docs/*.md names a file that is there, and
    a heading of it where the link names one (``page.md#anchor``, ``#anchor``)."""
    pages = [os.path.join(ROOT, "README.md")] + sorted(
        os.path.join(ROOT, "docs", f) for f in os.listdir(os.path.join(ROOT, "docs"))
        if f.endswith(".md"))
    missing = []
    for page in pages:
        with open(page) as f:
            text = f.read()
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            path, _, anchor = target.partition("#")
            if re.match(r"[a-z]+:", path):  # a URL
                continue
            dest = os.path.join(os.path.dirname(page), path) if path else page
            if not os.path.exists(dest):
                missing.append(f"{os.path.relpath(page, ROOT)}: {target}")
            elif anchor and dest.endswith(".md"):
                with open(dest) as f:
                    if anchor not in heading_anchors(f.read()):
                        missing.append(f"{os.path.relpath(page, ROOT)}: {target} (no such heading)")
    assert not missing, missing
