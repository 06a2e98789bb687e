"""PPO.update on synthetic rollouts: it moves the policy toward advantageous actions."""
import copy

import pytest
import torch
from gymnasium import spaces

from a2c_ppo_acktr.algo import PPO
from a2c_ppo_acktr.model import Policy
from a2c_ppo_acktr.storage import RolloutStorage

T, N = 16, 4


def bandit_rollout(policy, reward_of_action):
    """Fill a storage by acting on random observations; reward depends on the action only."""
    r = RolloutStorage(T, N, (3,), spaces.Discrete(2), policy.recurrent_hidden_state_size)
    r.obs.normal_()
    with torch.no_grad():
        for t in range(T):
            value, action, log_prob, hxs = policy.act(
                r.obs[t], r.recurrent_hidden_states[t], r.masks[t])
            reward = reward_of_action[action.squeeze(1)]
            masks = torch.zeros(N, 1)  # one-step episodes
            r.insert(r.obs[t + 1], hxs, action, log_prob, value, reward, masks, torch.ones(N, 1))
        r.compute_returns(torch.zeros(N, 1), True, 0.99, 0.95)
    return r


def prob_of_action_0(policy, obs):
    with torch.no_grad():
        _, log_prob, _, _ = policy.evaluate_actions(
            obs, torch.zeros(len(obs), policy.recurrent_hidden_state_size),
            torch.ones(len(obs), 1), torch.zeros(len(obs), 1, dtype=torch.long))
    return log_prob.exp().mean().item()


@pytest.mark.parametrize("recurrent", [False, True])
def test_ppo_update_prefers_rewarded_action(recurrent):
    torch.manual_seed(0)
    policy = Policy((3,), spaces.Discrete(2), base_kwargs={"recurrent": recurrent, "hidden_size": 16})
    agent = PPO(policy, clip_param=0.2, ppo_epoch=4, num_mini_batch=2, value_loss_coef=0.5,
                entropy_coef=0.0, lr=3e-3, eps=1e-5, max_grad_norm=0.5)
    probe = torch.randn(64, 3)
    before = prob_of_action_0(policy, probe)
    for _ in range(5):
        rollouts = bandit_rollout(policy, torch.tensor([[1.0], [0.0]]))
        stats = agent.update(rollouts)
    assert prob_of_action_0(policy, probe) > before + 0.1
    for x in stats.values():
        assert isinstance(x, float) and torch.isfinite(torch.tensor(x))
    assert stats["approx_kl"] >= 0 and 0 <= stats["clip_fraction"] <= 1


@pytest.mark.research
def test_ppo_clip_fraction_rises_with_large_steps():
    torch.manual_seed(0)
    policy = Policy((3,), spaces.Discrete(2), base_kwargs={"hidden_size": 16})
    rollouts = bandit_rollout(policy, torch.tensor([[1.0], [-1.0]]))
    gentle = PPO(policy, 0.2, 1, 1, 0.5, 0.0, lr=1e-6, eps=1e-5, max_grad_norm=0.5)
    assert gentle.update(rollouts)["clip_fraction"] == 0.0  # first pass: ratio == 1 everywhere
    greedy = PPO(policy, 0.2, 20, 1, 0.5, 0.0, lr=5e-2, eps=1e-5, max_grad_norm=10.0)
    stats = greedy.update(rollouts)
    assert stats["clip_fraction"] > 0.0 and stats["approx_kl"] > 0.0


