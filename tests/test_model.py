"""Policy: shapes per action space, act/evaluate_actions agreement, GRU masking equals unrolling."""
import copy
import math

import numpy as np
import pytest
import torch
import torch.nn as nn
from gymnasium import spaces

from a2c_ppo_acktr.errors import ConfigError
from a2c_ppo_acktr.model import CNNBase, MLPBase, Policy, make_policy, policy_for, policy_kwargs

pytestmark = pytest.mark.research  # the research tier: what a change to the core needs

SPACES = {
    "discrete": (spaces.Discrete(3), (1,), torch.long),
    "box": (spaces.Box(-1, 1, (2,), np.float32), (2,), torch.float32),
    "multibinary": (spaces.MultiBinary(4), (4,), torch.float32),
    "multidiscrete": (spaces.MultiDiscrete([3, 2, 4]), (3,), torch.long),
}


@pytest.mark.parametrize("kind", SPACES)
@pytest.mark.parametrize("recurrent", [False, True])
def test_act_and_evaluate_agree(kind, recurrent):
    torch.manual_seed(0)
    space, action_shape, dtype = SPACES[kind]
    policy = Policy((5,), space, base_kwargs={"recurrent": recurrent})
    obs = torch.randn(6, 5)
    hxs = torch.zeros(6, policy.recurrent_hidden_state_size)
    masks = torch.ones(6, 1)
    value, action, log_prob, new_hxs = policy.act(obs, hxs, masks)
    assert value.shape == (6, 1) and log_prob.shape == (6, 1)
    assert action.shape == (6, *action_shape) and action.dtype == dtype
    assert new_hxs.shape == hxs.shape
    value2, log_prob2, entropy, _ = policy.evaluate_actions(obs, hxs, masks, action)
    torch.testing.assert_close(value2, value)
    torch.testing.assert_close(log_prob2, log_prob)
    assert entropy.dim() == 0
    torch.testing.assert_close(policy.get_value(obs, hxs, masks), value)


def test_deterministic_action_is_mode():
    torch.manual_seed(0)
    policy = Policy((5,), spaces.Discrete(4))
    obs = torch.randn(3, 5)
    hxs, masks = torch.zeros(3, 1), torch.ones(3, 1)
    _, a1, _, _ = policy.act(obs, hxs, masks, deterministic=True)
    _, a2, _, _ = policy.act(obs, hxs, masks, deterministic=True)
    assert torch.equal(a1, a2)
    features = policy.base(obs, hxs, masks)[1]
    assert torch.equal(a1.squeeze(1), policy.dist.linear(features).argmax(-1))


def test_cnn_policy_on_uint8_frames():
    torch.manual_seed(0)
    policy = Policy((4, 84, 84), spaces.Discrete(6))
    assert isinstance(policy.base, CNNBase)
    obs = torch.randint(0, 256, (2, 4, 84, 84), dtype=torch.uint8)
    value, action, log_prob, _ = policy.act(obs, torch.zeros(2, 1), torch.ones(2, 1))
    assert value.shape == (2, 1) and action.shape == (2, 1)
    torch.testing.assert_close(policy.get_value(obs.float(), torch.zeros(2, 1), torch.ones(2, 1)), value)


def test_orthogonal_init():
    base = MLPBase(5)
    w = base.actor[2].weight.detach()  # square 64x64 layer: W W^T = gain^2 I
    torch.testing.assert_close(w @ w.T, 2.0 * torch.eye(64), atol=1e-4, rtol=0)
    assert torch.count_nonzero(base.actor[0].bias) == 0


def test_unsupported_spaces_are_refused():
    with pytest.raises(ValueError, match="observation shape"):
        Policy((2, 3), spaces.Discrete(2))
    with pytest.raises(ValueError, match="action space"):
        Policy((3,), spaces.Tuple([spaces.Discrete(2)]))


