"""GAIL: the discriminator's math, expert files (generate, h5 conversion, subsampling), main.py
with --gail (errors, checkpoints, every algo) and a learning check on CartPole."""
import csv
import os

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium import spaces

import main
from a2c_ppo_acktr.algo.gail import (
    Discriminator,
    ExpertDataset,
    GailError,
    GailReward,
    expert_path,
)
from a2c_ppo_acktr.envs import Normalizer
from a2c_ppo_acktr.evaluation import evaluate
from a2c_ppo_acktr.run.checkpoint import load_checkpoint, save_checkpoint
from a2c_ppo_acktr.storage import RolloutStorage
from gail_experts import convert_to_pytorch, generate

BOX = spaces.Box(-1.0, 1.0, (2,), np.float32)


pytestmark = pytest.mark.usefixtures("one_thread")  # as main.py runs MLPs
OBS = spaces.Box(-np.inf, np.inf, (3,), np.float32)


def expert_file(path, env_name, states, actions, lengths, obs_space, action_space):
    """Write an expert file in the layout of algo/gail.py from (B, T, ...) arrays."""
    data = {"states": torch.as_tensor(states, dtype=torch.float32),
            "actions": torch.as_tensor(actions),
            "rewards": torch.ones(states.shape[:2]), "lengths": torch.as_tensor(lengths),
            "env_name": env_name, "obs_shape": list(obs_space.shape),
            "action_space": str(action_space)}
    save_checkpoint(data, str(path))
    return str(path)


# ----------------------------------------------------------------------------- discriminator math

@pytest.mark.parametrize("reward", ["airl", "gail"])
def test_reward_formula_and_return_scaling(reward):
    torch.manual_seed(0)
    discr = Discriminator(OBS, BOX, reward=reward).double()
    gamma, n = 0.9, 3
    masks = [torch.ones(n, 1, dtype=torch.float64) for _ in range(6)]
    masks[3][1] = 0.0  # env 1 starts a new episode at step 3
    returns, seen = np.zeros(n), []  # the running variance starts at 1
    for step in range(6):
        s, a = torch.randn(n, 3, dtype=torch.float64), torch.rand(n, 2, dtype=torch.float64) * 2 - 1
        with torch.no_grad():
            d = torch.sigmoid(discr.trunk(torch.cat([s, a], 1))).numpy()[:, 0]
        by_hand = np.log(d) - np.log(1 - d) if reward == "airl" else -np.log(1 - d)
        scaled = discr.predict_reward(s, a, gamma, masks[step])
        returns = returns * masks[step].numpy()[:, 0] * gamma + by_hand
        seen.append(returns.copy())
        # Variance of every discounted return so far pooled with the prior (mean 0, variance 1,
        # weight 1e-4): E[x^2] - E[x]^2 over the weighted pool.
        x, c0 = np.concatenate(seen), 1e-4
        var = (c0 * 1.0 + np.sum(x ** 2)) / (c0 + len(x)) - (np.sum(x) / (c0 + len(x))) ** 2
        np.testing.assert_allclose(scaled.numpy()[:, 0], by_hand / np.sqrt(var + 1e-8), rtol=1e-9)