@pytest.mark.research
@pytest.mark.parametrize("norm", ["batch", "minibatch", "none"])
def test_advantage_norm_matches_reference(norm):
    """At ratio 1 (lr 0) d(action loss)/d(log prob) of a sample is -A/M, A its advantage as used."""
    torch.manual_seed(0)
    policy = Policy((3,), spaces.Discrete(2), base_kwargs={"hidden_size": 8})
    rollouts = bandit_rollout(policy, torch.tensor([[1.0], [-1.0]]))
    raw = (rollouts.returns[:-1] - rollouts.value_preds[:-1]).reshape(-1)
    raw = raw + torch.arange(T * N) * 0.1  # minibatches with different means and spreads
    rollouts.returns[:-1] = (raw.view(T, N, 1) + rollouts.value_preds[:-1])
    obs_rows = rollouts.obs[:-1].reshape(T * N, -1)
    agent = PPO(policy, 0.2, 1, 4, 0.0, 0.0, lr=1e-30, eps=1e-5, max_grad_norm=1e9,
                advantage_norm=norm)
    used, evaluate = [], policy.evaluate_actions

    def spy(obs, hxs, masks, actions):
        values, log_probs, entropy, hxs = evaluate(obs, hxs, masks, actions)
        rows = [int((obs_rows == o).all(1).nonzero()[0]) for o in obs]
        log_probs.register_hook(lambda g: used.append((rows, -g.view(-1) * len(rows))))
        return values, log_probs, entropy, hxs

    policy.evaluate_actions = spy
    agent.update(rollouts)
    assert len(used) == 4
    standardized = (raw - raw.mean()) / (raw.std() + 1e-5)
    for rows, adv in used:
        mb = raw[rows]
        expected = {"batch": standardized[rows], "none": mb,
                    "minibatch": (mb - mb.mean()) / (mb.std() + 1e-5)}[norm]
        torch.testing.assert_close(adv, expected, atol=1e-5, rtol=1e-5)
    with pytest.raises(ValueError, match="advantage_norm"):
        PPO(policy, 0.2, 1, 4, 0.5, 0.0, lr=1e-3, advantage_norm="global")


@pytest.mark.research
def test_recompute_advantages_between_epochs():
    """recompute_advantages: each epoch after the first gets advantages from the values of the
    weights as they are then (checked against a storage copy recomputed by hand); one epoch, or
    the option off, gives the update the original does."""
    torch.manual_seed(0)
    policy = Policy((3,), spaces.Discrete(2), base_kwargs={"hidden_size": 8})
    rollouts = bandit_rollout(policy, torch.tensor([[1.0], [-1.0]]))
    rollouts.compute_returns(torch.zeros(N, 1), True, 0.9, 0.8)  # settings to recompute with
    start = copy.deepcopy(policy.state_dict())
    agent = PPO(policy, 0.2, 3, 2, 0.5, 0.0, lr=1e-2, eps=1e-5, max_grad_norm=0.5,
                recompute_advantages=True)
    seen, generator = [], rollouts.feed_forward_generator

    def spy(advantages, num_mini_batch):
        fresh = copy.deepcopy(first)  # the first epoch: the rollout's own values
        if seen:  # later ones: every value from the weights as they are now
            fresh.value_preds.zero_()
            fresh.recompute_returns(policy)
        expected = fresh.returns[:-1] - fresh.value_preds[:-1]
        torch.testing.assert_close(advantages, (expected - expected.mean()) / (expected.std() + 1e-5))
        seen.append(advantages.clone())
        return generator(advantages, num_mini_batch)

    first = copy.deepcopy(rollouts)
    rollouts.feed_forward_generator = spy
    agent.update(rollouts)
    assert len(seen) == 3 and not torch.allclose(seen[0], seen[2])

    finals = []
    for epochs, recompute in ((1, True), (1, False)):
        policy.load_state_dict(start)
        again = copy.deepcopy(first)
        torch.manual_seed(1)  # the same minibatches
        PPO(policy, 0.2, epochs, 2, 0.5, 0.0, lr=1e-2, eps=1e-5, max_grad_norm=0.5,
            recompute_advantages=recompute).update(again)
        finals.append(copy.deepcopy(policy.state_dict()))
    for name in start:
        torch.testing.assert_close(finals[0][name], finals[1][name])
    recurrent = Policy((3,), spaces.Discrete(2), base_kwargs={"recurrent": True})
    with pytest.raises(ValueError, match="feed-forward"):
        PPO(recurrent, 0.2, 2, 1, 0.5, 0.0, lr=1e-3, eps=1e-5, max_grad_norm=0.5,
            recompute_advantages=True)