@pytest.mark.parametrize("base_cls,obs_shape", [(MLPBase, (5,)), (CNNBase, (1, 84, 84))])
def test_gru_over_rollout_equals_step_by_step(base_cls, obs_shape):
    """One call over T*N time-major inputs with episode starts must equal stepping T times."""
    torch.manual_seed(0)
    T, N = 7, 3
    base = base_cls(obs_shape[0], recurrent=True, hidden_size=16 if base_cls is MLPBase else 32)
    x = torch.rand(T, N, *obs_shape) * (255 if base_cls is CNNBase else 1)
    masks = torch.ones(T, N, 1)
    masks[2, 0] = 0  # env 0 starts a new episode at step 2
    masks[5, 1] = 0
    masks[5, 2] = 0
    masks[0, 2] = 0
    h0 = torch.randn(N, base.recurrent_hidden_state_size)

    values, feats, h_final = base(x.view(T * N, *obs_shape), h0, masks.view(T * N, 1))

    h = h0
    step_values, step_feats = [], []
    for t in range(T):
        v, f, h = base(x[t], h, masks[t])
        step_values.append(v)
        step_feats.append(f)
    torch.testing.assert_close(values, torch.cat(step_values), atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(feats, torch.cat(step_feats), atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(h_final, h, atol=1e-5, rtol=1e-4)


def test_gru_state_is_reset_by_mask():
    torch.manual_seed(0)
    base = MLPBase(5, recurrent=True, hidden_size=8)
    x = torch.randn(2, 5)
    _, _, h_zero = base(x, torch.zeros(2, 8), torch.ones(2, 1))
    _, _, h_masked = base(x, torch.randn(2, 8), torch.zeros(2, 1))
    torch.testing.assert_close(h_masked, h_zero)


def test_cnn_base_channels_last_equals_plain_nature_cnn():
    """The channels-last layout is a speed choice only: same outputs as the same layers run on
    contiguous (NCHW) tensors, so checkpoints and feature order are unchanged."""
    torch.manual_seed(0)
    base = CNNBase(4, hidden_size=512)
    plain = copy.deepcopy(base.main).to(memory_format=torch.contiguous_format)
    obs = torch.randint(0, 256, (5, 4, 84, 84), dtype=torch.uint8)
    value, features, _ = base(obs, torch.zeros(5, 1), torch.ones(5, 1))
    expected = plain(obs.float() / 255.0)
    assert all(not p.is_contiguous() for p in base.main.parameters() if p.dim() == 4)
    torch.testing.assert_close(features, expected, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(value, base.critic_linear(expected), rtol=1e-4, atol=1e-5)


def test_hidden_size_and_activation():
    policy = Policy((5,), spaces.Discrete(2), base_kwargs={"hidden_size": 32, "activation": "relu"})
    for tower in (policy.base.actor, policy.base.critic):
        assert [m.out_features for m in tower if isinstance(m, nn.Linear)] == [32, 32]
        assert [type(m) for m in tower if not isinstance(m, nn.Linear)] == [nn.ReLU, nn.ReLU]
    assert [type(m) for m in Policy((5,), spaces.Discrete(2)).base.actor][1] is nn.Tanh
    cnn = Policy((4, 84, 84), spaces.Discrete(2), base_kwargs={"activation": "tanh"})
    assert nn.ReLU not in {type(m) for m in cnn.base.main}


def test_log_std_init_sets_initial_std():
    policy = Policy((3,), spaces.Box(-1, 1, (2,), np.float32), log_std_init=-2.0)
    dist = policy.dist(torch.zeros(1, policy.base.output_size))
    torch.testing.assert_close(dist.logstd.exp(), torch.full((2,), math.exp(-2.0)))


def test_default_init_is_pytorch_not_orthogonal():
    torch.manual_seed(0)
    policy = Policy((5,), spaces.Discrete(2), init="default")
    w = policy.base.actor[2].weight.detach()
    # PyTorch's Linear init: uniform within 1/sqrt(fan_in), biases not zero, rows not orthogonal.
    assert w.abs().max() <= 1 / math.sqrt(64) and torch.count_nonzero(policy.base.actor[0].bias) > 0
    assert not torch.allclose(w @ w.T, 2.0 * torch.eye(64), atol=1e-2)
    with pytest.raises(ValueError, match="unknown init"):
        Policy((5,), spaces.Discrete(2), init="xavier")


def test_policy_kwargs_from_flags_defaults_keep_the_original_network():
    from a2c_ppo_acktr.settings.arguments import get_config
    default = policy_kwargs(get_config(["--env-name", "CartPole-v1"]).policy)
    assert default == {"base_kwargs": {"recurrent": False}, "log_std_init": 0.0,
                       "init": "orthogonal", "action_mean_gain": 1.0}
    tuned = policy_kwargs(get_config(["--hidden-size", "256", "--activation", "relu",
                                      "--log-std-init", "-2", "--init", "default"]).policy)
    assert tuned == {"base_kwargs": {"recurrent": False, "hidden_size": 256, "activation": "relu"},
                     "log_std_init": -2.0, "init": "default", "action_mean_gain": 1.0}
    small = policy_kwargs(get_config(["--action-mean-gain", "0.01"]).policy)
    assert small["action_mean_gain"] == 0.01 and small["init"] == "orthogonal"


@pytest.mark.parametrize("gain", [1.0, 0.01])
def test_action_mean_gain_scales_the_orthogonal_mean_layer(gain):
    """The Gaussian mean layer's rows are orthogonal with norm ``gain`` (torch.nn.init.orthogonal_
    semantics), its bias zero; the other layers keep the original's init."""
    torch.manual_seed(0)
    policy = Policy((11,), spaces.Box(-1, 1, (3,), np.float32), action_mean_gain=gain)
    w = policy.dist.fc_mean.weight.detach()
    torch.testing.assert_close(w @ w.T, gain ** 2 * torch.eye(3), atol=1e-6 * gain ** 2 + 1e-7,
                               rtol=1e-4)
    assert not policy.dist.fc_mean.bias.any()
    torch.manual_seed(0)
    original = Policy((11,), spaces.Box(-1, 1, (3,), np.float32))
    torch.testing.assert_close(policy.base.actor[0].weight, original.base.actor[0].weight)
    with pytest.raises(ValueError, match="orthogonal init"):
        Policy((11,), spaces.Box(-1, 1, (3,), np.float32), init="default", action_mean_gain=0.01)


def test_make_policy_builds_what_the_kwargs_say_and_refuses_unknown_ones():
    kwargs = {"base_kwargs": {"recurrent": True, "hidden_size": 16, "activation": "relu"},
              "log_std_init": -1.0, "init": "orthogonal", "action_mean_gain": 0.01}
    torch.manual_seed(0)
    policy = make_policy((5,), spaces.Box(-1, 1, (2,), np.float32), kwargs, "cpu")
    torch.manual_seed(0)
    direct = Policy((5,), spaces.Box(-1, 1, (2,), np.float32), **kwargs)
    assert policy.state_dict().keys() == direct.state_dict().keys()
    for name, value in direct.state_dict().items():
        torch.testing.assert_close(policy.state_dict()[name], value)
    assert policy.recurrent_hidden_state_size == 16 and bool(policy.dist.logstd.eq(-1.0).all())
    assert all(p.device.type == "cpu" for p in policy.parameters())
    with pytest.raises(ConfigError, match=r"policy settings this version does not know "
                                          r"\(action_noise, base_depth\)"):
        make_policy((5,), spaces.Discrete(2), {**kwargs, "base_depth": 3, "action_noise": 0.1})


def test_policy_for_builds_the_network_the_flags_describe_for_the_spaces():
    """The run's, the async sampler's and the Ray actors' policy: ``make_policy`` of the flags'
    ``policy_kwargs`` on the observation space's shape, in the flags' precision."""
    from a2c_ppo_acktr.settings.arguments import get_config
    cfg = get_config(["--hidden-size", "16", "--activation", "relu", "--log-std-init", "-1"]).policy
    obs, act = spaces.Box(-1, 1, (5,), np.float32), spaces.Box(-1, 1, (2,), np.float32)
    torch.manual_seed(0)
    policy = policy_for(obs, act, cfg)
    torch.manual_seed(0)
    direct = Policy((5,), act, **policy_kwargs(cfg))
    for name, value in direct.state_dict().items():
        torch.testing.assert_close(policy.state_dict()[name], value, rtol=0, atol=0)
    assert policy.base.actor[0].out_features == 16 and isinstance(policy.base.actor[1], nn.ReLU)
    assert policy.precision == cfg.precision == "fp32"


class DropoutMLPBase(MLPBase):
    """A researcher's MLP setting (``dropout``), as its flag would give it in ``base_kwargs``."""

    def __init__(self, num_inputs: int, dropout: float = 0.0, **kwargs) -> None:
        super().__init__(num_inputs, **kwargs)
        self.dropout = dropout


def test_a_setting_of_one_base_given_to_another_is_one_line_naming_flag_and_base(monkeypatch):
    import a2c_ppo_acktr.model as model

    monkeypatch.setattr(model, "MLPBase", DropoutMLPBase)
    kwargs = {"base_kwargs": {"recurrent": False, "dropout": 0.1, "hidden_size": 32}}
    assert make_policy((4,), spaces.Discrete(2), kwargs).base.dropout == 0.1  # the MLP takes it
    with pytest.raises(ConfigError) as e:  # the CNN, on images, does not: no TypeError
        make_policy((4, 84, 84), spaces.Discrete(2), kwargs)
    assert str(e.value) == ("--dropout: not taken by CNNBase, the base for observations of shape "
                            "(4, 84, 84)")


def test_layer_norm_normalizes_each_hidden_layer_before_its_activation():
    """--layer-norm: each tower is Linear, LayerNorm, tanh, twice; its output is F.layer_norm's
    of the linear maps, computed by hand."""
    torch.manual_seed(0)
    base = MLPBase(5, hidden_size=8, layer_norm=True)
    kinds = [type(m) for m in base.actor]
    assert kinds == [nn.Linear, nn.LayerNorm, nn.Tanh, nn.Linear, nn.LayerNorm, nn.Tanh]
    x = torch.randn(3, 5)
    h = x
    for linear in (base.actor[0], base.actor[3]):
        h = torch.tanh(nn.functional.layer_norm(linear(h), (8,)))
    torch.testing.assert_close(base(x, torch.zeros(3, 1), torch.ones(3, 1))[1], h)
    from a2c_ppo_acktr.settings.arguments import get_config
    assert policy_kwargs(get_config(["--layer-norm"]).policy)["base_kwargs"]["layer_norm"] is True


def test_layer_norm_on_images_is_one_line():
    with pytest.raises(ConfigError, match="--layer-norm: not taken by CNNBase"):
        make_policy((4, 84, 84), spaces.Discrete(2),
                    {"base_kwargs": {"recurrent": False, "layer_norm": True}})


def test_rpo_noise_shifts_the_gaussian_mean_by_uniform_noise_in_evaluate_actions():
    """evaluate_actions(mean_noise=A): torch.distributions.Normal(mean + U(-A, A), std)'s
    log-probabilities, the noise drawn from the generator given; 0 leaves them as they were."""
    torch.manual_seed(0)
    policy = Policy((4,), spaces.Box(-1, 1, (2,), np.float32), log_std_init=-0.5)
    obs, actions = torch.randn(6, 4), torch.randn(6, 2)
    hxs, masks = torch.zeros(6, 1), torch.ones(6, 1)
    _, plain, _, _ = policy.evaluate_actions(obs, hxs, masks, actions)
    _, noisy, _, _ = policy.evaluate_actions(obs, hxs, masks, actions, 0.5,
                                             torch.Generator().manual_seed(3))
    _, features, _ = policy.forward_base(obs, hxs, masks)
    mean, std = policy.dist.fc_mean(features), policy.dist.logstd.exp()
    noise = torch.empty_like(mean).uniform_(-0.5, 0.5, generator=torch.Generator().manual_seed(3))
    for out, shift in ((plain, 0.0), (noisy, noise)):
        expected = torch.distributions.Normal(mean + shift, std).log_prob(actions).sum(-1, keepdim=True)
        torch.testing.assert_close(out, expected)
    assert not torch.allclose(plain, noisy) and noise.abs().max() <= 0.5
