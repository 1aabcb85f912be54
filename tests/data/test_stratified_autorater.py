"""Unit tests of reprobook.data.stratified_autorater: sampling, exact moments, heterogeneity."""
import numpy as np
import pytest

from reprobook.data.stratified_autorater import StratifiedAutorater

POP = StratifiedAutorater((0.4, 0.3, 0.2, 0.1), (0.8, 0.6, 0.4, 0.2), (3.0, 3.0, 0.5, 0.2))


def test_theta_and_validation():
    assert POP.theta == pytest.approx(0.6)
    assert POP.n_strata == 4
    with pytest.raises(ValueError, match="weights must be positive and sum to 1"):
        StratifiedAutorater((0.5, 0.6), (0.5, 0.5), (1, 1))
    with pytest.raises(ValueError, match="quality needs one value per stratum"):
        StratifiedAutorater((0.5, 0.5), (0.5, 0.5), (1,))
    with pytest.raises(ValueError, match="positive_rate must be probabilities"):
        StratifiedAutorater((0.5, 0.5), (0.5, 1.5), (1, 1))
    with pytest.raises(ValueError, match="quality must be >= 0"):
        StratifiedAutorater((0.5, 0.5), (0.5, 0.5), (1, -1))
    with pytest.raises(ValueError, match="noise must be a positive"):
        StratifiedAutorater((0.5, 0.5), (0.5, 0.5), (1, 1), noise=0)


def test_moments_match_monte_carlo():
    rng = np.random.default_rng(0)
    m = POP.moments()
    size = 200_000
    for k in range(4):
        y, f = POP.draw_stratum(k, size, rng)
        tol = 5 / np.sqrt(size)
        assert y.mean() == pytest.approx(m.mean_y[k], abs=tol)
        assert f.mean() == pytest.approx(m.mean_f[k], abs=tol)
        assert f.var() == pytest.approx(m.var_f[k], abs=tol)
        assert np.cov(y, f)[0, 1] == pytest.approx(m.cov_yf[k], abs=tol)
    _, y, f = POP.draw_mixture(size, rng)
    mm = POP.mixture_moments()
    assert y.mean() == pytest.approx(mm.mean_y[0], abs=5 / np.sqrt(size))
    assert y.var() == pytest.approx(mm.var_y[0], abs=5 / np.sqrt(size))
    assert f.var() == pytest.approx(mm.var_f[0], abs=5 / np.sqrt(size))
    assert np.cov(y, f)[0, 1] == pytest.approx(mm.cov_yf[0], abs=5 / np.sqrt(size))


def test_quality_orders_how_informative_the_score_is():
    m = POP.moments()
    corr = m.cov_yf / np.sqrt(m.var_y * m.var_f)
    assert corr[0] > 0.9 and corr[3] < 0.3
    flat = StratifiedAutorater((0.5, 0.5), (0.3, 0.7), (0.0, 0.0)).moments()
    np.testing.assert_allclose(flat.cov_yf, 0, atol=1e-15)  # quality 0: the score ignores Y


def test_heterogeneity_keeps_theta_and_h0_is_homogeneous():
    for h in (0.0, 0.3, 1.0):
        assert POP.with_heterogeneity(h).theta == pytest.approx(POP.theta)
    flat = POP.with_heterogeneity(0.0)
    assert len(set(flat.positive_rate)) == 1 and len(set(flat.quality)) == 1
    assert POP.with_heterogeneity(1.0) == POP
    with pytest.raises(ValueError, match="h .* must be in"):
        POP.with_heterogeneity(1.5)


def test_sampling_shapes_pool_and_determinism():
    sizes = POP.pool_sizes(1001)
    assert sizes.tolist() == [401, 300, 200, 100]  # largest remainder (0.4) gets the extra unit
    assert POP.pool_sizes(20000).tolist() == [8000, 6000, 4000, 2000]
    pool = POP.draw_pool(20000, np.random.default_rng(1))
    assert [p.size for p in pool] == [8000, 6000, 4000, 2000]
    assert all(np.all((p > 0) & (p < 1)) for p in pool)
    ys, fs = POP.draw_stratified([5, 0, 3, 2], np.random.default_rng(2))
    assert [y.size for y in ys] == [5, 0, 3, 2] and [f.size for f in fs] == [5, 0, 3, 2]
    a = POP.draw_mixture(50, np.random.default_rng(3))
    b = POP.draw_mixture(50, np.random.default_rng(3))
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)
    with pytest.raises(ValueError, match="sizes must be 4"):
        POP.draw_stratified([1, 2], np.random.default_rng(0))
    with pytest.raises(ValueError, match="stratum k must be in"):
        POP.draw_stratum(4, 3, np.random.default_rng(0))
