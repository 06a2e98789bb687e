"""The speed seam's mechanisms (a2c_ppo_acktr/speed/) against what they replace, bit for bit:
"optim" against torch.optim's own step, "flat" against the separate tensors, "layers" against
the module calls; and the switch."""
import copy

import numpy as np
import pytest
import torch
import torch.nn as nn
from gymnasium import spaces

from a2c_ppo_acktr import speed
from a2c_ppo_acktr.algo import PPO
from a2c_ppo_acktr.model import Policy
from a2c_ppo_acktr.speed.flat import FlatParams, flatten
from a2c_ppo_acktr.speed.layers import direct_calls
from a2c_ppo_acktr.speed.optim import functional_step

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
# Every way the project builds its optimizers (PPO's fused Adam, A2C's single-tensor RMSprop,
# GAIL's default Adam), and the other implementations of each.
OPTIMIZERS = [
    (torch.optim.Adam, dict(lr=3e-4, eps=1e-5, fused=True)),
    (torch.optim.Adam, dict(lr=3e-4, eps=1e-5, foreach=True)),
    (torch.optim.Adam, dict(lr=3e-4, eps=1e-5, foreach=False)),
    (torch.optim.Adam, dict(lr=1e-3)),
    (torch.optim.RMSprop, dict(lr=7e-4, eps=1e-5, alpha=0.99, foreach=False)),
    (torch.optim.RMSprop, dict(lr=7e-4, eps=1e-5, alpha=0.99, foreach=True)),
]
IDS = [f"{cls.__name__}-{'-'.join(f'{k}={v}' for k, v in kw.items())}" for cls, kw in OPTIMIZERS]


def net(device="cpu"):
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(5, 16), nn.Tanh(), nn.Linear(16, 3),
                         nn.Linear(2, 2)).to(device)  # the last: never a gradient


def train(model, optimizer, steps, seed=1):
    data = torch.Generator().manual_seed(seed)
    for step in range(steps):
        x = torch.randn(32, 5, generator=data).to(next(model.parameters()).device)
        optimizer.zero_grad()
        model[:3](x).pow(2).mean().backward()
        if step == steps // 2:  # a schedule's change, as LinearDecay makes it
            optimizer.param_groups[0]["lr"] *= 0.5
        optimizer.step()


def weights(model):
    return torch.cat([p.detach().flatten().cpu() for p in model.parameters()])


def assert_same_state(a, b):
    a, b = a.state_dict(), b.state_dict()
    assert a["param_groups"] == b["param_groups"] and a["state"].keys() == b["state"].keys()
    for i in a["state"]:
        assert a["state"][i].keys() == b["state"][i].keys()
        for key, x in a["state"][i].items():
            y = b["state"][i][key]
            assert torch.equal(x, y) and x.device == y.device and x.dtype == y.dtype, (i, key)


def test_the_switch_names_the_mechanisms():
    assert speed.mechanisms_from_env("all") == speed.mechanisms_from_env("") == set(speed.MECHANISMS)
    assert speed.mechanisms_from_env("none") == set()
    assert speed.mechanisms_from_env("optim, layers") == {"optim", "layers"}
    with pytest.raises(ValueError, match="unknown mechanism fast"):
        speed.mechanisms_from_env("optim,fast")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("cls, kwargs", OPTIMIZERS, ids=IDS)
def test_functional_step_is_torchs_step(cls, kwargs, device):
    a, b = net(device), net(device)
    fast, plain = cls(a.parameters(), **kwargs), cls(b.parameters(), **kwargs)
    assert functional_step(fast) and "step" in vars(fast)
    train(a, fast, 6)
    train(b, plain, 6)
    assert torch.equal(weights(a), weights(b))
    assert_same_state(fast, plain)
    assert a[3].weight not in fast.state  # no gradient, no state: as torch
    # A checkpoint of either continues in the other.
    fast.load_state_dict(copy.deepcopy(plain.state_dict()))
    train(a, fast, 2, seed=2)
    train(b, plain, 2, seed=2)
    assert torch.equal(weights(a), weights(b))


