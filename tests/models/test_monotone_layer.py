"""The monotone Fourier layer: resolution independence, spectral normalisation, Jacobian, inverse."""
import numpy as np
import pytest

from reprobook import rng
from reprobook.data.random_fields import grf_coefficients, sample_on_grid
from reprobook.linalg.monotone import monotonicity_ratios, sym_min_eig
from reprobook.models.monotone_layer import (FourierMultiplier, grid_inner, grid_norm,
                                             random_monotone_layer, random_multiplier)


def test_multiplier_is_the_same_operator_at_every_resolution_and_has_the_right_norm():
    k = random_multiplier(6, 1.5, rng(0))
    c = grf_coefficients(3, 6, rng(1))
    # a band-limited input, multiplied, is still band-limited: subsampling commutes with K
    fine = k(sample_on_grid(c, 64))
    np.testing.assert_allclose(k(sample_on_grid(c, 16)), fine[:, ::4], atol=1e-13)
    for n in (12, 32):
        assert np.linalg.norm(k.matrix(n), 2) == pytest.approx(1.5, rel=1e-12)
        assert np.abs(k.matrix(n).imag if np.iscomplexobj(k.matrix(n)) else 0).max() == 0


def test_layer_is_strongly_monotone_and_its_jacobian_matches_finite_differences():
    layer = random_monotone_layer(rng(2), modes=6, lipschitz=0.6)
    assert layer.lipschitz_g == pytest.approx(0.6)
    g = rng(3)
    for n in (12, 40):
        u, v = g.normal(size=(100, n)), g.normal(size=(100, n))
        assert monotonicity_ratios(layer, u, v, inner=grid_inner).min() >= 0.4 - 1e-12
        x, h = g.normal(size=n), g.normal(size=n)
        fd = (layer(x + 1e-6 * h) - layer(x - 1e-6 * h)) / 2e-6
        np.testing.assert_allclose(layer.jacobian(x) @ h, fd, rtol=1e-6, atol=1e-8)
        assert sym_min_eig(layer.jacobian(x)) >= 0.4 - 1e-12


def test_inverse_converges_at_the_same_rate_at_every_resolution():
    layer = random_monotone_layer(rng(4), modes=8, lipschitz=0.6)
    c = grf_coefficients(1, 8, rng(5))[0] * 3
    steps = []
    for n in (16, 64, 256):
        f = sample_on_grid(c, n)
        inv = layer.inverse(f, tol=1e-12)
        assert inv.converged and inv.residual < 1e-11
        assert inv.contraction <= 0.6 + 1e-9
        steps.append(inv.steps)
    assert max(steps) - min(steps) <= 1


def test_rms_normalisation_underestimates_the_norm():
    bad = random_multiplier(16, 1.0, rng(6), normalise="rms")
    assert bad.norm > 1.0


def test_grf_is_exact_across_grids_and_normalised():
    c = grf_coefficients(4, 5, rng(7))
    np.testing.assert_allclose(sample_on_grid(c, 10), sample_on_grid(c, 40)[:, ::4], atol=1e-13)
    np.testing.assert_allclose(grid_norm(sample_on_grid(c, 40)), 1.0, rtol=1e-12)


def test_bad_input():
    with pytest.raises(ValueError, match="real"):
        FourierMultiplier(np.array([1j, 1.0]))
    k = random_multiplier(8, 1.0, rng(0))
    with pytest.raises(ValueError, match="cannot hold"):
        k(np.ones(10))
    with pytest.raises(ValueError, match="normalise"):
        random_multiplier(4, 1.0, rng(0), normalise="fro")
    with pytest.raises(ValueError, match="1-d grid"):
        random_monotone_layer(rng(0), modes=4).inverse(np.ones((2, 8)))
    with pytest.raises(ValueError, match="n must be an int"):
        sample_on_grid(np.ones(5), 8)
