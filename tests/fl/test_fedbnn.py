import numpy as np
import pytest
import torch

from reprobook import rng
from reprobook.fl.bnn import BNN, MLP, gaussian_kl
from reprobook.fl.data import make_federated
from reprobook.fl.fedbnn import (aggregate, evaluate, train_fedavg, train_fedbnn, train_fedmd,
                                 train_local)
from reprobook.fl.metrics import expected_calibration_error
from reprobook.fl.privacy import GaussianMechanism


@pytest.fixture(scope="module")
def data():
    return make_federated([6, 10, 14], n_test=20, n_public=16, heterogeneity=0.7, rng=rng(0, 0))


def test_data_shapes(data):
    assert [len(c.y) for c in data.clients] == [6, 10, 14]
    assert data.public.shape == (16, data.dim)
    assert all(c.x_test.shape == (20, data.dim) for c in data.clients)
    with pytest.raises(ValueError, match="heterogeneity"):
        make_federated([5, 5], 5, 5, 2.0, rng(0))
    with pytest.raises(ValueError, match="sizes"):
        make_federated([5], 5, 5, 0.5, rng(0))


def test_gaussian_kl_monte_carlo():
    g = torch.Generator().manual_seed(0)
    mu, sigma, s = torch.tensor([0.3, -1.0]), torch.tensor([0.5, 1.2]), 0.8
    w = mu + sigma * torch.randn(200_000, 2, generator=g)
    logq = torch.distributions.Normal(mu, sigma).log_prob(w).sum(-1)
    logp = torch.distributions.Normal(0.0, s).log_prob(w).sum(-1)
    assert abs(float((logq - logp).mean()) - float(gaussian_kl(mu, sigma, s))) < 0.02


def test_zero_prior_weight_is_local_training(data):
    kw = dict(rounds=3, local_steps=4, generator_seed=1)
    a = train_local(data, [8], **kw)
    b = train_fedbnn(data, [8], prior_weight=0.0, **kw)
    c = train_fedbnn(data, [8], prior_weight=1.0, **kw)
    for ma, mb, mc in zip(a, b, c):
        for pa, pb in zip(ma.parameters(), mb.parameters()):
            assert torch.equal(pa, pb)
    assert any(not torch.equal(pa, pc) for pa, pc in zip(a[0].parameters(), c[0].parameters()))


def test_prior_sign_flips_only_the_prior_term(data):
    kw = dict(rounds=3, local_steps=4, generator_seed=1)
    plus = train_fedbnn(data, [8], prior_weight=1.0, **kw)
    minus = train_fedbnn(data, [8], prior_weight=1.0, prior_sign=-1.0, **kw)
    assert any(not torch.equal(p, q) for p, q in zip(plus[0].parameters(), minus[0].parameters()))
    # without a prior the sign has nothing to act on: still bit-exact local training
    local = train_local(data, [8], **kw)
    flipped0 = train_fedbnn(data, [8], prior_weight=0.0, prior_sign=-1.0, **kw)
    for ma, mb in zip(local, flipped0):
        assert all(torch.equal(p, q) for p, q in zip(ma.parameters(), mb.parameters()))
    # pushing away from the aggregate moves a client's outputs on the public set further from it
    phi = aggregate(torch.stack([m.predict_proba(data.public, 8, torch.Generator().manual_seed(0))
                                 for m in plus]))
    kl = lambda models: float(sum((phi[c] * (phi[c].log() - m.predict_proba(
        data.public, 8, torch.Generator().manual_seed(0)).clamp_min(1e-12).log())).sum(-1).mean()
        for c, m in enumerate(models)))
    assert kl(minus) > kl(plus)
    with pytest.raises(ValueError, match="prior_sign"):
        train_fedbnn(data, [8], prior_weight=1.0, prior_sign=0.5, **kw)


