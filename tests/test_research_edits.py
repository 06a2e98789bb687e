"""docs/design.md's "Where to make a change", kind by kind: each test makes one research edit the
documented way (in a test, a subclass or a registered id stands for the edited file) and trains
with it through ``main.main``: a flag, a logged statistic, a loss term, a network layer, an
optimizer, an intrinsic reward, an env wrapper. The reward model's exact resume is
tests/run/test_components.py's; the flag's checks, tests/settings/test_flags.py's."""
import csv
import dataclasses

import gymnasium as gym
import pytest
import torch
import torch.nn as nn

import main
from a2c_ppo_acktr import config, model
from a2c_ppo_acktr.algo import PPO
from a2c_ppo_acktr.config import AlgoConfig
from a2c_ppo_acktr.config.flag import NON_NEGATIVE, flag
from a2c_ppo_acktr.config.flag import PPO as FOR_PPO
from a2c_ppo_acktr.model import make_policy
from a2c_ppo_acktr.run import build
from a2c_ppo_acktr.run.checkpoint import load_checkpoint
from a2c_ppo_acktr.storage import RolloutStorage

pytestmark = [pytest.mark.slow, pytest.mark.research]  # runs of main.main

ARGV = ["--algo", "ppo", "--env-name", "CartPole-v1", "--num-processes", "4", "--num-steps", "32",
        "--num-mini-batch", "2", "--ppo-epoch", "2", "--use-gae", "--log-interval", "1",
        "--vec-env", "dummy", "--num-env-steps", "512"]


def train(tmp_path, *extra: str) -> tuple[list[dict], dict]:
    """A short CartPole run -> its progress.csv rows and its checkpoint."""
    argv = ARGV + list(extra) + ["--log-dir", str(tmp_path / "logs"),
                                 "--save-dir", str(tmp_path / "models")]
    assert main.main(argv) == 0
    with open(tmp_path / "logs" / "ppo" / "CartPole-v1_seed1" / "progress.csv") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 4  # every update logged
    return rows, load_checkpoint(str(tmp_path / "models" / "ppo" / "CartPole-v1_seed1.pt"))


def weights(ckpt: dict) -> torch.Tensor:
    return torch.cat([v.flatten() for v in ckpt["actor_critic"].values()])


@pytest.fixture(scope="module")
def plain(tmp_path_factory):
    """The same run without any edit: what each edit must differ from."""
    return train(tmp_path_factory.mktemp("plain"))


# A flag: its declaration in config/algo.py's AlgoConfig, its use in algo/ppo.py.
@dataclasses.dataclass(frozen=True)
class WithL2(AlgoConfig):
    l2_coef: float = flag(0.0, "PPO: weight of the parameters' squared norm in the loss "
                          "(default: 0)", takes=NON_NEGATIVE, algos=FOR_PPO)