@pytest.mark.research
@pytest.mark.parametrize("missing", ["lr", "eps", "max_grad_norm"])
def test_the_hyperparameters_without_a_usable_default_are_asked_for(missing):
    """The original's defaults None for lr, eps and max_grad_norm cannot train: one clear error
    at construction (it was a TypeError from Adam, or from the first update's clipping)."""
    policy = Policy((3,), spaces.Discrete(2), base_kwargs={"hidden_size": 8})
    kwargs = {"lr": 1e-3, "eps": 1e-5, "max_grad_norm": 0.5, missing: None}
    with pytest.raises(ValueError, match=f"PPO needs lr, eps and max_grad_norm.*{missing}=None"):
        PPO(policy, 0.2, 1, 1, 0.5, 0.0, **kwargs)


@pytest.mark.research
def test_flags_reach_the_agent():
    from a2c_ppo_acktr.run import build
    from a2c_ppo_acktr.settings.arguments import get_config
    policy = Policy((3,), spaces.Discrete(2))
    original = build.make_agent(get_config(["--algo", "ppo", "--num-mini-batch", "4"]).algo, policy)
    assert original.use_clipped_value_loss and original.advantage_norm == "batch"
    tuned = build.make_agent(get_config(["--algo", "ppo", "--num-mini-batch", "4",
                                         "--no-clipped-value-loss", "--advantage-norm", "minibatch",
                                         "--recompute-advantages"]).algo, policy)
    assert not tuned.use_clipped_value_loss and tuned.advantage_norm == "minibatch"
    assert tuned.recompute_advantages and not original.recompute_advantages


@pytest.mark.slow
def test_ppo_learns_multidiscrete_actions(tmp_path):
    """PPO through main.py on MultiDiscrete([3, 4]) actions (tests/toy_envs.py): from ~5.8 at
    random to near the best return of 20."""
    import main
    from a2c_ppo_acktr.analysis.episodes import load_run

    argv = ["--env-name", "tests.toy_envs:MultiDiscreteTarget-v0", "--algo", "ppo", "--use-gae",
            "--num-processes", "4", "--num-steps", "64", "--num-mini-batch", "4",
            "--lr", "3e-3", "--num-env-steps", "12800", "--vec-env", "dummy", "--log-interval",
            "100", "--log-dir", str(tmp_path / "logs"), "--save-dir", ""]
    assert main.main(argv) == 0
    returns = load_run(str(tmp_path / "logs"))[1]
    assert returns[:20].mean() < 10 and returns[-20:].mean() > 17, (returns[:20].mean(),
                                                                    returns[-20:].mean())


def test_rpo_alpha_reaches_the_loss_as_evaluate_actions_mean_noise(monkeypatch):
    """--rpo-alpha A: PPO's loss asks evaluate_actions for RPO's noise A, with its generator."""
    import numpy as np

    from a2c_ppo_acktr.run.build import make_agent
    from a2c_ppo_acktr.settings.arguments import get_config

    cfg = get_config(["--algo", "ppo", "--env-name", "Pendulum-v1", "--rpo-alpha", "0.5",
                      "--num-mini-batch", "2"])
    space = spaces.Box(-2, 2, (1,), np.float32)
    policy = Policy((3,), space)
    generator = torch.Generator().manual_seed(0)
    agent = make_agent(cfg.algo, policy, generator)
    assert isinstance(agent, PPO) and agent.rpo_alpha == 0.5
    seen = []
    real = policy.evaluate_actions
    monkeypatch.setattr(policy, "evaluate_actions",
                        lambda *a, **k: seen.append(a[4:]) or real(*a, **k))
    storage = RolloutStorage(4, 2, (3,), space, 1)
    storage.returns.normal_()
    agent.update(storage)
    assert seen and all(s == (0.5, generator) for s in seen)