def test_heterogeneous_architectures(data):
    archs = [[4], [8], [8, 8]]
    models = train_fedbnn(data, archs, rounds=2, local_steps=2, prior_weight=1.0, generator_seed=0,
                          mechanism=GaussianMechanism(1.0, 1.0))
    assert [m.sizes[1:-1] for m in models] == archs
    acc, ece = evaluate(models, data, n_samples=2)
    assert acc.shape == ece.shape == (3,)
    with pytest.raises(ValueError, match="same architecture"):
        train_fedavg(data, archs, rounds=1, local_steps=1, generator_seed=0)
    with pytest.raises(ValueError, match="architectures for 3 clients"):
        train_fedbnn(data, [[4], [8]], rounds=1, local_steps=1, prior_weight=1.0, generator_seed=0)
    with pytest.raises(ValueError, match="prior_weight"):
        train_fedbnn(data, [4], rounds=1, local_steps=1, prior_weight=-1.0, generator_seed=0)


def test_fedavg_averages(data):
    m = train_fedavg(data, [8], rounds=2, local_steps=2, generator_seed=0)
    assert isinstance(m, MLP)
    acc, _ = evaluate(m, data)
    assert acc.shape == (3,)


def test_aggregate():
    g = torch.Generator().manual_seed(0)
    p = torch.softmax(torch.randn(4, 5, 3, generator=g), -1)
    mean = aggregate(p, 0.0)
    assert torch.allclose(mean, p.mean(0, keepdim=True).expand_as(p), atol=1e-7)
    same = p[:1].expand(4, 5, 3)
    assert torch.allclose(aggregate(same, 7.0), same, atol=1e-7)
    pers = aggregate(p, 1e4)                                # huge tau: each client keeps its own
    assert torch.allclose(pers, p, atol=1e-5)
    assert torch.allclose(aggregate(p, 3.0).sum(-1), torch.ones(4, 5), atol=1e-6)
    with pytest.raises(ValueError, match="messages"):
        aggregate(p[0], 0.0)
    with pytest.raises(ValueError, match="temperature"):
        aggregate(p, -1.0)


def test_bnn_shapes_and_errors():
    g = torch.Generator().manual_seed(0)
    m = BNN([3, 5, 2], g)
    assert m(torch.zeros(4, 3), g).shape == (4, 2)
    assert torch.allclose(m.predict_proba(torch.zeros(4, 3), 3, g).sum(-1), torch.ones(4))
    with pytest.raises(ValueError, match="x must have shape"):
        m(torch.zeros(4, 2))
    with pytest.raises(ValueError, match="sizes"):
        BNN([3], g)


def test_ece():
    probs = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    assert expected_calibration_error(probs, torch.tensor([0, 1])) == 0.0
    probs = torch.tensor([[0.75, 0.25]] * 4)
    assert abs(expected_calibration_error(probs, torch.tensor([0, 0, 1, 1])) - 0.25) < 1e-12
    with pytest.raises(ValueError, match="probs"):
        expected_calibration_error(probs, torch.tensor([0]))


def test_fedavg_finetune_keeps_the_last_local_models(data):
    kw = dict(rounds=2, local_steps=3, generator_seed=0)
    models = train_fedavg(data, [8], finetune=True, **kw)
    assert isinstance(models, list) and len(models) == len(data.clients)
    # fine-tuned from the same global model on different data: the clients differ
    assert not torch.equal(models[0].weights[0], models[1].weights[0])
    one = train_fedavg(data, [8], **dict(kw, rounds=1))
    assert isinstance(one, MLP)


def test_fedmd_is_deterministic_distillation(data):
    models = train_fedmd(data, [8], rounds=2, local_steps=3, prior_weight=1.0, generator_seed=0)
    assert all(isinstance(m, MLP) for m in models)
    x = data.public[:5]
    assert torch.equal(models[0].predict_proba(x), models[0].predict_proba(x))
    het = train_fedmd(data, [[4], [8], [4, 4]], rounds=2, local_steps=2, prior_weight=1.0, generator_seed=0)
    assert len(het) == len(data.clients)


def test_uniform_prior_target(data):
    kw = dict(rounds=2, local_steps=3, prior_weight=1.0, generator_seed=0)
    uni = train_fedbnn(data, [8], prior_target="uniform", **kw)
    agg = train_fedbnn(data, [8], **kw)
    # the first round is identical (no prior yet); the second differs
    assert not torch.equal(uni[0].layers[0].mu_w, agg[0].layers[0].mu_w)
    with pytest.raises(ValueError, match="prior_target"):
        train_fedbnn(data, [8], prior_target="nope", **kw)
