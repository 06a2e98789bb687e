"""The recipes: valid main.py commands whose loss flags give SB3's PPO loss at the same settings."""

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium import spaces

from a2c_ppo_acktr.model import make_policy, policy_kwargs
from a2c_ppo_acktr.run import build
from a2c_ppo_acktr.settings import recipes
from a2c_ppo_acktr.settings.arguments import config_from_args, get_args
from a2c_ppo_acktr.storage import RolloutStorage

ALL_ENVS = [env for envs in recipes.SUITES.values() for env in envs]

# Each tuned MuJoCo recipe's settings as SB3's PPO arguments: Tianshou's loss (raw advantages, its
# value weight 0.25 on the squared error) on SB3's default network for the recipes that follow
# Tianshou's example.
_TIANSHOU = dict(normalize_advantage=False, vf_coef=0.25, max_grad_norm=0.5,
                 policy_kwargs=dict(log_std_init=-0.5))
SB3_SETTINGS = {
    "HalfCheetah-v5": dict(_TIANSHOU, policy_kwargs=dict(log_std_init=-0.5, net_arch=dict(
        pi=[256, 256], vf=[256, 256]))),
    "Ant-v5": _TIANSHOU,
    "Humanoid-v5": _TIANSHOU,
}


PAIRS = [(env, name) for env in ALL_ENVS for name in recipes.names(env)]


@pytest.mark.parametrize("env, name", PAIRS)
def test_every_recipe_is_a_valid_main_command(env, name):
    argv = recipes.command(env, name)
    assert argv[:4] == ["python", "main.py", "--env-name", env]
    args = get_args(argv[2:])  # check_args would exit on a bad combination
    assert args.num_env_steps == recipes.BUDGETS[recipes.suite_of(env)]


@pytest.mark.parametrize("env, name", PAIRS)
def test_recipe_flag_gives_the_printed_command(env, name):
    """``--recipe`` sets what ``python -m a2c_ppo_acktr.settings.recipes`` prints, budget included."""
    by_flag = vars(get_args(["--env-name", env, "--recipe", name]))
    by_command = vars(get_args(recipes.command(env, name)[2:]))
    for key in ("recipe", "notes", "config"):
        by_flag.pop(key), by_command.pop(key)
    assert by_flag == by_command


def test_recipe_tuned_sets_its_values_and_explicit_flags_win(capsys):
    values = recipes.settings("HalfCheetah-v5", "tuned")
    args = get_args(["--env-name", "HalfCheetah-v5", "--recipe", "tuned"])
    assert {dest: getattr(args, dest) for dest in values} == values
    assert (args.num_processes, args.advantage_norm, args.num_env_steps) == (64, "none", 1_000_000)
    assert args.notes == ["recipe tuned for HalfCheetah-v5: " + " ".join(recipes.flags(values))]
    # before or after --recipe, a flag given wins; the log line says which
    for argv in (["--lr", "1e-4", "--env-name", "HalfCheetah-v5", "--recipe", "tuned"],
                 ["--env-name", "HalfCheetah-v5", "--recipe", "tuned", "--lr", "1e-4"]):
        args = get_args(argv)
        assert args.lr == 1e-4
        assert {d: getattr(args, d) for d in values if d != "lr"} == {
            d: v for d, v in values.items() if d != "lr"}
        assert args.notes[0].endswith("; from the command line: --lr 0.0001 (recipe: 0.0003)")
        assert " --lr " not in args.notes[0].split(";")[0]
    assert args.config["flags"]["recipe"] == "tuned"


@pytest.mark.parametrize("argv, needle", [
    (["--env-name", "HalfCheetah-v5", "--recipe", "best"],
     "--recipe best: unknown recipe 'best'; choose one of: original, tuned, a2c, acktr, fast"),
    (["--env-name", "CartPole-v1", "--recipe", "acktr"],
     "--recipe acktr: recipe 'acktr' is ACKTR's recipe for atari, mujoco envs, not for "
     "CartPole-v1"),
    (["--env-name", "CartPole-v1", "--recipe", "a2c"],
     "--recipe a2c: recipe 'a2c' is A2C's recipe for atari, mujoco envs, not for CartPole-v1"),
    (["--env-name", "HalfCheetah-v5", "--recipe", "fast"],
     "--recipe fast: recipe 'fast' is the many-env PPO recipe for atari envs, not for "
     "HalfCheetah-v5"),
    (["--env-name", "Pendulum-v1", "--recipe", "tuned"],
     "--recipe tuned: no recipes for 'Pendulum-v1'; known: HalfCheetah-v5")])