class L2PPO(PPO):
    """A loss term (algo/ppo.py's ``PPO.loss``), its coefficient an ``__init__`` parameter."""

    def __init__(self, *args, l2_coef: float = 0.0, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.l2_coef = l2_coef

    def loss(self, b):
        loss, stats = super().loss(b)
        return loss + self.l2_coef * sum(p.pow(2).sum() for p in self.params), stats


def test_a_flag_is_its_declaration_and_its_use(monkeypatch, tmp_path, plain):
    monkeypatch.setitem(config.PARTS, "algo", WithL2)
    monkeypatch.setitem(build.AGENTS, "ppo", L2PPO)
    rows, ckpt = train(tmp_path, "--l2-coef", "0.5")
    assert ckpt["config"]["flags"]["l2_coef"] == 0.5  # saved with the run
    assert weights(ckpt).norm() < weights(plain[1]).norm()  # the term shrank the weights


def test_a_loss_term_in_ppo_loss(monkeypatch, tmp_path):
    class PreferLeft(PPO):
        """A behaviour-cloning term toward action 0 beside PPO's."""

        def loss(self, b):
            loss, stats = super().loss(b)
            left = self.actor_critic.evaluate_actions(
                b.obs, b.recurrent_hidden_states, b.masks, torch.zeros_like(b.actions))[1]
            return loss - left.mean(), stats
    monkeypatch.setitem(build.AGENTS, "ppo", PreferLeft)
    rows, ckpt = train(tmp_path, "--lr", "0.01")
    policy = make_policy(ckpt["obs_shape"], gym.spaces.Discrete(2), ckpt["policy_kwargs"])
    policy.load_state_dict(ckpt["actor_critic"])
    obs = torch.randn(256, 4) * 0.05  # states near the start of an episode
    with torch.no_grad():
        left = policy.evaluate_actions(obs, None, None, torch.zeros(256, 1, dtype=torch.long))[1]
    assert left.exp().mean() > 0.9  # the term moved the policy


def test_a_logged_statistic_is_a_key_of_update(monkeypatch, tmp_path, plain):
    class GradNorm(PPO):
        def update(self, rollouts: RolloutStorage) -> dict[str, float]:
            stats = super().update(rollouts)
            return {**stats, "weight_norm": torch.cat(
                [p.detach().flatten() for p in self.params]).norm().item()}
    monkeypatch.setitem(build.AGENTS, "ppo", GradNorm)
    rows, ckpt = train(tmp_path)
    assert all(float(row["weight_norm"]) > 0 for row in rows)  # a column, every row
    assert torch.equal(weights(ckpt), weights(plain[1]))  # logging changed nothing else


def test_a_network_layer_in_a_base(monkeypatch, tmp_path):
    class NormedMLPBase(model.MLPBase):
        def __init__(self, num_inputs, **kwargs) -> None:
            super().__init__(num_inputs, **kwargs)
            self.norm = nn.LayerNorm(num_inputs)

        def forward(self, inputs, rnn_hxs, masks):
            return super().forward(self.norm(inputs), rnn_hxs, masks)
    monkeypatch.setattr(model, "MLPBase", NormedMLPBase)
    rows, ckpt = train(tmp_path)
    norm = {k: v for k, v in ckpt["actor_critic"].items() if ".norm." in k}
    assert set(norm) == {"base.norm.weight", "base.norm.bias"}  # saved with the policy
    assert not torch.equal(norm["base.norm.weight"], torch.ones(4))  # and trained


def test_an_optimizer_is_any_torch_optim_one(monkeypatch, tmp_path, plain):
    class SGDPPO(PPO):
        def __init__(self, *args, **kwargs) -> None:
            super().__init__(*args, **kwargs)
            self.optimizer = torch.optim.SGD(self.params, lr=0.01, momentum=0.9)
    monkeypatch.setitem(build.AGENTS, "ppo", SGDPPO)
    rows, ckpt = train(tmp_path)
    assert not torch.equal(weights(ckpt), weights(plain[1]))
    saved = ckpt["agent"]["optimizer"]
    assert saved["param_groups"][0]["momentum"] == 0.9 and saved["state"]  # its state is kept
    assert float(rows[-1]["lr"]) == 0.01


# An intrinsic reward: its flag in config/models.py's ModelsConfig, its entry in build.REWARD_MODELS.
@dataclasses.dataclass(frozen=True)
class WithNovelty(config.ModelsConfig):
    novelty_coef: float = flag(0.0, "a count-based novelty bonus's weight (default: 0, none)",
                               takes=NON_NEGATIVE)


class Novelty:
    """Count-based bonus on the pole's angle, binned: ``coef`` / sqrt(visits)."""

    def __init__(self, coef: float) -> None:
        self.coef, self.counts = coef, torch.zeros(20)

    def __call__(self, rollouts: RolloutStorage, update: int) -> dict[str, float]:
        bins = ((rollouts.obs[1:, :, 2] + 0.21) / 0.42 * 20).long().clamp(0, 19)
        self.counts += torch.bincount(bins.flatten(), minlength=20)
        bonus = self.coef / self.counts[bins].sqrt()
        rollouts.rewards += bonus.unsqueeze(-1)
        return {"novelty": bonus.mean().item()}

    def state_dict(self) -> dict:
        return {"counts": self.counts.clone()}

    def load_state_dict(self, state: dict) -> None:
        self.counts = state["counts"].clone()


def novelty(cfg: config.Config, envs, device) -> Novelty | None:
    """The registry's entry: the model where its flag asks for one."""
    return Novelty(cfg.models.novelty_coef) if cfg.models.novelty_coef else None


def test_an_intrinsic_reward_is_one_entry_of_the_reward_models(monkeypatch, tmp_path):
    monkeypatch.setitem(config.PARTS, "models", WithNovelty)
    monkeypatch.setitem(build.REWARD_MODELS, "novelty", novelty)
    rows, ckpt = train(tmp_path / "plain")
    assert "novelty" not in rows[0] and "novelty" not in ckpt  # off by default: no model
    rows, ckpt = train(tmp_path / "on", "--novelty-coef", "0.1")
    assert all(float(row["novelty"]) > 0 for row in rows)
    assert ckpt["novelty"]["counts"].sum() == 4 * 32 * 4  # every step counted, and saved
    assert ckpt["config"]["flags"]["novelty_coef"] == 0.1


class FlippedReward(gym.RewardWrapper):
    def reward(self, reward):
        return -reward


def flipped_cartpole(**kwargs) -> gym.Env:
    """The entry point of a registered id: the env, wrapped."""
    return FlippedReward(gym.envs.classic_control.CartPoleEnv(**kwargs))


def test_an_env_wrapper_where_the_env_is_registered(tmp_path):
    # Where your env is registered (your module, named as module:EnvId); for every env of the
    # project: envs/single.py's make_env.
    gym.register("FlippedCartPole-v0", entry_point=f"{__name__}:flipped_cartpole",
                 max_episode_steps=500)
    try:
        argv = [a if a != "CartPole-v1" else "FlippedCartPole-v0" for a in ARGV]
        assert main.main(argv + ["--log-dir", str(tmp_path / "logs"), "--save-dir", ""]) == 0
    finally:
        gym.registry.pop("FlippedCartPole-v0")
    monitor = tmp_path / "logs" / "ppo" / "FlippedCartPole-v0_seed1" / "0.monitor.csv"
    returns = [float(line.split(",")[0]) for line in monitor.read_text().splitlines()[2:]]
    assert returns and all(r < 0 for r in returns)  # the monitor saw the wrapped rewards
