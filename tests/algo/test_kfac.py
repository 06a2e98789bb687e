"""KFACOptimizer against explicit formulas: the Kronecker factors are the covariances of the
recorded inputs (with a ones column for the bias) and output gradients, and one step is the damped
dense solve ``(A ⊗ G + damping I)^-1 vec(grad)``. float64 throughout for tight tolerances."""
import io

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from a2c_ppo_acktr.algo import kfac
from a2c_ppo_acktr.algo.kfac import KFACOptimizer

DAMPING = 1e-2


def ones_col(a):
    return torch.cat([a, torch.ones(a.size(0), 1, dtype=a.dtype)], dim=1)


def dense_natural_gradient(A, G, weight_grad, bias_grad, damping):
    """(A ⊗ G + damping I)^-1 vec(M), M = [dW, db] (out, in+1), vec stacking M's columns."""
    M = torch.cat([weight_grad.reshape(weight_grad.size(0), -1), bias_grad.unsqueeze(1)], dim=1)
    eye = torch.eye(A.size(0) * G.size(0), dtype=A.dtype)
    v = torch.linalg.solve(torch.kron(A, G) + damping * eye, M.t().reshape(-1))
    V = v.reshape(M.size(1), M.size(0)).t()
    return V[:, :-1].reshape(weight_grad.shape), V[:, -1]


def take_plain_step(model, opt, x):
    """A loss unrelated to the Fisher pass; momentum 0, lr 1, no KL clip: the step is -v."""
    before = [p.detach().clone() for p in model.parameters()]
    opt.zero_grad()
    model(x).pow(2).sum().div(len(x)).backward()
    grads = [p.grad.clone() for p in model.parameters()]
    opt.step()
    steps = [b - p.detach() for b, p in zip(before, model.parameters())]
    return grads, steps


def make_opt(model, **kw):
    kw = {"lr": 1.0, "momentum": 0.0, "kl_clip": 1e30, "damping": DAMPING, **kw}
    return KFACOptimizer(model, **kw)