def test_gradient_penalty_matches_per_sample_autograd():
    torch.manual_seed(1)
    discr = Discriminator(OBS, BOX).double()
    expert = torch.randn(5, 5, dtype=torch.float64)
    policy = torch.randn(5, 5, dtype=torch.float64)
    torch.manual_seed(7)
    pen = discr.compute_grad_pen(expert, policy, lambda_=10)
    torch.manual_seed(7)
    alpha = torch.rand(5, 1, dtype=torch.float64)  # as compute_grad_pen draws it
    norms = []
    for i in range(5):  # one input at a time: d trunk(x_i) / d x_i
        x = (alpha[i] * expert[i] + (1 - alpha[i]) * policy[i]).requires_grad_(True)
        (g,) = torch.autograd.grad(discr.trunk(x).sum(), x)
        norms.append(g.norm())
    expected = 10 * ((torch.stack(norms) - 1) ** 2).mean()
    torch.testing.assert_close(pen, expected)

    # The penalty is differentiable in the parameters (create_graph): check one weight against
    # central differences.
    w = discr.trunk[0].weight
    (grad_w,) = torch.autograd.grad(pen, w)
    h = 1e-6
    for idx in [(0, 0), (3, 2), (50, 4)]:
        with torch.no_grad():
            w[idx] += h
        torch.manual_seed(7)
        up = discr.compute_grad_pen(expert, policy)
        with torch.no_grad():
            w[idx] -= 2 * h
        torch.manual_seed(7)
        down = discr.compute_grad_pen(expert, policy)
        with torch.no_grad():
            w[idx] += h
        assert abs(((up - down) / (2 * h)).item() - grad_w[idx].item()) < 1e-5


def test_discrete_actions_are_one_hot_and_box_actions_clipped():
    discr = Discriminator(OBS, spaces.Discrete(4))
    s = torch.randn(3, 3)
    x = discr.encode(s, torch.tensor([[2], [0], [3]]))
    torch.testing.assert_close(x, torch.cat([s, torch.eye(4)[[2, 0, 3]]], 1))
    assert discr.trunk[0].in_features == 3 + 4
    box = Discriminator(OBS, BOX)
    x = box.encode(s, torch.tensor([[0.5, -3.0], [2.0, 0.1], [-1.0, 1.0]]))
    torch.testing.assert_close(x[:, 3:], torch.tensor([[0.5, -1.0], [1.0, 0.1], [-1.0, 1.0]]))


@pytest.mark.slow
def test_discriminator_learns_to_separate_expert_from_policy():
    """Expert actions are 0, the policy's 1: a few updates make D tell them apart."""
    torch.manual_seed(0)
    rollouts = RolloutStorage(16, 4, (3,), spaces.Discrete(2), 1)
    rollouts.obs.normal_()
    rollouts.actions.fill_(1)
    expert = [(torch.randn(32, 3), torch.zeros(32, 1, dtype=torch.long)) for _ in range(2)]
    discr = Discriminator(OBS, spaces.Discrete(2))
    first = discr.update(expert, rollouts)
    discr.update(expert, rollouts, epochs=50)
    last = discr.update(expert, rollouts)
    assert last["gail_loss"] < first["gail_loss"]
    assert last["gail_expert_acc"] == 1.0 and last["gail_policy_acc"] == 1.0
    r_expert = discr.predict_reward(torch.randn(8, 3), torch.zeros(8, 1, dtype=torch.long), 0.99,
                                    torch.ones(8, 1))
    r_policy = discr.predict_reward(torch.randn(8, 3), torch.ones(8, 1, dtype=torch.long), 0.99,
                                    torch.ones(8, 1))
    assert r_expert.min() > 0 > r_policy.max()


def test_update_normalizes_expert_states_with_obsfilt():
    seen = []

    def obsfilt(x):
        seen.append(x.copy())
        return (x * 0).astype(np.float32)

    rollouts = RolloutStorage(4, 2, (3,), BOX, 1)
    discr = Discriminator(OBS, BOX)
    states = torch.randn(6, 3)
    discr.update([(states, torch.zeros(6, 2))], rollouts, obsfilt)
    np.testing.assert_array_equal(seen[0], states.numpy())


