"""Action heads against torch.distributions, the independent reference."""
import pytest
import torch
import torch.distributions as D

from a2c_ppo_acktr.distributions import Bernoulli, Categorical, DiagGaussian, MultiCategorical

pytestmark = pytest.mark.research  # the research tier: what a change to the core needs


@pytest.fixture(autouse=True)
def seed():
    torch.manual_seed(0)


def test_categorical_matches_torch():
    head = Categorical(8, 5)
    x = torch.randn(32, 8) * 50  # large features -> far-from-uniform logits
    dist = head(x)
    ref = D.Categorical(logits=head.linear(x))
    actions = torch.randint(0, 5, (32, 1))
    torch.testing.assert_close(dist.log_probs(actions), ref.log_prob(actions.squeeze(1)).unsqueeze(1))
    torch.testing.assert_close(dist.entropy(), ref.entropy())
    assert torch.equal(dist.mode().squeeze(1), ref.probs.argmax(-1))
    assert dist.sample().shape == (32, 1) and dist.sample().dtype == torch.long


def test_categorical_sampling_frequencies():
    logits = torch.tensor([[0.0, 1.0, 2.0]]).expand(20000, 3)
    from a2c_ppo_acktr.distributions import CategoricalDist
    counts = torch.bincount(CategoricalDist(logits).sample().squeeze(1), minlength=3).float()
    torch.testing.assert_close(counts / counts.sum(), torch.softmax(logits[0], -1), atol=0.015, rtol=0)


def test_diag_gaussian_matches_torch():
    head = DiagGaussian(8, 3)
    with torch.no_grad():
        head.logstd.copy_(torch.tensor([-1.0, 0.0, 0.5]))
    x = torch.randn(16, 8)
    dist = head(x)
    ref = D.Independent(D.Normal(head.fc_mean(x), head.logstd.exp()), 1)
    actions = torch.randn(16, 3)
    torch.testing.assert_close(dist.log_probs(actions), ref.log_prob(actions).unsqueeze(1))
    torch.testing.assert_close(dist.entropy(), ref.entropy())
    torch.testing.assert_close(dist.mode(), ref.mean)
    samples = head(x[:1].expand(50000, 8)).sample()
    torch.testing.assert_close(samples.std(0), head.logstd.exp().detach(), atol=0.02, rtol=0.02)


def test_bernoulli_matches_torch():
    head = Bernoulli(8, 4)
    x = torch.randn(16, 8) * 3
    dist = head(x)
    ref = D.Independent(D.Bernoulli(logits=head.linear(x)), 1)
    actions = torch.randint(0, 2, (16, 4)).float()
    torch.testing.assert_close(dist.log_probs(actions), ref.log_prob(actions).unsqueeze(1))
    torch.testing.assert_close(dist.entropy(), ref.entropy())
    torch.testing.assert_close(dist.mode(), (ref.mean > 0.5).float())
    assert set(dist.sample().unique().tolist()) <= {0.0, 1.0}


def test_multicategorical_matches_torch():
    """SB3's MultiDiscrete semantics: independent categoricals, log-probs and entropies summed."""
    head = MultiCategorical(8, [3, 5, 2])
    x = torch.randn(32, 8) * 50
    dist = head(x)
    refs = [D.Categorical(logits=part) for part in torch.split(head.linear(x), [3, 5, 2], -1)]
    actions = torch.stack([torch.randint(0, n, (32,)) for n in (3, 5, 2)], -1)
    torch.testing.assert_close(
        dist.log_probs(actions),
        sum(r.log_prob(actions[:, d]) for d, r in enumerate(refs)).unsqueeze(1))
    torch.testing.assert_close(dist.entropy(), sum(r.entropy() for r in refs))
    assert torch.equal(dist.mode(), torch.stack([r.probs.argmax(-1) for r in refs], -1))
    sample = dist.sample()
    assert sample.shape == (32, 3) and sample.dtype == torch.long
    assert all(0 <= sample[:, d].min() and sample[:, d].max() < n for d, n in enumerate((3, 5, 2)))


def test_multicategorical_sampling_frequencies():
    head = MultiCategorical(2, [3, 2])
    with torch.no_grad():
        head.linear.weight.zero_()
        head.linear.bias.copy_(torch.tensor([0.0, 1.0, 2.0, -1.0, 1.0]))
    samples = head(torch.zeros(20000, 2)).sample()
    for d, (lo, hi) in enumerate([(0, 3), (3, 5)]):
        counts = torch.bincount(samples[:, d], minlength=hi - lo).float()
        torch.testing.assert_close(counts / counts.sum(), torch.softmax(head.linear.bias[lo:hi], -1),
                                   atol=0.015, rtol=0)


def test_log_probs_are_differentiable():
    head = DiagGaussian(4, 2)
    x = torch.randn(6, 4)
    head(x).log_probs(torch.randn(6, 2)).sum().backward()
    assert head.logstd.grad is not None and head.fc_mean.weight.grad is not None


@pytest.mark.parametrize("head", [Categorical(4, 5), MultiCategorical(4, [3, 2]),
                                  DiagGaussian(4, 3), Bernoulli(4, 3)],
                         ids=["categorical", "multicategorical", "diag_gaussian", "bernoulli"])
def test_sample_draws_from_a_given_generator_else_the_global_one(head):
    dist = head(torch.randn(64, 4))
    torch.manual_seed(7)
    by_global = dist.sample()
    after = torch.get_rng_state()
    torch.manual_seed(7)
    assert torch.equal(dist.sample(None), by_global)
    assert torch.equal(torch.get_rng_state(), after)

    torch.manual_seed(1)
    state = torch.get_rng_state()
    own = dist.sample(torch.Generator().manual_seed(7))
    assert torch.equal(torch.get_rng_state(), state)  # the global generator drew nothing
    assert torch.equal(own, by_global)  # the same seed, the same draws