def test_functional_step_leaves_what_it_does_not_know_to_torch():
    model = net()
    for optimizer in (torch.optim.SGD(model.parameters(), lr=0.1),
                      torch.optim.Adam(model.parameters(), amsgrad=True),
                      type("MyAdam", (torch.optim.Adam,), {})(model.parameters())):
        assert not functional_step(optimizer) and "step" not in vars(optimizer)
    hooked = torch.optim.Adam(model.parameters())
    assert functional_step(hooked)
    seen = []
    hooked.register_step_post_hook(lambda opt, args, kwargs: seen.append(1))
    train(model, hooked, 2)
    assert seen == [1, 1]  # a hook registered later: the step goes through torch's own


def test_flat_params_are_views_that_keep_their_values():
    policy = Policy((3,), spaces.Box(-1, 1, (2,)))
    before = copy.deepcopy(policy.state_dict())
    flat = FlatParams(list(policy.parameters()))
    assert flat.flat.numel() >= sum(p.numel() for p in policy.parameters())
    assert all(torch.equal(before[k], v) for k, v in policy.state_dict().items())
    with torch.no_grad():
        flat.flat.add_(1.0)  # one op moves every parameter
    assert all(torch.equal(before[k] + 1, v) for k, v in policy.state_dict().items())
    policy.zero_grad()  # set_to_none elsewhere: zero_grad links the views again
    flat.zero_grad()
    policy.get_value(torch.ones(4, 3), torch.zeros(4, 1), torch.ones(4, 1)).sum().backward()
    assert flat.grad.abs().sum() > 0  # backward added into the one gradient tensor


@pytest.mark.parametrize("batch", [1, 2, 3, 8])
def test_flat_params_act_as_the_separate_tensors(batch):
    """The views start aligned: a matrix product on a weight that starts elsewhere can round
    differently (on this CPU a (1, 64) action layer on 2 or 3 rows did)."""
    torch.manual_seed(0)
    policy = Policy((3,), spaces.Box(-1, 1, (1,)))
    reference = copy.deepcopy(policy)
    FlatParams(list(policy.parameters()))
    obs, hxs, masks = torch.randn(batch, 3), torch.zeros(batch, 1), torch.ones(batch, 1)
    with torch.inference_mode():
        ours = policy.act(obs, hxs, masks, deterministic=True)
        want = reference.act(obs, hxs, masks, deterministic=True)
    assert all(torch.equal(a, b) for a, b in zip(ours, want))


@pytest.mark.parametrize("max_norm", [0.05, 0.5, float("inf")])
@pytest.mark.parametrize("obs_shape", [(3,), (4, 84, 84)])
def test_flat_clips_as_clip_grad_norm(obs_shape, max_norm):
    torch.manual_seed(0)
    policies = [Policy(obs_shape, spaces.Discrete(2)) for _ in range(2)]
    policies[1].load_state_dict(policies[0].state_dict())
    flat = FlatParams(list(policies[1].parameters()))
    obs = torch.rand(5, *obs_shape) * 255
    actions = torch.tensor([[0], [1], [1], [0], [1]])
    for policy in policies:
        value, log_prob, entropy, _ = policy.evaluate_actions(obs, torch.zeros(5, 1),
                                                              torch.ones(5, 1), actions)
        (value.pow(2).sum() - log_prob.sum() - entropy).backward()
    want = nn.utils.clip_grad_norm_(list(policies[0].parameters()), max_norm)
    assert torch.equal(flat.clip_grad_norm(max_norm), want)
    assert all(torch.equal(p.grad, q.grad) for p, q in zip(*(pol.parameters() for pol in policies)))


def test_the_seam_clips_flat_unless_the_agent_clips_its_own_way():
    class OwnClip(PPO):
        def clip_grad_norm(self):
            return torch.zeros(())
    for cls, shadowed in ((PPO, True), (OwnClip, False)):
        agent = cls(Policy((3,), spaces.Discrete(2)), 0.2, 1, 1, 0.5, 0.0, lr=1e-3, eps=1e-5,
                    max_grad_norm=0.5)
        assert "flat" in speed.speed_up(agent.actor_critic, agent)
        assert ("clip_grad_norm" in vars(agent)) is shadowed


