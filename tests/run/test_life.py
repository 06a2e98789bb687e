"""run/life.py: the named steps of a run after an update (when it saves and keeps copies, the
any-rank stop vote, the non-finite-loss stop), on stand-ins for what start builds."""
import dataclasses
import math
import os
import signal
import types

import pytest
import torch
import torch.nn as nn

from a2c_ppo_acktr.errors import program
from a2c_ppo_acktr.run.checkpoint import RunPaths, history_path
from a2c_ppo_acktr.run.interrupt import StopRequest
from a2c_ppo_acktr.run.life import Run
from a2c_ppo_acktr.settings.arguments import get_config

pytestmark = pytest.mark.research  # the research tier: what a change to the core needs

LOSSES = {"value_loss": 0.5, "action_loss": -0.1, "entropy": 0.6}
POLICY = nn.Linear(2, 1)  # what the gradient check reads


class Evaluations:
    def __init__(self):
        self.calls = []

    def evaluations(self, actor_critic, update, env_steps, wait=False):
        self.calls.append((actor_critic, update, env_steps, wait))
        return []


def make_run(tmp_path, updates=range(6), save_interval=4, save_history=None, ddp=None,
             eval_interval=None, lead=True):
    """A Run of ``updates`` x 8 steps whose checkpoints record (env steps, obs_rms)."""
    states = []
    collector = types.SimpleNamespace(obs_rms={"ob_rms": 1}, episode_returns=[1.0, 2.0],
                                      stats=lambda: {"timeouts": 0}, close=lambda: None)
    agent = types.SimpleNamespace(optimizer=types.SimpleNamespace(
        param_groups=[{"lr": 0.1}]))
    logger = types.SimpleNamespace(rows=[], close=lambda: None)
    logger.log = lambda row, step: logger.rows.append((row["update"], step))
    run = Run(RunPaths(str(tmp_path), str(tmp_path / "eval"), str(tmp_path / "a.pt")), lead,
              collector, POLICY, agent, [], updates, 8, Evaluations(),
              state=lambda steps, obs_rms: states.append((steps, obs_rms))
              or {"env_steps": torch.tensor(steps)},
              stop=StopRequest(), ddp=ddp,
              settings=dataclasses.replace(get_config([]).run, log_interval=2,
                                           save_interval=save_interval, save_history=save_history,
                                           eval_interval=eval_interval, compile=False),
              logs=[logger, None] if lead else [])
    return run, states, logger


def test_saves_every_interval_at_the_last_update_and_keeps_history_copies(tmp_path, capsys):
    run, states, logger = make_run(tmp_path, save_history=3)
    assert [run.after_update(j, LOSSES) for j in run.updates] == [None] * 6
    # update 0 and 4 (interval), 2 and 5 (every 3rd: a history copy), 5 (the last)
    assert states == [(s, {"ob_rms": 1}) for s in (8, 24, 40, 48)]
    assert sorted(os.listdir(tmp_path / "a_history")) == ["24.pt", "48.pt"]
    assert torch.load(history_path(str(tmp_path / "a.pt"), 24))["env_steps"] == 24
    assert run.saved_steps == 48 and logger.rows == [(0, 8), (2, 24), (4, 40), (5, 48)]
    assert run.done() == 0
    assert capsys.readouterr().out.endswith(f"done: 48 steps; checkpoint {tmp_path}/a.pt "
                                            "(48 steps)\n")


def test_a_stop_voted_by_another_rank_saves_and_stops_every_rank(tmp_path, capsys):
    votes = []

    def any_rank(flag):  # another rank had the signal: this one had none
        votes.append(flag)
        return True
    run, states, _ = make_run(tmp_path, updates=range(2, 10), ddp=types.SimpleNamespace(
        any=any_rank, close=lambda: None))
    assert run.after_update(2, LOSSES) == 128 + signal.SIGINT
    assert votes == [False] and states == [(24, {"ob_rms": 1})]
    assert capsys.readouterr().err == (f"interrupted at 24 steps; saved {tmp_path}/a.pt; "
                                       "--resume to continue\n")


