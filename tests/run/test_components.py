"""What a component holds is saved (run/build.py's run_components, run/checkpoint.py): a reward
model a researcher adds in the documented place (``build.REWARD_MODELS``) is called by the
loop, logs its statistics and keeps its state across --resume, exactly; checkpoints written
before the components (the agent's optimizer under "optimizer") still resume exactly."""
import csv
import os

import pytest
import torch
import torch.nn as nn

from a2c_ppo_acktr.algo.agent import RewardModel
from a2c_ppo_acktr.run import build
from a2c_ppo_acktr.run.checkpoint import load_checkpoint
from a2c_ppo_acktr.storage import RolloutStorage
from tests.run.test_resume import CARTPOLE, assert_same_run, train

pytestmark = [pytest.mark.slow, pytest.mark.research]  # runs of main.main


class RewardPredictor:
    """A toy intrinsic reward (as RND's, simpler): a linear model learns to predict the env's
    reward from the observation, and its error is a bonus added to the reward. Its state: the
    model, its optimizer and the running mean of the bonus."""

    def __init__(self, obs_dim: int, scale: float = 0.01) -> None:
        self.model = nn.Linear(obs_dim, 1)
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=1e-2)
        self.scale, self.mean, self.count = scale, torch.zeros(()), 0

    def __call__(self, rollouts: RolloutStorage, update: int) -> dict[str, float]:
        obs, rewards = rollouts.obs[:-1], rollouts.rewards
        error = (self.model(obs) - rewards).pow(2)
        loss = error.mean()
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        bonus = self.scale * error.detach()
        rollouts.rewards += bonus
        self.count += 1
        self.mean += (bonus.mean() - self.mean) / self.count
        return {"bonus_loss": loss.item(), "bonus_mean": self.mean.item()}

    def state_dict(self) -> dict:
        return {"model": self.model.state_dict(), "optimizer": self.optimizer.state_dict(),
                "mean": self.mean.clone(), "count": self.count}

    def load_state_dict(self, state_dict: dict) -> None:
        self.model.load_state_dict(state_dict["model"])
        self.optimizer.load_state_dict(state_dict["optimizer"])
        self.mean, self.count = state_dict["mean"].clone(), state_dict["count"]


@pytest.fixture
def with_bonus(monkeypatch):
    """The researcher's edit: one more entry in ``build.REWARD_MODELS``."""
    made = []

    def bonus(cfg, envs, device) -> RewardModel:
        made.append(RewardPredictor(envs.observation_space.shape[0]))
        return made[-1]
    monkeypatch.setitem(build.REWARD_MODELS, "bonus", bonus)
    return made


ARGV = CARTPOLE + ["--vec-env", "dummy"]


def columns(log_dir):
    with open(os.path.join(log_dir, "progress.csv")) as f:
        return next(csv.reader(f))


def test_a_reward_model_added_in_one_place_is_called_logged_and_resumed_exactly(tmp_path,
                                                                                  with_bonus):
    straight = train(tmp_path, "straight", ARGV, 256)
    assert with_bonus[-1].count == 4  # called once per update
    ckpt = load_checkpoint(straight.checkpoint)
    assert ckpt["bonus"]["count"] == 4 and ckpt["bonus"]["mean"] > 0
    assert {"bonus_loss", "bonus_mean", "value_loss", "approx_kl"} <= set(columns(straight.log_dir))
    train(tmp_path, "resumed", ARGV, 128)
    resumed = train(tmp_path, "resumed", ARGV, 256, resume=True)
    assert with_bonus[-1].count == 4  # the resumed run's took the saved state
    assert_same_run(straight, resumed, components=("agent", "bonus"))


def test_a_checkpoint_without_a_components_state_is_refused_in_one_line(tmp_path, capsys,
                                                                         monkeypatch):
    train(tmp_path, "run", ARGV, 64)
    monkeypatch.setitem(build.REWARD_MODELS, "bonus", lambda cfg, envs, device: RewardPredictor(4))
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_:
        train(tmp_path, "run", ARGV, 128, resume=True)
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and len(err.splitlines()) == 1
    assert err.endswith("--resume: " + str(tmp_path / "run" / "models" / "ppo" /
                                          "CartPole-v1_seed1.pt")
                        + " was trained without 'bonus' (it holds no state of it)\n")


@pytest.mark.parametrize("algo", [["--algo", "ppo"], ["--algo", "a2c"]], ids=["ppo", "a2c"])
def test_a_checkpoint_from_before_the_components_resumes_exactly(tmp_path, algo):
    """Before, the agent's optimizer was the checkpoint's "optimizer" (and GAIL's discriminator
    its "gail", which is the GAIL reward model's name and state now)."""
    argv = ARGV + algo
    straight = train(tmp_path, "straight", argv, 256)
    paths = train(tmp_path, "resumed", argv, 128)
    ckpt = load_checkpoint(paths.checkpoint)
    ckpt["optimizer"] = ckpt.pop("agent")["optimizer"]
    torch.save(ckpt, paths.checkpoint)
    resumed = train(tmp_path, "resumed", argv, 256, resume=True)
    assert "optimizer" not in load_checkpoint(resumed.checkpoint)
    assert_same_run(straight, resumed)