@pytest.mark.parametrize("obs_shape", [(3,), (4, 84, 84)])  # the CNN's: channels_last
@pytest.mark.parametrize("cls, kwargs", [OPTIMIZERS[0], OPTIMIZERS[4], (torch.optim.SGD, {"lr": 0.1})],
                         ids=["Adam", "RMSprop", "SGD"])
def test_flat_steps_as_the_separate_tensors_and_saves_their_state(obs_shape, cls, kwargs):
    torch.manual_seed(0)
    policies = [Policy(obs_shape, spaces.Discrete(2)) for _ in range(2)]
    policies[1].load_state_dict(policies[0].state_dict())
    optimizers = [cls(p.parameters(), **kwargs) for p in policies]
    assert flatten(optimizers[0]) is not None
    obs = torch.randint(0, 255, (6, *obs_shape)).float()

    def step(policy, optimizer):
        optimizer.zero_grad()
        value, log_probs, entropy, _ = policy.evaluate_actions(
            obs, torch.zeros(6, 1), torch.ones(6, 1), torch.ones(6, 1, dtype=torch.long))
        (value.pow(2).mean() - log_probs.mean() - 0.01 * entropy).backward()
        nn.utils.clip_grad_norm_(list(policy.parameters()), 0.5)
        optimizer.step()

    for _ in range(3):
        for policy, optimizer in zip(policies, optimizers):
            step(policy, optimizer)
        assert all(torch.equal(a, b) for a, b in
                   zip(policies[0].parameters(), policies[1].parameters()))
    assert_same_state(optimizers[0], optimizers[1])
    # Resumed: the saved state (separate tensors) loads into either and steps on alike.
    saved = copy.deepcopy(optimizers[1].state_dict())
    for optimizer in optimizers:
        optimizer.load_state_dict(copy.deepcopy(saved))
    for policy, optimizer in zip(policies, optimizers):
        step(policy, optimizer)
    assert all(torch.equal(a, b) for a, b in zip(policies[0].parameters(), policies[1].parameters()))


def test_flat_leaves_k_fac_alone():
    from a2c_ppo_acktr.algo import KFACOptimizer
    assert flatten(KFACOptimizer(Policy((3,), spaces.Discrete(2)))) is None


SPACES = [spaces.Discrete(3), spaces.Box(-1, 1, (2,), np.float32), spaces.MultiBinary(4),
          spaces.MultiDiscrete([3, 2])]


@pytest.mark.parametrize("recurrent", [False, True])
@pytest.mark.parametrize("space", SPACES, ids=lambda s: type(s).__name__)
def test_direct_calls_compute_the_module_calls(space, recurrent):
    torch.manual_seed(0)
    plain = Policy((5,), space, base_kwargs={"recurrent": recurrent})
    fast = copy.deepcopy(plain)
    direct_calls(fast)
    assert type(fast.base.actor[0]) is not nn.Linear and isinstance(fast.base.actor[0], nn.Linear)
    obs, hxs = torch.randn(6, 5), torch.zeros(6, plain.recurrent_hidden_state_size)
    masks = torch.ones(6, 1)

    def outputs(policy):
        torch.manual_seed(1)
        value, action, log_prob, _ = policy.act(obs, hxs, masks)
        value2, log_prob2, entropy, _ = policy.evaluate_actions(obs, hxs, masks, action)
        policy.zero_grad()
        (value2.sum() + log_prob2.sum() + entropy).backward()
        return [value, action, log_prob, value2, log_prob2, entropy,
                *(p.grad.clone() for p in policy.parameters())]

    assert all(torch.equal(a, b) for a, b in zip(outputs(fast), outputs(plain)))


def test_a_hooked_module_is_called_as_a_module():
    seq = nn.Sequential(nn.Linear(4, 3), nn.Tanh())
    direct_calls(nn.ModuleList([seq]))
    seen = []
    seq[0].register_forward_hook(lambda m, i, o: seen.append(o.shape) or o * 0)
    out = seq(torch.randn(2, 4))
    assert seen == [(2, 3)] and torch.equal(out, torch.zeros(2, 3))
