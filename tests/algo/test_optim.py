"""algo/optim.py's Adam and RMSprop against torch.optim's: the same weights bit for bit, the same
state dicts, each loading the other's."""
import copy

import pytest
import torch

from a2c_ppo_acktr.algo.optim import Adam, RMSprop

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
# (ours, torch's, keyword arguments): every way the project builds them, and the defaults.
PAIRS = [
    (Adam, torch.optim.Adam, dict(lr=3e-4, eps=1e-5, fused=True)),
    (Adam, torch.optim.Adam, dict(lr=3e-4, eps=1e-5, foreach=True)),
    (Adam, torch.optim.Adam, dict(lr=3e-4, eps=1e-5, foreach=False)),
    (Adam, torch.optim.Adam, dict(lr=1e-3)),
    (RMSprop, torch.optim.RMSprop, dict(lr=7e-4, eps=1e-5, alpha=0.99, foreach=False)),
    (RMSprop, torch.optim.RMSprop, dict(lr=7e-4, eps=1e-5, alpha=0.99, foreach=True)),
]
IDS = [f"{ours.__name__}-{'-'.join(f'{k}={v}' for k, v in kw.items())}" for ours, _, kw in PAIRS]


def net(device):
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(5, 16), torch.nn.Tanh(), torch.nn.Linear(16, 3),
                               torch.nn.Linear(2, 2)).to(device)  # the last: never a gradient


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


def assert_same_state(ours, theirs):
    a, b = ours.state_dict(), theirs.state_dict()
    assert a["param_groups"] == b["param_groups"]
    assert a["state"].keys() == b["state"].keys()
    for i in a["state"]:
        assert a["state"][i].keys() == b["state"][i].keys()
        for key in a["state"][i]:
            x, y = a["state"][i][key], b["state"][i][key]
            assert torch.equal(x, y) and x.device == y.device and x.dtype == y.dtype, (i, key)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("ours, theirs, kwargs", PAIRS, ids=IDS)
def test_steps_and_state_equal_torchs(ours, theirs, kwargs, device):
    if kwargs.get("fused") and device == "cpu" and not hasattr(torch, "_fused_adam_"):
        pytest.skip("this torch has no fused Adam on the CPU")
    a, b = net(device), net(device)
    opt_a, opt_b = ours(a.parameters(), **kwargs), theirs(b.parameters(), **kwargs)
    assert_same_state(opt_a, opt_b)  # before any step: no state, the same groups
    train(a, opt_a, 6)
    train(b, opt_b, 6)
    assert torch.equal(weights(a), weights(b))
    assert_same_state(opt_a, opt_b)
    assert a[3].weight not in opt_a.state  # no gradient, no state: as torch


@pytest.mark.parametrize("ours, theirs, kwargs", PAIRS, ids=IDS)
def test_each_loads_the_others_state_and_steps_on_as_it(ours, theirs, kwargs):
    """A checkpoint of either continues in the other bit for bit: old checkpoints (torch.optim's)
    resume here, and ours load into torch.optim."""
    models = [net("cpu") for _ in range(4)]
    first = [ours(models[0].parameters(), **kwargs), theirs(models[1].parameters(), **kwargs)]
    train(models[0], first[0], 4)
    train(models[1], first[1], 4)
    # The other class, with another lr (the saved one, halved at step 2, must replace it).
    second = [theirs(models[2].parameters(), lr=0.5), ours(models[3].parameters(), lr=0.5)]
    for model, opt, old_model, old_opt in zip(models[2:], second, models[:2], first):
        model.load_state_dict(old_model.state_dict())
        opt.load_state_dict(copy.deepcopy(old_opt.state_dict()))
        assert opt.param_groups[0]["lr"] == kwargs["lr"] * 0.5
        assert_same_state(opt, old_opt) if isinstance(opt, ours) else assert_same_state(old_opt, opt)
    for model, opt in zip(models, first + second):
        train(model, opt, 4, seed=2)
    assert torch.equal(weights(models[0]), weights(models[1]))
    assert torch.equal(weights(models[0]), weights(models[2]))
    assert torch.equal(weights(models[0]), weights(models[3]))


def test_a_state_of_another_size_is_refused():
    small, large = net("cpu"), torch.nn.Linear(5, 5)
    opt = Adam(small.parameters())
    with pytest.raises(ValueError, match="doesn't match the size"):
        opt.load_state_dict(torch.optim.Adam(large.parameters()).state_dict())
    with pytest.raises(ValueError, match="empty parameter list"):
        Adam([])


def test_zero_grad_zeroes_in_place_or_drops_the_gradients():
    model = net("cpu")
    opt = RMSprop(model.parameters())
    train(model, opt, 1)
    grad = model[0].weight.grad
    opt.zero_grad(set_to_none=False)
    assert model[0].weight.grad is grad and not grad.any()
    opt.zero_grad()
    assert all(p.grad is None for p in model.parameters())
    before = weights(model)
    opt.step()  # no gradient anywhere: nothing moves, as in torch
    assert torch.equal(weights(model), before)
