"""The hand-written SVGP equals gpytorch's ApproximateGP + VariationalStrategy + VariationalELBO,
and with Z = X and enough steps it approaches the exact GP."""
import gpytorch
import pytest
import torch

from reprobook.bo.exact_gp import ExactGP
from reprobook.bo.svgp import SVGP, fit_svgp, make_svgp, svgp_posterior

D = torch.float64


def _data(n=30, d=2, seed=0):
    g = torch.Generator().manual_seed(seed)
    X = torch.rand(n, d, generator=g, dtype=D)
    return X, torch.sin(4 * X).sum(1) + 0.05 * torch.randn(n, generator=g, dtype=D)


def _perturbed(X, y):
    m = make_svgp(X, 7, seed=1)
    fit_svgp(m, X, y, steps=15, lr=0.05)          # move every parameter off its start value
    return m


def test_predictive_and_elbo_match_gpytorch():
    X, y = _data()
    m = _perturbed(X, y)
    g, lik = m.to_gpytorch()
    Xs = torch.rand(11, 2, dtype=D)
    g.eval()
    with torch.no_grad(), gpytorch.settings.fast_pred_var(False):
        f = g(Xs)
        mu, var = svgp_posterior(m, Xs)
        assert torch.allclose(mu, f.mean, atol=1e-8)
        assert torch.allclose(var, f.variance, atol=1e-6)   # gpytorch adds its jitter to k(x, x)
    g.train()
    elbo = gpytorch.mlls.VariationalELBO(lik, g, num_data=X.shape[0])
    with torch.no_grad():
        # gpytorch adds its jitter to each k(x_i, x_i): E[log lik] drops by jitter / (2 sigma^2) a datum
        shift = m.jitter / (2 * m.prior.noise.item())
        assert m.elbo(X, y).item() - shift == pytest.approx(elbo(g(X), y).item(), abs=1e-9)


def test_full_inducing_set_approaches_exact_gp():
    X, y = _data(n=12)
    m = SVGP(X.clone(), lengthscale=0.4, noise=0.05)
    m.Z.requires_grad_(False)
    for p in m.prior.parameters():
        p.requires_grad_(False)                 # fixed hyperparameters: q(u) alone is learned
    fit_svgp(m, X, y, steps=400, lr=0.1)
    ex = ExactGP(X, y, lengthscale=0.4, noise=0.05)
    Xs = torch.rand(20, 2, dtype=D, generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        mq, vq = m.predict(Xs)
        me, ve = ex.predict(Xs)
    assert (mq - me).abs().max() < 2e-2
    assert (vq - ve).abs().max() < 2e-2


def test_training_raises_the_elbo_and_keeps_shapes():
    X, y = _data()
    m = make_svgp(X, 6)
    hist = fit_svgp(m, X, y, steps=40, lr=0.05)
    assert hist[-1] < hist[0]
    mu, var = svgp_posterior(m, X[:5])
    assert mu.shape == (5,) and (var > 0).all()


def test_bad_input():
    X, y = _data()
    with pytest.raises(ValueError, match="n_inducing"):
        make_svgp(X, 0)
    with pytest.raises(ValueError, match="X must be"):
        make_svgp(X[0], 3)
    m = make_svgp(X, 3)
    with pytest.raises(ValueError, match="y must be"):
        fit_svgp(m, X, y[:-1], steps=1)
    with pytest.raises(ValueError, match="steps"):
        fit_svgp(m, X, y, steps=-1)
    with pytest.raises(ValueError, match="lr"):
        fit_svgp(m, X, y, steps=1, lr=0.0)


def test_optimal_variational_is_the_elbo_maximiser_and_exact_at_full_rank():
    from reprobook.bo.svgp import optimal_variational_
    X, y = _data(n=12)
    # Z = X: the optimum is the exact posterior under the same prior
    m = SVGP(X.clone(), lengthscale=0.4, noise=0.05)
    optimal_variational_(m, X, y)
    ex = ExactGP(X, y, lengthscale=0.4, noise=0.05)
    Xs = torch.rand(20, 2, dtype=D, generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        mq, vq = m.predict(Xs)
        me, ve = ex.predict(Xs)
        assert (mq - me).abs().max() < 1e-5 and (vq - ve).abs().max() < 1e-5
    # a few inducing points: no q with the same Z and prior has a higher ELBO
    m = make_svgp(X, 4, seed=0)
    optimal_variational_(m, X, y)
    best = m.elbo(X, y).item()
    g = torch.Generator().manual_seed(1)
    for _ in range(5):
        with torch.no_grad():
            m.var_mean.add_(0.05 * torch.randn(4, generator=g, dtype=D))
        assert m.elbo(X, y).item() < best
        optimal_variational_(m, X, y)
