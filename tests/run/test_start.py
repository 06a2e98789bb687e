"""run/start.py: opening a run for the loop: the speed seam applied once, on the learner's policy
and agent, and said among the run's first lines with how to turn it off; a run closed before
its first checkpoint is undone. (Its one-line endings through main.main: tests/test_main.py,
tests/run/test_cli.py, tests/run/test_signals.py, tests/run/test_limits.py.)"""
import copy
import os

import pytest
import torch
import torch.nn as nn

from a2c_ppo_acktr import speed
from a2c_ppo_acktr.rollout import Collector
from a2c_ppo_acktr.run.start import open_run
from a2c_ppo_acktr.settings.arguments import get_config

pytestmark = [pytest.mark.usefixtures("one_thread"), pytest.mark.research]


@pytest.mark.parametrize("mechanisms, switch", [(speed.MECHANISMS, None), ((), "none")],
                         ids=["on", "off"])
def test_the_speed_seam_is_applied_once_as_the_run_opens_and_said(tmp_path, monkeypatch, capsys,
                                                                   mechanisms, switch):
    monkeypatch.setattr(speed, "ENABLED", set(mechanisms))
    if switch is None:
        monkeypatch.delenv(speed.SWITCH, raising=False)
    else:
        monkeypatch.setenv(speed.SWITCH, switch)
    built = []
    speed_up = speed.speed_up

    def recorded(policy, agent=None, **kwargs):
        built.append(copy.deepcopy(policy))  # as the plain core built it
        return speed_up(policy, agent, **kwargs)
    monkeypatch.setattr(speed, "speed_up", recorded)
    cfg = get_config(["--algo", "a2c", "--env-name", "CartPole-v1", "--num-processes", "2",
                      "--num-steps", "4", "--vec-env", "dummy", "--log-dir", str(tmp_path / "logs"),
                      "--save-dir", str(tmp_path / "models")])
    with open_run(cfg) as run:
        policy, agent = run.actor_critic, run.agent
        assert type(run.collector) is Collector and len(built) == 1  # once
        on = bool(mechanisms)
        assert ("step" in vars(agent.optimizer)) is on
        assert (type(policy.base.actor[0]) is not nn.Linear) is on
        assert all(torch.equal(p, q) for p, q in zip(policy.parameters(), built[0].parameters()))
    lines = capsys.readouterr().out.splitlines()
    said = [line for line in lines[:4] if line.startswith("speed seam: ")]  # a first line
    assert said == [
        "speed seam: optim, flat, layers (the same numbers, faster; A2C_PPO_ACKTR_SPEED=none turns "
        "it off, =NAME,... keeps some; docs/design.md)" if on else
        "speed seam: off (A2C_PPO_ACKTR_SPEED=none; the core runs as written)"], lines
    assert not os.path.exists(tmp_path / "logs" / "a2c")  # closed before a checkpoint: undone
