"""The gpytorch baselines train, predict with the right shapes, and reject bad input."""
import pytest
import torch

from reprobook.gp.baselines import fit_sgpr, fit_svgp


def _data(n=40):
    g = torch.Generator().manual_seed(0)
    X = torch.rand(n, 1, generator=g, dtype=torch.float64)
    y = torch.sin(6 * X[:, 0]) + 0.1 * torch.randn(n, generator=g, dtype=torch.float64)
    return X, y


@pytest.mark.parametrize("fit", [fit_sgpr, fit_svgp])
def test_fit_and_predict(fit):
    X, y = _data()
    predict = fit(X, y, n_inducing=8, steps=8)
    mean, var, noise = predict(torch.linspace(0, 1, 7, dtype=torch.float64)[:, None])
    assert mean.shape == (7,) and var.shape == (7,) and (var >= 0).all() and noise > 0
    assert ((mean[:3] - torch.sin(6 * torch.linspace(0, 1, 7, dtype=torch.float64)[:3])).abs()
            < 1.0).all()


@pytest.mark.parametrize("fit", [fit_sgpr, fit_svgp])
def test_bad_input(fit):
    X, y = _data()
    with pytest.raises(ValueError, match="n_inducing"):
        fit(X, y, n_inducing=0, steps=1)
    with pytest.raises(ValueError, match="X must be"):
        fit(X, y[:-1], n_inducing=4, steps=1)


def test_svgp_objective_is_what_fit_svgp_trains():
    from reprobook.gp.baselines import svgp_objective
    X, y = _data()
    loss, params, model, lik = svgp_objective(X, y, n_inducing=8)
    first = loss()
    assert first.dim() == 0 and torch.isfinite(first)
    first.backward()
    assert all(p.grad is not None for p in params if p.requires_grad)
    opt = torch.optim.Adam(params, lr=0.05)
    for _ in range(10):
        opt.zero_grad()
        loss().backward()
        opt.step()
    assert loss() < first
    with pytest.raises(ValueError, match="n_inducing"):
        svgp_objective(X, y, n_inducing=0)


def test_natural_gradients_and_convergence_stop():
    X, y = _data(60)
    predict = fit_svgp(X, y, n_inducing=8, steps=400, natural_gradients=True, tol=1e-4, patience=10)
    assert 0 < predict.steps < 400                      # stopped on the plateau
    mean, var, noise = predict(X)
    assert ((mean - y).pow(2).mean() < 0.05) and (var >= 0).all()
    h = predict.hyper
    assert h["lengthscale"].shape == (1,) and h["noise"] > 0 and h["outputscale"] > 0
    # natural gradients with a full step reach a better ELBO than Adam in the same few steps
    ngd = fit_svgp(X, y, n_inducing=8, steps=5, natural_gradients=True)
    adam = fit_svgp(X, y, n_inducing=8, steps=5)
    err = lambda p: (p(X)[0] - y).pow(2).mean().item()  # noqa: E731
    assert err(ngd) < err(adam)
    with pytest.raises(ValueError, match="ngd_lr"):
        fit_svgp(X, y, n_inducing=8, steps=1, natural_gradients=True, ngd_lr=2.0)


def test_train_until_converged_checks_and_counts():
    from reprobook.gp.baselines import train_until_converged
    w = torch.zeros(1, requires_grad=True, dtype=torch.float64)
    opt = torch.optim.SGD([w], lr=0.5)
    assert train_until_converged(lambda: ((w - 1) ** 2).sum(), [opt], steps=7) == 7
    taken = train_until_converged(lambda: ((w - 1) ** 2).sum(), [opt], steps=500, tol=1e-12, patience=3)
    assert taken < 500 and abs(w.item() - 1) < 1e-5
    with pytest.raises(ValueError, match="patience"):
        train_until_converged(lambda: w.sum(), [opt], steps=1, tol=0.0, patience=0)