def test_unknown_recipe_or_env_exits_2_in_one_line(argv, needle, capsys):
    with pytest.raises(SystemExit) as exc:
        get_args(argv)
    err = capsys.readouterr().err
    assert exc.value.code == 2 and len(err.strip().splitlines()) == 1 and needle in err, err


def test_an_env_of_its_own_wins_over_its_suites_recipe():
    """A2C's MuJoCo recipe, and HalfCheetah's and Walker2d's discount of their own."""
    suite = get_args(recipes.recipe("Hopper-v5", "a2c"))
    for env in ("HalfCheetah-v5", "Walker2d-v5"):
        own = get_args(recipes.recipe(env, "a2c"))
        assert own.gamma == 0.995 and suite.gamma == 0.99
        assert {k: v for k, v in vars(own).items() if k not in ("gamma", "env_name", "config")} == {
            k: v for k, v in vars(suite).items() if k not in ("gamma", "env_name", "config")}


def test_tuned_halfcheetah_has_tianshous_batch_sizes():
    args = get_args(recipes.recipe("HalfCheetah-v5", "tuned"))
    # Tianshou: 2048 steps per update, minibatches of 64, 10 epochs, lr decayed to 0, the
    # advantages recomputed before each epoch (its lr_decay, recompute_adv)
    assert args.num_processes * args.num_steps == 2048
    assert args.num_processes * args.num_steps // args.num_mini_batch == 64
    assert (args.ppo_epoch, args.use_linear_lr_decay, args.recompute_advantages) == (10, True, True)
    # the MLP's tanh and orthogonal init, as Tianshou's, 256 wide as the zoo's (Tianshou: 64)
    assert (args.hidden_size, args.activation, args.init) == (256, None, "orthogonal")
    assert args.advantage_norm == "none" and args.no_clipped_value_loss


