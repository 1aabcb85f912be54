"""Synthetic regression data: shapes, determinism, the known function, bad input."""
import numpy as np
import pytest
import torch

from reprobook.data.synthetic_regression import friedman1, gp_draw


def test_friedman1_is_the_formula_and_deterministic():
    X, y, f = friedman1(50, seed=3, d=10, noise=0.5)
    assert X.shape == (50, 10) and y.shape == f.shape == (50,) and X.dtype == torch.float64
    x = X.numpy()
    want = 10 * np.sin(np.pi * x[:, 0] * x[:, 1]) + 20 * (x[:, 2] - 0.5) ** 2 + 10 * x[:, 3] + 5 * x[:, 4]
    assert np.allclose(f.numpy(), want)
    assert 0.2 < (y - f).std().item() < 1.0
    X2, y2, _ = friedman1(50, seed=3, d=10, noise=0.5)
    assert torch.equal(X, X2) and torch.equal(y, y2)
    assert not torch.equal(X, friedman1(50, seed=4)[0])


def test_gp_draw_shapes_and_prior_variance():
    ell = [0.3, 0.6]
    X, y, f = gp_draw(400, seed=0, lengthscales=ell, outputscale=2.0, noise=0.1)
    assert X.shape == (400, 2) and y.shape == f.shape == (400,)
    assert (X >= 0).all() and (X <= 1).all()
    assert 0.05 < (y - f).std().item() < 0.2
    assert torch.equal(y, gp_draw(400, seed=0, lengthscales=ell, outputscale=2.0, noise=0.1)[1])
    # over draws, f at a point has the prior variance s^2 (E[2 cos^2] = 1 for each feature)
    vals = [gp_draw(1, seed=s, lengthscales=ell, outputscale=2.0, n_features=64)[2].item() for s in range(400)]
    assert abs(np.var(vals) - 2.0) < 0.5


@pytest.mark.parametrize("call, match", [
    (lambda: friedman1(0, 0), "n must"),
    (lambda: friedman1(10, 0, d=3), "d must"),
    (lambda: gp_draw(10, 0, lengthscales=[0.1, -1]), "lengthscales"),
    (lambda: gp_draw(10, 0, lengthscales=[0.1], n_features=0), "n_features"),
])
def test_bad_input(call, match):
    with pytest.raises(ValueError, match=match):
        call()