def test_reward_model_trains_d_then_replaces_the_env_rewards_on_its_warm_up_schedule():
    """GailReward: warm-up epochs while the normalizer learns, then the others with it frozen;
    each step's reward becomes D's, with the rollout's masks and gamma."""
    torch.manual_seed(0)
    rollouts = RolloutStorage(4, 2, (3,), spaces.Discrete(2), 1)
    rollouts.obs.normal_()
    rollouts.rewards.fill_(7.0)
    discr = Discriminator(OBS, spaces.Discrete(2))
    epochs, update = [], discr.update
    discr.update = lambda *a: (epochs.append(a[3]), update(*a))[1]
    normalizer = Normalizer((3,))
    model = GailReward(discr, [(torch.randn(4, 3), torch.zeros(4, 1, dtype=torch.long))],
                       normalizer, gamma=0.9, warmup_updates=2, warmup_epochs=5, epochs=1)
    stats = model(rollouts, 1)
    assert epochs == [5] and normalizer.training and set(stats) >= {"gail_loss"}
    calls, predict = [], discr.predict_reward
    discr.predict_reward = lambda *a: (calls.append(a), predict(*a))[1] * 0 + len(calls)
    model(rollouts, 2)
    assert epochs == [5, 1] and not normalizer.training
    assert [(c[0].data_ptr(), c[2], c[3].data_ptr()) for c in calls] == [
        (rollouts.obs[t].data_ptr(), 0.9, rollouts.masks[t].data_ptr()) for t in range(4)]
    assert rollouts.rewards[:, :, 0].tolist() == [[1.0, 1.0], [2.0, 2.0], [3.0, 3.0], [4.0, 4.0]]


# ----------------------------------------------------------------------------- expert data

def test_expert_files_are_named_as_checkpoints_name_the_env():
    """'/' of namespaced ids becomes '_'; of module:EnvId only the id counts (no ':' in names)."""
    assert expert_path("d", "CartPole-v1") == os.path.join("d", "trajs_CartPole-v1.pt")
    assert expert_path("d", "ALE/Pong-v5") == os.path.join("d", "trajs_ALE_Pong-v5.pt")
    assert expert_path("d", "tests.toy_envs:DictObs-v0") == os.path.join("d", "trajs_DictObs-v0.pt")


