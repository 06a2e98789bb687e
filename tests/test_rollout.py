"""rollout.py: episode flags -> masks, and ``collect_rollout`` (plain and pipelined) against the
step-by-step loop of the original's main.py written out here."""
import numpy as np
import pytest
import torch

from a2c_ppo_acktr.envs import DummyVecEnv, VecPyTorch, make_env
from a2c_ppo_acktr.model import Policy
from a2c_ppo_acktr.rollout import collect_rollout, episode_masks
from a2c_ppo_acktr.storage import RolloutStorage

T, N = 24, 4
# Short episodes, so that a rollout holds both ends: CartPole's pole falls (terminated) after 8-40
# random steps, the time limit cuts the others at 12 (truncated).
ENV_KWARGS = {"max_episode_steps": 12}
FIELDS = ("obs", "recurrent_hidden_states", "actions", "action_log_probs", "value_preds",
          "rewards", "masks", "bad_masks", "bootstrap_values")

pytestmark = [pytest.mark.usefixtures("one_thread"), pytest.mark.research]


def test_episode_masks_match_a_per_env_reference():
    rng = np.random.default_rng(0)
    terminated, truncated = rng.random(64) < 0.3, rng.random(64) < 0.3
    masks, bad_masks, cut = episode_masks(terminated, truncated)
    assert masks.shape == bad_masks.shape == (64, 1) and masks.dtype == torch.float32
    assert isinstance(cut, np.ndarray) and cut.dtype == np.bool_
    for i in range(64):
        ended = terminated[i] or truncated[i]
        by_clock = truncated[i] and not terminated[i]  # a last allowed step that ends the task
        assert masks[i, 0] == (0.0 if ended else 1.0)
        assert bad_masks[i, 0] == (0.0 if by_clock else 1.0)
        assert cut[i] == by_clock


def test_episode_masks_take_a_device_name():
    """``device`` may be a name, as its hint says (a str failed in ``to_device`` before)."""
    terminated, truncated = np.array([True, False, False]), np.array([False, True, False])
    masks, bad_masks, _ = episode_masks(terminated, truncated, "cpu")
    ref_masks, ref_bad, _ = episode_masks(terminated, truncated, torch.device("cpu"))
    assert masks.device.type == "cpu"
    torch.testing.assert_close(masks, ref_masks)
    torch.testing.assert_close(bad_masks, ref_bad)


def cartpole(first_rank, n):
    """n CartPole envs of ranks first_rank.. (their seeds), torch tensors out, not normalized."""
    fns = [make_env("CartPole-v1", 0, first_rank + i, None, False, env_kwargs=ENV_KWARGS)
           for i in range(n)]
    return VecPyTorch(DummyVecEnv(fns), "cpu")


def storage(envs, policy):
    rollouts = RolloutStorage(T, N, envs.observation_space.shape, envs.action_space,
                              policy.recurrent_hidden_state_size)
    rollouts.obs[0].copy_(envs.reset())
    return rollouts


def reference(policy, envs, groups):
    """The original's loop, one env step at a time, acting on each group of envs in turn (one
    group: all envs at once) -> the tensors it stored, the episode returns seen."""
    obs = torch.zeros(T + 1, N, *envs.observation_space.shape)
    hxs = torch.zeros(T + 1, N, policy.recurrent_hidden_state_size)
    masks, bad_masks = torch.ones(T + 1, N, 1), torch.ones(T + 1, N, 1)
    out = {name: torch.zeros(T, N, 1) for name in ("action_log_probs", "rewards",
                                                   "bootstrap_values")}
    out["value_preds"] = torch.zeros(T + 1, N, 1)
    out["actions"] = torch.zeros(T, N, 1, dtype=torch.long)
    obs[0] = envs.reset()
    returns = []
    for t in range(T):
        actions = []
        for cols in groups:
            with torch.no_grad():
                value, action, log_prob, h = policy.act(obs[t, cols], hxs[t, cols],
                                                        masks[t, cols])
            out["value_preds"][t, cols], out["actions"][t, cols] = value, action
            out["action_log_probs"][t, cols], hxs[t + 1, cols] = log_prob, h
            actions.append(action)
        obs[t + 1], reward, terminated, truncated, infos = envs.step(torch.cat(actions))
        out["rewards"][t] = reward
        for i in range(N):
            masks[t + 1, i] = 0.0 if terminated[i] or truncated[i] else 1.0
            if truncated[i] and not terminated[i]:
                bad_masks[t + 1, i] = 0.0
                with torch.no_grad():
                    out["bootstrap_values"][t, i] = policy.get_value(
                        infos[i]["final_obs"][None], hxs[t + 1, i:i + 1], torch.ones(1, 1))[0]
            if "episode" in infos[i]:
                returns.append(float(infos[i]["episode"]["r"]))
    out.update(obs=obs, recurrent_hidden_states=hxs, masks=masks, bad_masks=bad_masks)
    return out, returns


def assert_same(rollouts, expected):
    for name in FIELDS:
        torch.testing.assert_close(getattr(rollouts, name), expected[name], atol=1e-6, rtol=1e-6,
                                   msg=lambda m, name=name: f"{name}: {m}")


@pytest.mark.parametrize("recurrent", [False, True])
def test_collect_rollout_stores_what_a_step_by_step_loop_stores(recurrent):
    torch.manual_seed(0)
    policy = Policy((4,), cartpole(0, 1).action_space, base_kwargs={"recurrent": recurrent})
    envs = cartpole(0, N)
    rollouts, returns = storage(envs, policy), []
    torch.manual_seed(1)
    collect_rollout(envs, policy, rollouts, returns, use_proper_time_limits=True)
    torch.manual_seed(1)
    expected, expected_returns = reference(policy, cartpole(0, N), [slice(None)])
    assert (expected["masks"] == 0).any() and (expected["bad_masks"] == 0).any()  # both ends
    assert_same(rollouts, expected)
    assert returns == expected_returns and rollouts.step == 0


class TwoGroups:
    """A numpy vector env in two groups of N / 2 envs (two ``DummyVecEnv``), stepped one group
    at a time with ``send`` / ``recv``, as ``AleVecEnv`` with ale-pipelined."""

    num_groups = 2

    def __init__(self):
        self.groups = [cartpole(g * N // 2, N // 2).venv for g in range(2)]
        self.num_envs = N
        self.observation_space = self.groups[0].observation_space
        self.action_space = self.groups[0].action_space
        self.sent = [None, None]

    def reset(self):
        return np.concatenate([g.reset() for g in self.groups])

    def group_slice(self, g):
        return slice(g * N // 2, (g + 1) * N // 2)

    def send(self, actions, g):
        self.sent[g] = actions

    def recv(self, g):
        return self.groups[g].step(self.sent[g])

    def pause(self):
        pass

    def benchmarks(self):
        return [None] * N


def test_pipelined_collect_stores_what_the_loop_stores_acting_per_group():
    torch.manual_seed(0)
    policy = Policy((4,), cartpole(0, 1).action_space)
    envs = VecPyTorch(TwoGroups(), "cpu")
    assert envs.num_groups == 2
    rollouts, returns = storage(envs, policy), []
    torch.manual_seed(1)
    collect_rollout(envs, policy, rollouts, returns, use_proper_time_limits=True)
    torch.manual_seed(1)  # the same envs' seeds (ranks 0..N-1), actions drawn group by group
    groups = [slice(0, N // 2), slice(N // 2, N)]
    expected, expected_returns = reference(policy, cartpole(0, N), groups)
    assert_same(rollouts, expected)
    assert sorted(returns) == sorted(expected_returns) and rollouts.step == 0