def test_a_non_finite_loss_stops_before_saving_logging_or_voting(tmp_path, capsys):
    told = []  # under torchrun the other ranks are told (DDP.stopping), not asked to vote
    ddp = types.SimpleNamespace(any=lambda flag: (_ for _ in ()).throw(AssertionError("voted")),
                                stopping=lambda line, steps: told.append(line) or f"rank 0: {line}")
    run, states, logger = make_run(tmp_path, ddp=ddp)
    stats = {"value_loss": math.nan, "action_loss": 0.0, "entropy": 0.5, "gail_loss": 0.1}
    assert run.after_update(0, stats) == 1
    assert states == [] and logger.rows == [] and len(told) == 1
    assert capsys.readouterr().err == (
        f"{program()}: error: rank 0: non-finite loss at update 0 (value_loss nan, action_loss 0.0, "
        "entropy 0.5, gail_loss 0.1); stopped, nothing saved yet, so the run's files are "
        "removed: it can start again\n")
    run, _, _ = make_run(tmp_path)
    assert run.after_update(0, {**LOSSES, "my_loss": math.inf}) == 1  # any loss, by its name


def test_a_non_finite_statistic_that_is_no_loss_is_logged_as_it_is(tmp_path, capsys):
    """Explained variance on constant returns is NaN: a diagnostic, not a reason to stop."""
    run, states, logger = make_run(tmp_path, updates=range(1))
    logged = []
    logger.log = lambda row, step: logged.append(row)
    stats = {**LOSSES, "explained_variance": math.nan, "entropy": math.inf}
    assert run.after_update(0, stats) is None and run.done() == 0
    assert math.isnan(logged[0]["explained_variance"]) and logged[0]["entropy"] == math.inf
    assert states and "error" not in capsys.readouterr().err


def test_non_finite_gradients_stop_the_run_before_its_checkpoint_keeps_their_weights(tmp_path,
                                                                                      capsys):
    run, states, _ = make_run(tmp_path)
    POLICY.weight.grad = torch.tensor([[1.0, math.nan]])
    try:
        assert run.after_update(0, LOSSES) == 1
    finally:
        POLICY.weight.grad = None
    assert states == [] and capsys.readouterr().err == (
        f"{program()}: error: non-finite gradients at 8 steps; stopped, nothing saved yet, so "
        "the run's files are removed: it can start again\n")
    POLICY.weight.grad = torch.ones(1, 2)  # finite: saved as before
    try:
        assert run.after_update(0, LOSSES) is None and len(states) == 1
    finally:
        POLICY.weight.grad = None


def test_evaluations_are_asked_every_update_but_started_by_the_lead_when_due(tmp_path):
    run, _, _ = make_run(tmp_path, updates=range(3), eval_interval=2)
    for j in run.updates:
        run.after_update(j, LOSSES)
    assert run.evaluator.calls == [(POLICY, 0, 8, False), (None, 1, 16, False),
                                     (POLICY, 2, 24, True)]
    other, _, _ = make_run(tmp_path, updates=range(1), eval_interval=1, lead=False)
    other.after_update(0, LOSSES)
    assert other.evaluator.calls == [(None, 0, 8, True)]


def test_a_stop_writes_its_updates_rows_before_it_ends(tmp_path, capsys):
    """Issue #72: a stop during update 3 (not a logging one) or 4 (one) logs that update's row
    and waits for the evaluations under way, then saves and ends: a resumed run has no gap."""
    for stopped in (3, 4):
        run, states, logger = make_run(tmp_path, updates=range(2, 10), eval_interval=2)
        run.stop.signum = signal.SIGTERM
        assert run.after_update(stopped, LOSSES) == 128 + signal.SIGTERM
        steps = (stopped + 1) * 8
        assert states == [(steps, {"ob_rms": 1})] and logger.rows == [(stopped, steps)]
        assert run.evaluator.calls[-1][1:] == (stopped, steps, True)  # waited for
        assert capsys.readouterr().err.endswith(f"interrupted at {steps} steps; saved "
                                                f"{tmp_path}/a.pt; --resume to continue\n")
