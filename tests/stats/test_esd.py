"""The ESD and the power-law tail fit (AlphaPruning's estimator)."""
import numpy as np
import pytest
import torch

from reprobook.stats.esd import esd, fit_alpha, fit_alpha_powerlaw, planted_matrix, planted_spectrum


def test_esd_is_squared_singular_values():
    W = np.diag([3.0, 1.0, 2.0])
    assert np.allclose(esd(W), [1.0, 4.0, 9.0])
    assert np.allclose(esd(torch.tensor(W)), [1.0, 4.0, 9.0])


def test_recovers_planted_exponents_on_average():
    for a in (2.0, 3.0, 4.0):
        est = [fit_alpha(planted_spectrum(1000, a, np.random.default_rng(s))).alpha for s in range(6)]
        assert abs(np.mean(est) - a) < 0.25, (a, est)


def test_through_a_matrix_and_its_svd():
    W = planted_matrix(160, 120, 3.0, np.random.default_rng(0))
    assert W.shape == (160, 120)
    assert abs(fit_alpha(esd(W)).alpha - 3.0) < 0.6


def test_whole_spectrum_fit_is_biased_low():
    lam = planted_spectrum(1000, 4.0, np.random.default_rng(1))
    assert fit_alpha(lam, "min").alpha < 3.0 < fit_alpha(lam, "peak").alpha


def test_hill_formula_on_a_hand_example():
    lam = np.array([1.0, np.e, np.e ** 2])
    f = fit_alpha(lam, "min")
    assert f.alpha == pytest.approx(1 + 3 / 3.0)      # sum ln(l/1) = 0 + 1 + 2
    assert f.xmin == 1.0 and f.n_tail == 3


def test_peak_rule_repo_lower_bound_is_void_below_one():
    lam = planted_spectrum(800, 3.0, np.random.default_rng(2)) * 0.1   # peak near 0.1
    a = fit_alpha(lam, "peak", lower="repo")
    b = fit_alpha(lam, "all")
    assert a.xmin <= b.xmin * 1.5 + 1e-12


def test_agrees_with_powerlaw_package():
    pytest.importorskip("powerlaw")
    lam = planted_spectrum(150, 3.0, np.random.default_rng(3))
    assert fit_alpha(lam, "all").alpha == pytest.approx(fit_alpha_powerlaw(lam).alpha, abs=1e-8)


def test_rejects_bad_input():
    with pytest.raises(ValueError, match="unknown xmin"):
        fit_alpha([1.0, 2.0, 3.0], "nope")
    with pytest.raises(ValueError, match="positive"):
        fit_alpha([0.0, 1.0, 2.0])
    with pytest.raises(ValueError, match="2-D"):
        esd(np.ones(5))
    with pytest.raises(ValueError, match="exponent a must be > 1"):
        planted_spectrum(10, 1.0, np.random.default_rng(0))