def test_linear_factors_and_step_match_dense_solve():
    torch.manual_seed(0)
    l1, l2 = nn.Linear(3, 4).double(), nn.Linear(4, 2).double()
    model = nn.Sequential(l1, nn.Tanh(), l2)
    opt = make_opt(model)
    N = 7
    x = torch.randn(N, 3, dtype=torch.float64)
    target = torch.randn(N, 2, dtype=torch.float64)

    opt.acc_stats = True
    pre = l1(x)
    pre.retain_grad()
    h = torch.tanh(pre)
    out = l2(h)
    out.retain_grad()
    (out - target).pow(2).sum(1).mean().backward()
    opt.acc_stats = False

    # Explicit factors: A = E[[a,1][a,1]^T]; G = N * sum g g^T (the loss is a batch mean).
    A1, A2 = ones_col(x).t() @ ones_col(x) / N, ones_col(h).t() @ ones_col(h) / N
    G1, G2 = N * pre.grad.t() @ pre.grad, N * out.grad.t() @ out.grad
    for m, A, G in ((l1, A1, G1), (l2, A2, G2)):
        torch.testing.assert_close(opt.state[m.weight]["m_aa"], A.detach())
        torch.testing.assert_close(opt.state[m.weight]["m_gg"], G.detach())

    grads, steps = take_plain_step(model, opt, torch.randn(N, 3, dtype=torch.float64))
    for i, (A, G) in enumerate(((A1, G1), (A2, G2))):
        vw, vb = dense_natural_gradient(A.detach(), G.detach(), grads[2 * i], grads[2 * i + 1],
                                        DAMPING)
        torch.testing.assert_close(steps[2 * i], vw, rtol=1e-8, atol=1e-10)
        torch.testing.assert_close(steps[2 * i + 1], vb, rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize("chunk", [kfac.PATCH_CHUNK, 2 * 9 * 18])  # the batch whole; 2 samples a chunk
def test_conv_factors_and_step_match_explicit_patches(chunk, monkeypatch):
    monkeypatch.setattr(kfac, "PATCH_CHUNK", chunk)
    torch.manual_seed(1)
    conv = nn.Conv2d(2, 3, 3, stride=2, padding=1).double()
    lin = nn.Linear(3 * 3 * 3, 2).double()
    model = nn.Sequential(conv, nn.ReLU(), nn.Flatten(), lin)
    opt = make_opt(model)
    N = 5
    x = torch.randn(N, 2, 6, 6, dtype=torch.float64)

    opt.acc_stats = True
    y = conv(x)
    y.retain_grad()
    lin(F.relu(y).flatten(1)).pow(2).sum(1).mean().backward()
    opt.acc_stats = False

    # Explicit patches, one row per output position, in the weight's (C, kh, kw) order.
    xp = F.pad(x, (1, 1, 1, 1))
    oh, ow = y.shape[2:]
    spatial = oh * ow
    rows = [xp[:, :, 2 * i:2 * i + 3, 2 * j:2 * j + 3].reshape(N, -1)
            for i in range(oh) for j in range(ow)]
    a = ones_col(torch.cat(rows)) / spatial
    A = a.t() @ a / N
    g = y.grad.permute(0, 2, 3, 1).reshape(-1, 3) * spatial * N
    G = g.t() @ g / (N * spatial)
    torch.testing.assert_close(opt.state[conv.weight]["m_aa"], A)
    torch.testing.assert_close(opt.state[conv.weight]["m_gg"], G)

    grads, steps = take_plain_step(model, opt, torch.randn(N, 2, 6, 6, dtype=torch.float64))
    vw, vb = dense_natural_gradient(A, G, grads[0], grads[1], DAMPING)
    torch.testing.assert_close(steps[0], vw, rtol=1e-8, atol=1e-10)
    torch.testing.assert_close(steps[1], vb, rtol=1e-8, atol=1e-10)


def test_split_bias_gives_each_bias_a_block_of_its_own():
    """``split_bias``, the original's SplitBias: the weight's A without the ones column; the bias's
    block has A = 1 and G of its per-sample gradients (a conv's output gradient summed over
    positions, times N); each block solved on its own."""
    torch.manual_seed(6)
    conv = nn.Conv2d(2, 3, 3, stride=2, padding=1).double()
    lin = nn.Linear(3 * 3 * 3, 2).double()
    model = nn.Sequential(conv, nn.ReLU(), nn.Flatten(), lin)
    opt = make_opt(model, split_bias=True)
    N = 5
    x = torch.randn(N, 2, 6, 6, dtype=torch.float64)

    opt.acc_stats = True
    y = conv(x)
    y.retain_grad()
    h = F.relu(y).flatten(1)
    out = lin(h)
    out.retain_grad()
    out.pow(2).sum(1).mean().backward()
    opt.acc_stats = False

    xp = F.pad(x, (1, 1, 1, 1))
    spatial = y.shape[2] * y.shape[3]
    rows = torch.cat([xp[:, :, 2 * i:2 * i + 3, 2 * j:2 * j + 3].reshape(N, -1)
                      for i in range(y.shape[2]) for j in range(y.shape[3])]) / spatial
    g = y.grad.permute(0, 2, 3, 1).reshape(-1, 3) * spatial * N
    gb = y.grad.sum((2, 3)) * N  # each sample's bias gradient, scaled back up by N
    blocks = {conv: (rows.t() @ rows / N, g.t() @ g / (N * spatial), gb.t() @ gb / N),
              lin: (h.t() @ h / N, N * out.grad.t() @ out.grad, N * out.grad.t() @ out.grad)}
    for m, (A, G, Gb) in blocks.items():
        torch.testing.assert_close(opt.state[m.weight]["m_aa"], A.detach())
        torch.testing.assert_close(opt.state[m.weight]["m_gg"], G.detach())
        torch.testing.assert_close(opt.state[m.bias]["m_gg"], Gb.detach())

    grads, steps = take_plain_step(model, opt, torch.randn(N, 2, 6, 6, dtype=torch.float64))
    for i, (A, G, Gb) in enumerate(blocks.values()):
        A, G, Gb = A.detach(), G.detach(), Gb.detach()
        dW = grads[2 * i].reshape(G.size(0), -1)
        eye = torch.eye(A.size(0) * G.size(0), dtype=A.dtype)
        vw = torch.linalg.solve(torch.kron(A, G) + DAMPING * eye, dW.t().reshape(-1))
        vw = vw.reshape(dW.size(1), dW.size(0)).t().reshape(grads[2 * i].shape)
        vb = torch.linalg.solve(Gb + DAMPING * torch.eye(Gb.size(0), dtype=Gb.dtype),
                                grads[2 * i + 1])
        torch.testing.assert_close(steps[2 * i], vw, rtol=1e-8, atol=1e-10)
        torch.testing.assert_close(steps[2 * i + 1], vb, rtol=1e-8, atol=1e-10)


def accumulate(model, opt, x):
    opt.acc_stats = True
    model(x).pow(2).sum(1).mean().backward()
    opt.acc_stats = False


def test_running_average_and_hooks_only_record_under_acc_stats():
    torch.manual_seed(2)
    lin = nn.Linear(3, 2).double()
    opt = make_opt(lin, stat_decay=0.9)
    x1, x2 = torch.randn(5, 3, dtype=torch.float64), torch.randn(6, 3, dtype=torch.float64)
    lin(x1).sum().backward()  # acc_stats False: nothing recorded
    assert "m_aa" not in opt.state[lin.weight]
    accumulate(lin, opt, x1)
    accumulate(lin, opt, x2)
    A = lambda x: ones_col(x).t() @ ones_col(x) / len(x)  # noqa: E731
    torch.testing.assert_close(opt.state[lin.weight]["m_aa"], 0.9 * A(x1) + 0.1 * A(x2))


def test_kl_clip_bounds_the_step():
    """Clipped step = nu * unclipped step, lr^2 nu^2 v^T grad = kl_clip (v: the natural grad)."""
    x = torch.randn(8, 3, dtype=torch.float64)
    results, reported = [], []
    for kl_clip in (1e30, 1e-6):
        torch.manual_seed(3)
        lin = nn.Linear(3, 2).double()
        opt = make_opt(lin, lr=0.25, kl_clip=kl_clip)
        accumulate(lin, opt, x)
        results.append(take_plain_step(lin, opt, x))
        reported.append(opt.nu)
    (grads, free), (_, clipped) = results
    v = [s / 0.25 for s in free]
    nu = (clipped[0] / free[0]).flatten()
    torch.testing.assert_close(nu, torch.full_like(nu, nu[0].item()))
    assert 0 < nu[0] < 1
    # opt.nu (ACKTR's logged kl_clip_scale) is the factor the step was scaled by
    assert reported == [1.0, pytest.approx(nu[0].item(), rel=1e-9)]
    kl = nu[0] ** 2 * 0.25 ** 2 * sum((vi * g).sum() for vi, g in zip(v, grads))
    assert kl.item() == pytest.approx(1e-6, rel=1e-9)


class WithLogStd(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 2)
        self.logstd = nn.Parameter(torch.zeros(2))

    def forward(self, x):
        return self.fc(x) * self.logstd.exp()


def test_other_parameters_get_the_plain_gradient():
    torch.manual_seed(4)
    model = WithLogStd().double()
    opt = make_opt(model)
    x = torch.randn(8, 3, dtype=torch.float64)
    accumulate(model, opt, x)
    before = model.logstd.detach().clone()
    opt.zero_grad()
    model(x).pow(2).sum(1).mean().backward()
    grad = model.logstd.grad.clone()
    opt.step()
    assert grad.abs().min() > 0
    torch.testing.assert_close(before - model.logstd.detach(), grad)


def test_state_dict_round_trips_through_weights_only_load():
    torch.manual_seed(5)

    def build():
        torch.manual_seed(5)
        return nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2))

    model, x = build(), torch.randn(8, 3)
    opt = KFACOptimizer(model, Tf=3)
    for _ in range(4):  # momentum buffers, running factors and a stale eigenbasis (4 % 3 != 0)
        accumulate(model, opt, x)
        opt.zero_grad()
        model(x).pow(2).sum(1).mean().backward()
        opt.step()
    buf = io.BytesIO()
    torch.save(opt.state_dict(), buf)
    buf.seek(0)
    loaded = torch.load(buf, weights_only=True)

    model2 = build()
    model2.load_state_dict(model.state_dict())
    opt2 = KFACOptimizer(model2, Tf=3)
    opt2.load_state_dict(loaded)
    assert opt2.steps == 4
    for m in (model, model2):  # the same next step on both: identical parameters
        o = opt if m is model else opt2
        o.zero_grad()
        m(x).pow(2).sum(1).mean().backward()
        o.step()
    for p, q in zip(model.parameters(), model2.parameters()):
        torch.testing.assert_close(p, q, rtol=0, atol=0)


