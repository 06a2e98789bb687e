"""The reading path from ``python main.py`` to ``optimizer.step()`` stays within issue #83's budget
(at most 9 files, 2,000 lines), counted from the command line, and reads plain: no speed
mechanism written into it (those are applied from speed/).

How it is counted: ``main.main`` runs PPO on CartPole from the command line for one update, under
a profiler that stops at the calls a reader follows to see the algorithm (``LANDMARKS``): the
policy and the agent built (``Policy.__init__``, the agent's optimizer made), the learning rate
set, the rollout collected (``Policy.act``, an action drawn from its distribution,
``RolloutStorage.insert``), ``compute_returns``, and the update up to the optimizer's first
``step`` (the loss, the gradients' clip). At each, the files of the package (and main.py) with a
frame on the call stack are the files a reader opens to get there from ``main()``; the reading
path is their union, each file counted whole. What is on no such stack is not on the path: where
a flag's value comes from (the parser, the checks), the env stack behind ``envs.step``, the run's
logs and checkpoints (after the update). The speed seam is off (``A2C_PPO_ACKTR_SPEED=none``): it
is applied from outside the path and the run's first lines say what it changes. Nothing here
reads docs/design.md: a document's figures are never pinned.
"""
import sys
from pathlib import Path
from types import FrameType

import pytest

import main
from a2c_ppo_acktr import distributions, speed
from a2c_ppo_acktr.algo import PPO
from a2c_ppo_acktr.algo.agent import BaseAgent
from a2c_ppo_acktr.model import Policy
from a2c_ppo_acktr.storage import RolloutStorage

pytestmark = [pytest.mark.slow, pytest.mark.research]  # a run of main.main

ROOT = Path(__file__).resolve().parents[1]
MAX_FILES, MAX_LINES = 9, 2000
COMMAND = ["--algo", "ppo", "--env-name", "CartPole-v1", "--num-env-steps", "80",
           "--vec-env", "dummy"]
# The package's functions a reader follows into; torch's modules the algorithm calls.
LANDMARKS = {f.__code__ for f in (
    Policy.__init__, Policy.act, RolloutStorage.insert, RolloutStorage.compute_returns, PPO.loss,
    BaseAgent.adjust_lr, BaseAgent.clip_grad_norm)} | {
    cls.sample.__code__ for cls in vars(distributions).values()  # an action drawn
    if isinstance(cls, type) and "sample" in vars(cls)}
TORCH_CALLS = ("/torch/optim/", "/torch/distributions/")
# Where torch's Adam and RMSprop step the parameters, however ``step`` was called (speed/optim.py
# calls torch's functional API, past ``Optimizer.step``).
STEPS = ("_single_tensor_adam", "_multi_tensor_adam", "_fused_adam", "_single_tensor_rmsprop",
         "_multi_tensor_rmsprop")


def ours(filename: str) -> bool:
    return filename == str(ROOT / "main.py") or filename.startswith(str(ROOT / "a2c_ppo_acktr"))


def reading_path(tmp_path, monkeypatch) -> dict[str, int]:
    """The files on the call stacks at the landmarks of ``python main.py COMMAND``, up to the
    optimizer's first step -> their lines, by path."""
    seen: set[str] = set()
    stepped = []

    def profile(frame: FrameType, event: str, arg) -> None:
        if event != "call" or stepped:
            return
        code, caller = frame.f_code, frame.f_back
        into_torch = (any(part in code.co_filename for part in TORCH_CALLS)
                      and caller is not None and ours(caller.f_code.co_filename))
        step = code.co_name in STEPS and "/torch/optim/" in code.co_filename
        if code not in LANDMARKS and not into_torch and not step:
            return
        stack: FrameType | None = frame
        while stack is not None:
            if ours(stack.f_code.co_filename):
                seen.add(stack.f_code.co_filename)
            stack = stack.f_back
        if step:
            stepped.append(code.co_name)  # the optimizer's first step: the end of the path

    argv = COMMAND + ["--log-dir", str(tmp_path / "logs"), "--save-dir", str(tmp_path / "m")]
    monkeypatch.setattr(speed, "ENABLED", set())
    sys.setprofile(profile)
    try:
        assert main.main(argv) == 0
    finally:
        sys.setprofile(None)
    assert stepped
    return {Path(f).relative_to(ROOT).as_posix(): len(Path(f).read_text().splitlines())
            for f in sorted(seen)}


def test_the_reading_path_from_the_command_line_is_at_most_9_files_and_2000_lines(tmp_path,
                                                                                   monkeypatch):
    lines = reading_path(tmp_path, monkeypatch)
    assert {"main.py", "a2c_ppo_acktr/algo/ppo.py", "a2c_ppo_acktr/model.py",
            "a2c_ppo_acktr/storage.py", "a2c_ppo_acktr/rollout.py", "a2c_ppo_acktr/distributions.py",
            "a2c_ppo_acktr/algo/agent.py"} <= set(lines), lines
    print(f"reading path: {len(lines)} files, {sum(lines.values()):,} lines: {lines}")
    assert len(lines) <= MAX_FILES and sum(lines.values()) <= MAX_LINES, lines
    for name in lines:  # what the speed seam applies is not written into it (issue #71 item 3)
        text = (ROOT / name).read_text()
        for mechanism in ("FlatParams", "layers import", "algo.optim", ".numpy()", "_foreach_"):
            assert mechanism not in text, (name, mechanism)