def test_expert_dataset_subsamples_chosen_trajectories(tmp_path):
    # states[i, t] = (i, t), padding marked -1; actions[i, t] = 10 * i + t.
    lengths = [100, 65, 40, 90, 59]
    states = -np.ones((5, 100, 2), np.float32)
    actions = np.zeros((5, 100, 1), np.int64)
    for i, n in enumerate(lengths):
        states[i, :n] = np.stack([np.full(n, i), np.arange(n)], 1)
        actions[i, :n, 0] = 10 * i + np.arange(n)
    path = expert_file(tmp_path / "e.pt", "X-v0", states, actions, lengths,
                       spaces.Box(-1, 1, (2,)), spaces.Discrete(1000))
    torch.manual_seed(0)
    ds = ExpertDataset(path, num_trajectories=3, subsample_frequency=20)
    chosen = ds.trajectory_indices.tolist()
    assert len(set(chosen)) == 3
    assert len(ds) == sum(lengths[i] // 20 for i in chosen)
    for i in chosen:
        t = ds.states[ds.states[:, 0] == i][:, 1].long()
        assert len(t) == lengths[i] // 20
        assert 0 <= t[0] < 20 and torch.all(t.diff() == 20) and t[-1] < lengths[i]
    s, a = ds[len(ds) - 1]
    assert a.item() == 10 * s[0].item() + s[1].item()
    assert ds.expert_returns == [float(lengths[i]) for i in chosen]  # rewards are all 1
    # Another seed picks other offsets / trajectories; too many trajectories is an error.
    torch.manual_seed(1)
    assert not torch.equal(ExpertDataset(path, 3, 20).states, ds.states)
    with pytest.raises(GailError, match="holds 5 trajectories, 6 are needed"):
        ExpertDataset(path, num_trajectories=6)


def _short_run(tmp_path, env_name, extra=()):
    log_dir, save_dir = str(tmp_path / "logs"), str(tmp_path / "models")
    assert main.main(["--env-name", env_name, "--algo", "a2c", "--num-processes", "2",
                      "--num-steps", "8", "--num-env-steps", "32", "--vec-env", "dummy",
                      "--log-dir", log_dir, "--save-dir", save_dir, *extra]) == 0
    return save_dir


@pytest.mark.parametrize("env_name", ["CartPole-v1", "Pendulum-v1"])
def test_generate_round_trip(tmp_path, env_name, capsys):
    save_dir = _short_run(tmp_path, env_name)
    out_dir = str(tmp_path / "experts")
    assert generate.main(["--env-name", env_name, "--load-dir", save_dir, "--episodes", "3",
                          "--seed", "5", "--out-dir", out_dir]) == 0
    path = expert_path(out_dir, env_name)
    assert f"wrote {path}: 3 trajectories" in capsys.readouterr().out
    data = torch.load(path, weights_only=True)
    env = gym.make(env_name)
    assert data["env_name"] == env_name and data["action_space"] == str(env.action_space)
    lengths = data["lengths"].tolist()
    assert data["states"].shape == (3, max(lengths), *env.observation_space.shape)
    # Replaying the recorded actions in a fresh env (seeded as generate.py seeds it) gives back
    # the recorded raw observations and rewards, and ends exactly at the recorded lengths.
    obs, _ = env.reset(seed=5 + 1000)
    for i, n in enumerate(lengths):
        for t in range(n):
            np.testing.assert_array_equal(data["states"][i, t].numpy(), obs)
            a = data["actions"][i, t].numpy()
            obs, r, term, trunc, _ = env.step(int(a[0]) if data["actions"].dtype == torch.int64 else a)
            assert r == pytest.approx(data["rewards"][i, t].item(), rel=1e-6)
            assert (term or trunc) == (t == n - 1)
        obs, _ = env.reset()
        assert torch.all(data["states"][i, n:] == 0)  # padding
    if env_name == "Pendulum-v1":
        assert data["actions"].abs().max() <= 2.0  # the executed (clipped) torque
    ds = ExpertDataset(path, num_trajectories=3, subsample_frequency=1)
    assert len(ds) == sum(lengths)
    flat = torch.cat([data["states"][i, :n] for i, n in enumerate(lengths)])
    assert sorted(map(tuple, ds.states.tolist())) == sorted(map(tuple, flat.tolist()))


@pytest.mark.parametrize("argv, needle", [
    (["--episodes", "0"], "--episodes must be a positive integer below 2**63, got 0"),
    (["--seed", "-1"], "--seed must be an integer from 0 to 2**32 - 1, got -1"),
    (["--out-dir", ""], "--out-dir is empty: give a path"),
])
def test_generate_refuses_bad_numbers_and_empty_paths(capsys, argv, needle):
    with pytest.raises(SystemExit) as e:
        generate.get_args(argv)
    assert e.value.code == 2 and capsys.readouterr().err == f"generate.py: error: {needle}\n"


def test_generate_ctrl_c_while_recording_writes_nothing(tmp_path, capsys, monkeypatch):
    save_dir = _short_run(tmp_path, "CartPole-v1")

    def interrupted(policy, envs, episodes):
        raise KeyboardInterrupt
    monkeypatch.setattr(generate, "record", interrupted)
    out_dir = tmp_path / "experts"
    assert generate.main(["--env-name", "CartPole-v1", "--load-dir", save_dir,
                          "--out-dir", str(out_dir)]) == 130
    assert capsys.readouterr().err == "generate.py: interrupted: nothing written\n"
    assert not out_dir.exists()


def test_generate_builds_the_env_of_the_run(tmp_path, capsys):
    """The checkpoint's env kwargs reach the env generate.py records in (as they reach enjoy.py)."""
    save_dir = _short_run(tmp_path, "Pendulum-v1", ["--env-kwargs", "max_episode_steps=7"])
    out_dir = str(tmp_path / "experts")
    assert generate.main(["--env-name", "Pendulum-v1", "--load-dir", save_dir, "--episodes", "2",
                          "--out-dir", out_dir]) == 0
    data = torch.load(expert_path(out_dir, "Pendulum-v1"), weights_only=True)
    assert data["lengths"].tolist() == [7, 7]  # Pendulum's own limit is 200 steps


def test_generate_rejects_missing_checkpoint(tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        generate.main(["--env-name", "CartPole-v1", "--load-dir", str(tmp_path)])
    err = capsys.readouterr().err
    assert e.value.code == 2 and err.startswith("generate.py: error: no checkpoint")
    assert len(err.strip().splitlines()) == 1


def _h5(path, obs, act, rew, lengths):
    import h5py
    with h5py.File(path, "w") as f:
        f["obs_B_T_Do"], f["a_B_T_Da"], f["r_B_T"], f["len_B"] = obs, act, rew, lengths
    return str(path)


@pytest.mark.parametrize("env_name", ["Pendulum-v1", "CartPole-v1"])
def test_convert_h5(tmp_path, env_name):
    rng = np.random.default_rng(0)
    discrete = env_name == "CartPole-v1"
    obs_dim = 4 if discrete else 3
    obs = rng.normal(size=(3, 7, obs_dim))
    act = rng.integers(0, 2, (3, 7, 1)).astype(np.float64) if discrete else rng.normal(size=(3, 7, 1))
    rew, lengths = rng.normal(size=(3, 7)), np.array([7, 5, 6])
    h5 = _h5(tmp_path / "trajs.h5", obs, act, rew, lengths)
    out_dir = str(tmp_path / "experts")
    assert convert_to_pytorch.main(["--h5-file", h5, "--env-name", env_name,
                                    "--out-dir", out_dir]) == 0
    data = torch.load(expert_path(out_dir, env_name), weights_only=True)
    np.testing.assert_allclose(data["states"].numpy(), obs, rtol=1e-6)
    np.testing.assert_allclose(data["rewards"].numpy(), rew, rtol=1e-6)
    assert data["lengths"].tolist() == [7, 5, 6]
    if discrete:
        assert data["actions"].dtype == torch.int64
        np.testing.assert_array_equal(data["actions"].numpy(), act.astype(np.int64))
    else:
        np.testing.assert_allclose(data["actions"].numpy(), act, rtol=1e-6)
    assert data["action_space"] == str(gym.make(env_name).action_space)
    assert len(ExpertDataset(expert_path(out_dir, env_name), 3, 1)) == 18


def test_convert_h5_rejects_mismatch(tmp_path, capsys):
    h5 = _h5(tmp_path / "t.h5", np.zeros((2, 4, 5)), np.zeros((2, 4, 1)), np.zeros((2, 4)),
             np.array([4, 4]))
    with pytest.raises(SystemExit) as e:
        convert_to_pytorch.main(["--h5-file", h5, "--env-name", "Pendulum-v1",
                                 "--out-dir", str(tmp_path)])
    err = capsys.readouterr().err
    assert e.value.code == 2 and "observations of shape (5,) do not fit Pendulum-v1's (3,)" in err
    assert len(err.strip().splitlines()) == 1


# ----------------------------------------------------------------------------- main.py --gail

def cartpole_expert(path, episodes=4, seed=0):
    """A hand-written CartPole controller that keeps the cart centred: returns 500."""
    env = gym.make("CartPole-v1")
    trajectories = []
    for ep in range(episodes):
        obs, _ = env.reset(seed=seed + ep)
        states, actions = [], []
        while True:
            a = int(0.05 * obs[0] + 0.2 * obs[1] + obs[2] + 0.3 * obs[3] > 0)
            states.append(obs)
            actions.append(a)
            obs, _, term, trunc, _ = env.step(a)
            if term or trunc:
                break
        trajectories.append((np.stack(states), np.array(actions)[:, None]))
    lengths = [len(s) for s, _ in trajectories]
    assert lengths == [500] * episodes
    return expert_file(path, "CartPole-v1", np.stack([s for s, _ in trajectories]),
                       np.stack([a for _, a in trajectories]), lengths,
                       env.observation_space, env.action_space)


GAIL_SHORT = ["--env-name", "CartPole-v1", "--num-processes", "2", "--num-steps", "16",
              "--num-env-steps", "128", "--vec-env", "dummy", "--gail", "--num-mini-batch", "2",
              "--gail-warmup-updates", "2", "--gail-warmup-epoch", "3", "--log-interval", "1"]


@pytest.mark.slow
@pytest.mark.parametrize("algo", ["ppo", "a2c", "acktr"])
def test_gail_trains_logs_and_checkpoints(tmp_path, algo):
    experts = tmp_path / "experts"
    cartpole_expert(expert_path(str(experts), "CartPole-v1"))
    log_dir, save_dir = str(tmp_path / "logs"), str(tmp_path / "models")
    args = GAIL_SHORT + ["--algo", algo, "--gail-experts-dir", str(experts), "--log-dir", log_dir,
                         "--save-dir", save_dir]
    assert main.main(args) == 0
    with open(os.path.join(log_dir, algo, "CartPole-v1_seed1", "progress.csv")) as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 4
    for row in rows:
        assert float(row["gail_loss"]) > 0 and 0 <= float(row["gail_expert_acc"]) <= 1
    ckpt = load_checkpoint(os.path.join(save_dir, algo, "CartPole-v1_seed1.pt"))
    env = gym.make("CartPole-v1")
    fresh = Discriminator(env.observation_space, env.action_space)
    fresh.load_full_state_dict(ckpt["gail"])
    assert fresh.ret_rms.count > 1 and fresh.returns.shape == (2, 1)
    # --resume restores the discriminator (its return statistics go on from the saved count).
    if algo == "ppo":
        count = fresh.ret_rms.count
        assert main.main(args + ["--num-env-steps", "256", "--resume"]) == 0
        ckpt = load_checkpoint(os.path.join(save_dir, algo, "CartPole-v1_seed1.pt"))
        assert ckpt["env_steps"] == 256
        # 4 more updates of 16 steps, each adding the returns of 2 envs.
        assert ckpt["gail"]["ret_rms"]["count"] == pytest.approx(count + 4 * 16 * 2)


def _fails(capsys, argv, *fragments):
    with pytest.raises(SystemExit) as e:
        main.main(argv)
    err = capsys.readouterr().err
    assert e.value.code == 2
    assert len(err.strip().splitlines()) == 1, err
    for fragment in fragments:
        assert fragment in err, err
    return err


def test_gail_errors(tmp_path, capsys):
    experts = str(tmp_path / "experts")
    log_dir = str(tmp_path / "logs")
    base = GAIL_SHORT + ["--algo", "ppo", "--gail-experts-dir", experts, "--log-dir", log_dir,
                         "--save-dir", str(tmp_path / "models")]
    path = expert_path(experts, "CartPole-v1")
    _fails(capsys, base, f"no expert file at {path}", "gail_experts/generate.py --env-name CartPole-v1")
    # The failed run left nothing behind, so the next attempt is not refused.
    assert not os.path.exists(log_dir) and not os.path.exists(tmp_path / "models")

    env = gym.make("CartPole-v1")
    states, actions = np.zeros((4, 20, 4)), np.zeros((4, 20, 1), np.int64)
    expert_file(path, "Acrobot-v1", states, actions, [20] * 4, env.observation_space, env.action_space)
    _fails(capsys, base, f"expert file {path} is for env_name 'Acrobot-v1', expected 'CartPole-v1'")
    expert_file(path, "CartPole-v1", np.zeros((4, 20, 6)), actions, [20] * 4,
                spaces.Box(-1, 1, (6,)), env.action_space)
    _fails(capsys, base, "is for obs_shape [6], expected [4]")
    expert_file(path, "CartPole-v1", states, np.zeros((4, 20, 2)), [20] * 4,
                env.observation_space, BOX)
    _fails(capsys, base, "is for action_space 'Box(-1.0, 1.0, (2,), float32)', expected 'Discrete(2)'")
    with open(path, "w") as f:
        f.write("not a torch file")
    _fails(capsys, base, f"cannot read expert file {path}")

    _fails(capsys, ["--env-name", "PongNoFrameskip-v4", "--gail", "--num-processes", "1",
                    "--num-steps", "8", "--num-mini-batch", "1", "--log-dir", log_dir,
                    "--save-dir", str(tmp_path / "models")],
           "GAIL here takes vector observations", "(4, 84, 84)")
    _fails(capsys, base + ["--gail-reward", "wgan"],
           "unknown --gail-reward 'wgan'; choose one of: airl, gail")
    _fails(capsys, base + ["--gail-epoch", "0"], "--gail-epoch must be a positive integer below 2**63, got 0")


def test_resume_with_gail_needs_a_gail_checkpoint(tmp_path, capsys):
    experts = str(tmp_path / "experts")
    cartpole_expert(expert_path(experts, "CartPole-v1"))
    common = ["--env-name", "CartPole-v1", "--algo", "ppo", "--num-processes", "2", "--num-steps",
              "16", "--num-mini-batch", "2", "--vec-env", "dummy", "--log-dir",
              str(tmp_path / "logs"), "--save-dir", str(tmp_path / "models")]
    assert main.main(common + ["--num-env-steps", "32"]) == 0
    _fails(capsys, common + ["--num-env-steps", "64", "--resume", "--gail", "--gail-experts-dir",
                             experts], "--gail True differs from the run's saved False")


# ----------------------------------------------------------------------------- learning

@pytest.mark.slow
def test_gail_ppo_imitates_cartpole_expert(tmp_path):
    """From 4 trajectories of a hand-written controller (return 500), GAIL+PPO reaches >= 400.

    The default reward, log D - log(1 - D), has no survival bonus built in: it is negative
    wherever D finds the policy unlike the expert, so long episodes come only from imitation.
    """
    experts = str(tmp_path / "experts")
    cartpole_expert(expert_path(experts, "CartPole-v1"))
    log_dir, save_dir = str(tmp_path / "logs"), str(tmp_path / "models")
    assert main.main(["--algo", "ppo", "--env-name", "CartPole-v1", "--num-processes", "8",
                      "--num-steps", "32", "--num-mini-batch", "1", "--ppo-epoch", "20",
                      "--use-gae", "--gae-lambda", "0.8", "--entropy-coef", "0", "--lr", "1e-3",
                      "--use-linear-lr-decay", "--use-proper-time-limits",
                      "--num-env-steps", "40000", "--gail",
                      "--gail-experts-dir", experts, "--log-dir", log_dir, "--save-dir", save_dir,
                      "--log-interval", "10"]) == 0
    ckpt = load_checkpoint(os.path.join(save_dir, "ppo", "CartPole-v1_seed1.pt"))
    env = gym.make("CartPole-v1")
    from a2c_ppo_acktr.model import Policy
    policy = Policy(env.observation_space.shape, env.action_space)
    policy.load_state_dict(ckpt["actor_critic"])
    returns = evaluate(policy, ckpt["obs_rms"], "CartPole-v1", 3, 4, str(tmp_path / "eval"), "cpu",
                       num_episodes=8)
    assert np.mean(returns) >= 400, returns


def test_gail_refuses_async_rollouts(capsys):
    from a2c_ppo_acktr.settings.arguments import get_args
    with pytest.raises(SystemExit) as e:
        get_args(["--env-name", "CartPole-v1", "--gail", "--async-rollouts"])
    assert e.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--async-rollouts" in err[0]