def test_fast_is_the_tuned_atari_recipe_on_64_envs():
    fast = get_args(["--env-name", "PongNoFrameskip-v4", "--recipe", "fast"])
    tuned = get_args(["--env-name", "PongNoFrameskip-v4", "--recipe", "tuned"])
    # 64 envs x 32 steps, minibatches of 128 as the tuned recipe's: its gradient steps per env step
    assert (fast.num_processes, fast.num_steps, fast.num_mini_batch) == (64, 32, 16)
    assert (fast.num_processes * fast.num_steps // fast.num_mini_batch
            == tuned.num_processes * tuned.num_steps // tuned.num_mini_batch == 128)
    same = {"num_processes", "num_steps", "num_mini_batch", "recipe", "notes", "config"}
    assert {k: v for k, v in vars(fast).items() if k not in same} == {
        k: v for k, v in vars(tuned).items() if k not in same}
    assert recipes.names("PongNoFrameskip-v4")[-1] == "fast" and "fast" not in recipes.names(
        "CartPole-v1")


@pytest.mark.slow
def test_fast_trains_a_few_updates_on_the_cpu(tmp_path):
    """Smoke test only: the recipe with 2 envs x 8 steps, 2 updates (its learning check is
    Pong to 1.5M steps on seeds 1-3: hours; docs/notes.md, "The recipes")."""
    import main
    argv = ["--env-name", "PongNoFrameskip-v4", "--recipe", "fast", "--num-processes", "2",
            "--num-steps", "8", "--num-env-steps", "32", "--no-cuda",
            "--log-dir", str(tmp_path / "logs"), "--save-dir", ""]
    assert main.main(argv) == 0
    rows = (tmp_path / "logs").glob("**/progress.csv")
    lines = next(rows).read_text().splitlines()
    assert len(lines) == 3 and lines[-1].split(",")[1] == "32"


def test_humanoid_acts_as_tianshous_policy_in_its_box():
    """Tianshou's policy samples with std 0.6 (log-std -0.5) in [-1, 1] and scales the action onto
    the Box, Humanoid's +-0.4 (--scale-actions), on 270 observations (no contact forces)."""
    args = get_args(recipes.recipe("Humanoid-v5", "tuned"))
    env = gym.make("Humanoid-v5", **args.env_kwargs)
    try:
        assert np.allclose(env.action_space.high, 0.4) and np.allclose(env.action_space.low, -0.4)
        assert env.observation_space.shape == (270,)
        assert args.scale_actions and args.log_std_init == -0.5
        assert args.num_processes * args.num_steps // args.num_mini_batch == 256
    finally:
        env.close()


def test_unknown_env_or_recipe():
    with pytest.raises(KeyError, match="no recipes"):
        recipes.recipe("Pendulum-v1", "tuned")
    with pytest.raises(KeyError, match="unknown recipe"):
        recipes.recipe("Hopper-v5", "best")


def _ours_and_spaces(args):
    """Our policy and agent built from ``args`` (seed 0) for 5 observations and 3 actions in
    [-1, 1], and a gym.Env class with those spaces for SB3 to build its own on."""
    obs_space = spaces.Box(-np.inf, np.inf, (5,), np.float32)
    act_space = spaces.Box(-1, 1, (3,), np.float32)
    torch.manual_seed(0)
    cfg = config_from_args(args)
    ours = make_policy(obs_space.shape, act_space, policy_kwargs(cfg.policy))

    class Spaces(gym.Env):
        observation_space, action_space = obs_space, act_space

    return ours, build.make_agent(cfg.algo, ours), Spaces


def _matching_parameters(sb3_policy, ours) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """(ours, SB3's) for every parameter: separate actor and critic towers of two layers."""
    modules = [(ours.base.actor, sb3_policy.mlp_extractor.policy_net),
               (ours.base.critic, sb3_policy.mlp_extractor.value_net),
               (ours.base.critic_linear, sb3_policy.value_net),
               (ours.dist.fc_mean, sb3_policy.action_net)]
    pairs = [pq for mine, theirs in modules
             for pq in zip(mine.parameters(), theirs.parameters(), strict=True)]
    return pairs + [(ours.dist.logstd, sb3_policy.log_std)]


@pytest.mark.parametrize("env_id", sorted(SB3_SETTINGS))
def test_recipes_follow_sb3s_loss(env_id, tmp_path):
    """One PPO pass over one minibatch, ours with the recipe's loss flags and SB3's PPO with the
    same settings, from the same weights on the same data: the same gradients. (SB3's value loss
    has no 1/2, so its ``vf_coef`` c is our ``--value-loss-coef`` 2c.)"""
    from stable_baselines3 import PPO as SB3PPO
    from stable_baselines3.common.logger import configure

    T = 64  # one minibatch, one epoch: SB3 shuffles its minibatches, the loss is their mean
    argv = recipes.recipe(env_id, "tuned") + ["--num-steps", str(T), "--num-mini-batch", "1",
                                              "--ppo-epoch", "1", "--lr", "1e-30"]
    args = get_args(argv)
    ours, agent, Spaces = _ours_and_spaces(args)
    act_space = Spaces.action_space

    sb3 = SB3PPO("MlpPolicy", Spaces(), n_steps=T, batch_size=T, n_epochs=1, learning_rate=1e-30,
                 seed=0, device="cpu", **SB3_SETTINGS[env_id])
    pairs = _matching_parameters(sb3.policy, ours)
    with torch.no_grad():
        for mine, theirs in pairs:
            mine.copy_(theirs)

    g = torch.Generator().manual_seed(1)
    obs, actions = torch.randn(T, 5, generator=g), torch.randn(T, 3, generator=g)
    with torch.no_grad():
        values, old_log_probs, _, _ = ours.evaluate_actions(
            obs, torch.zeros(T, ours.recurrent_hidden_state_size), torch.ones(T, 1), actions)
    old_log_probs = old_log_probs + 0.05 * torch.randn(T, 1, generator=g)  # some ratios clip
    returns = values + torch.randn(T, 1, generator=g)

    r = RolloutStorage(T, 1, (5,), act_space, ours.recurrent_hidden_state_size)
    r.obs[:-1], r.actions[:], r.action_log_probs[:] = obs[:, None], actions[:, None], old_log_probs[:, None]
    r.value_preds[:-1], r.returns[:-1] = values[:, None], returns[:, None]
    agent.update(r)

    buf = sb3.rollout_buffer
    buf.observations[:] = obs.numpy()[:, None]
    buf.actions[:] = actions.numpy()[:, None]
    buf.log_probs[:] = old_log_probs.numpy()
    buf.values[:] = values.numpy()
    buf.returns[:] = returns.numpy()
    buf.advantages[:] = (returns - values).numpy()
    buf.full, buf.pos = True, T
    sb3.set_logger(configure(str(tmp_path), []))  # None: a new directory in /tmp
    sb3.train()

    for mine, theirs in pairs:
        # advantages: ours standardize with std + 1e-5, SB3 with std + 1e-8
        torch.testing.assert_close(mine.grad, theirs.grad, rtol=1e-4, atol=1e-6)


def test_a2c_mujoco_recipe_takes_sb3s_a2c_step(tmp_path):
    """``--recipe a2c`` on MuJoCo, given to SB3's A2C as its arguments (Tianshou's example's loss:
    raw advantages, ``vf_coef`` on the mean squared error, RMSprop): from the same weights on the
    same rollout, one update of each gives the same gradients and, after the gradient clip and
    RMSprop's step, the same weights."""
    from stable_baselines3 import A2C as SB3A2C
    from stable_baselines3.common.logger import configure
    from stable_baselines3.common.vec_env import DummyVecEnv

    args = get_args(recipes.recipe("HalfCheetah-v5", "a2c"))
    T, N = args.num_steps, args.num_processes
    ours, agent, Spaces = _ours_and_spaces(args)
    act_space = Spaces.action_space

    width = [args.hidden_size] * 2
    sb3 = SB3A2C("MlpPolicy", DummyVecEnv([Spaces] * N), n_steps=T, learning_rate=args.lr,
                 gamma=args.gamma, gae_lambda=args.gae_lambda, ent_coef=args.entropy_coef,
                 vf_coef=args.value_loss_coef, max_grad_norm=args.max_grad_norm,
                 rms_prop_eps=args.eps, normalize_advantage=False, seed=0, device="cpu",
                 policy_kwargs=dict(log_std_init=args.log_std_init,
                                    net_arch=dict(pi=width, vf=width)))
    assert sb3.policy.optimizer.defaults["alpha"] == args.alpha
    pairs = _matching_parameters(sb3.policy, ours)
    with torch.no_grad():
        for mine, theirs in pairs:
            mine.copy_(theirs)

    g = torch.Generator().manual_seed(1)
    obs, actions = 3 * torch.randn(T, N, 5, generator=g), torch.randn(T, N, 3, generator=g)
    with torch.no_grad():
        values = ours.get_value(obs.reshape(T * N, 5), torch.zeros(T * N, 1),
                                torch.ones(T * N, 1)).reshape(T, N, 1)
    returns = values + 10 * torch.randn(T, N, 1, generator=g)  # large: the gradient clip binds

    r = RolloutStorage(T, N, (5,), act_space, ours.recurrent_hidden_state_size)
    r.obs[:-1], r.actions[:], r.returns[:-1] = obs, actions, returns
    before = [mine.detach().clone() for mine, _ in pairs]
    agent.update(r)
    # the clip bound: the gradient left is max_grad_norm long
    clipped = torch.nn.utils.get_total_norm([m.grad for m, _ in pairs])
    assert abs(clipped.item() - args.max_grad_norm) < 1e-5
    assert all(not torch.equal(b, m) for b, (m, _) in zip(before, pairs))  # every tensor moved

    buf = sb3.rollout_buffer
    buf.observations[:] = obs.numpy()
    buf.actions[:] = actions.numpy()
    buf.values[:] = values[..., 0].numpy()
    buf.returns[:] = returns[..., 0].numpy()
    buf.advantages[:] = (returns - values)[..., 0].numpy()
    buf.full, buf.pos = True, T
    sb3.set_logger(configure(str(tmp_path), []))
    sb3.train()

    for mine, theirs in pairs:
        torch.testing.assert_close(mine.grad, theirs.grad, rtol=1e-4, atol=1e-6)
        # RMSprop's first step is ~lr * 10 * sign(g) (7e-3): where g is near its eps, the
        # gradients' last bits (the order of their sums) move a weight by ~1e-7
        torch.testing.assert_close(mine, theirs, rtol=1e-5, atol=1e-6)


def test_acktr_mujoco_recipe_builds_the_papers_kfac():
    """``--recipe acktr`` on MuJoCo: batches of 2,500 steps from one env, GAE (0.99, 0.97) and
    K-FAC with the ACKTR paper's KL clip 0.01 (OpenAI baselines' acktr_cont), K-FAC's step."""
    args = get_args(recipes.recipe("Hopper-v5", "acktr"))
    assert (args.num_processes, args.num_steps, args.use_gae, args.gamma, args.gae_lambda) == (
        1, 2500, True, 0.99, 0.97)
    cfg = config_from_args(args)
    agent = build.make_agent(cfg.algo, make_policy((11,), spaces.Box(-1, 1, (3,), np.float32),
                                                   policy_kwargs(cfg.policy)))
    assert agent.kfac is not None and agent.optimizer is agent.kfac
    assert (agent.kfac.defaults["lr"], agent.kfac.defaults["kl_clip"]) == (0.25, 0.01)
    assert agent.kfac.defaults["damping"] == 1e-2  # K-FAC's default, the paper's
