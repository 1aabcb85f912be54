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
