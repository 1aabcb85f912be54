"""Unit tests of reprobook.stats.mutual_information against Gaussians of known MI."""
import numpy as np
import pytest

from reprobook.stats.mutual_information import (
    equal_mass_bins, equal_mass_mi, fixed_width_mi, gaussian_mi,
)


def _gauss(rho, n, seed):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=n)
    return x, rho * x + np.sqrt(1 - rho**2) * rng.normal(size=n)


def test_gaussian_mi_formula():
    assert gaussian_mi(0.0) == 0.0
    assert gaussian_mi(0.6) == pytest.approx(-0.5 * np.log(0.64))
    with pytest.raises(ValueError):
        gaussian_mi(1.0)


def test_equal_mass_mi_recovers_known_gaussian_mi():
    # a 20x20 histogram underestimates MI by the within-cell information; at rho = 0.5 that is
    # a few percent, and the independent case must come out near 0 thanks to Miller-Madow
    for rho, tol in ((0.0, 0.004), (0.5, 0.02), (0.8, 0.06)):
        est = np.mean([equal_mass_mi(*_gauss(rho, 20_000, s)) for s in range(3)])
        assert est == pytest.approx(gaussian_mi(rho), abs=tol)


def test_miller_madow_removes_the_plug_in_bias_at_independence():
    x, y = _gauss(0.0, 5_000, 7)
    raw, corrected = equal_mass_mi(x, y, correction=False), equal_mass_mi(x, y)
    assert raw > 0.03 and abs(corrected) < 0.01


def test_equal_mass_mi_ignores_monotone_marginal_transforms():
    x, y = _gauss(0.7, 5_000, 3)
    assert equal_mass_mi(x, y) == pytest.approx(equal_mass_mi(np.exp(x), y**3), abs=1e-12)
    # fixed-width bins do not: a heavy-tailed marginal fills few of them
    assert abs(fixed_width_mi(x, y) - fixed_width_mi(np.exp(x), y**3)) > 0.05


def test_bins_are_equal_mass_and_bad_input_is_refused():
    b = equal_mass_bins(np.random.default_rng(0).normal(size=1000), 20)
    assert np.all(np.bincount(b) == 50)
    with pytest.raises(ValueError, match="same length"):
        equal_mass_mi(np.zeros(5), np.zeros(6))
    with pytest.raises(ValueError, match="bins"):
        equal_mass_mi(np.arange(10.0), np.arange(10.0), bins=1)
    with pytest.raises(ValueError, match="finite"):
        equal_mass_mi(np.array([0.0, np.nan, 1.0]), np.zeros(3), bins=2)