def test_predicted_kl_is_the_dense_quadratic_form_and_sets_nu():
    """natural_gradient() / predicted_kl(): lr^2 vec(g)^T (A ⊗ G + damping I)^-1 vec(g) from
    the dense solve, without stepping; step() clips with that same figure."""
    torch.manual_seed(4)
    lin = nn.Linear(3, 2).double()
    opt = make_opt(lin, lr=0.25, kl_clip=1e-6)
    x = torch.randn(8, 3, dtype=torch.float64)
    accumulate(lin, opt, x)
    opt.zero_grad()
    lin(x).pow(2).sum().div(len(x)).backward()
    state = opt.state[lin.weight]
    vw, vb = dense_natural_gradient(state["m_aa"], state["m_gg"], lin.weight.grad, lin.bias.grad,
                                    DAMPING)
    dense = 0.25 ** 2 * ((vw * lin.weight.grad).sum() + (vb * lin.bias.grad).sum()).item()
    before = [p.detach().clone() for p in lin.parameters()]
    predicted = opt.predicted_kl(opt.natural_gradient())
    assert predicted == pytest.approx(dense, rel=1e-9)
    assert opt.steps == 0 and all(torch.equal(b, p) for b, p in zip(before, lin.parameters()))
    opt.step()
    assert opt.nu == pytest.approx(min(1.0, (1e-6 / dense) ** 0.5), rel=1e-9)
