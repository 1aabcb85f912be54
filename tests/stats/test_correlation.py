"""Unit tests of reprobook.stats.correlation and reprobook.stats.monotone_sim."""
import numpy as np
import pytest
from scipy import stats

from reprobook.stats.correlation import (
    cauchy_schwarz_bound, covariance, kendall, pearson, rearrangement_bound, recor, spearman,
)
from reprobook.stats.monotone_sim import (
    MONOTONE_SCENARIOS, add_noise, db_to_snr, mae, power_scenarios, simulate, snr_to_r,
)


def _pairs(rng, n, m=200):
    x = rng.standard_normal((m, n))
    y = 0.6 * x + rng.standard_normal((m, n))
    y[::2] = -np.exp(y[::2])           # skewed, negatively related half
    return x, y


@pytest.mark.parametrize("n", [2, 5, 50])
def test_inequality_chain(n):
    rng = np.random.default_rng(n)
    x, y = _pairs(rng, n)
    s = np.abs(covariance(x, y))
    b = rearrangement_bound(x, y)
    cs = cauchy_schwarz_bound(x, y)
    assert np.all(s <= b * (1 + 1e-12) + 1e-15)
    assert np.all(b <= cs * (1 + 1e-12) + 1e-15)


def test_range_and_dominates_pearson():
    rng = np.random.default_rng(1)
    x, y = _pairs(rng, 30, 500)
    r, rs = pearson(x, y), recor(x, y)
    assert np.all(np.abs(rs) <= 1 + 1e-12)
    assert np.all(np.abs(rs) >= np.abs(r) - 1e-12)
    assert np.all(np.sign(rs) == np.sign(r))


@pytest.mark.parametrize("f,sign", [(np.exp, 1), (lambda x: x**3, 1), (np.tanh, 1),
                                    (lambda x: -np.exp(3 * x), -1), (lambda x: np.arctan(-x), -1)])
def test_monotone_relations_give_plus_minus_one(f, sign):
    x = np.random.default_rng(2).standard_normal(300)
    assert recor(x, f(x)) == pytest.approx(sign, abs=1e-12)
    assert abs(pearson(x, f(x))) < 1 - 1e-6  # Pearson does not capture it


def test_linear_reverts_to_pearson_and_ranks_to_spearman():
    rng = np.random.default_rng(3)
    x = rng.random(100)
    for a, b in [(2.5, 1.0), (-0.3, 4.0)]:
        y = a * x + b
        assert recor(x, y) == pytest.approx(pearson(x, y), abs=1e-12)
        assert recor(x, y) == pytest.approx(np.sign(a), abs=1e-12)
    # same-shaped marginals: y is an affine image of a permutation of x
    y = 3 * rng.permutation(x) - 1
    assert recor(x, y) == pytest.approx(pearson(x, y), abs=1e-12)
    y = rng.standard_normal(100)
    rx, ry = stats.rankdata(x), stats.rankdata(y)
    assert recor(rx, ry) == pytest.approx(stats.spearmanr(x, y).statistic, abs=1e-12)


def test_symmetry_and_permutation_invariance():
    rng = np.random.default_rng(4)
    x, y = rng.standard_normal(40), rng.lognormal(size=40)
    p = rng.permutation(40)
    assert recor(x, y) == pytest.approx(recor(y, x), abs=1e-14)
    assert recor(x[p], y[p]) == pytest.approx(recor(x, y), abs=1e-14)


def test_batched_equals_looped_and_scipy_baselines():
    rng = np.random.default_rng(5)
    x, y = rng.standard_normal((6, 25)), rng.standard_normal((6, 25))
    y[0, :5] = 0.0                       # ties
    batch = recor(x, y)
    assert np.allclose(batch, [recor(a, b) for a, b in zip(x, y)], atol=1e-15)
    assert np.allclose(pearson(x, y), [stats.pearsonr(a, b).statistic for a, b in zip(x, y)])
    assert np.allclose(spearman(x, y), [stats.spearmanr(a, b).statistic for a, b in zip(x, y)])
    assert np.allclose(kendall(x, y), [stats.kendalltau(a, b).statistic for a, b in zip(x, y)])


def test_constant_sample_is_nan_and_bad_input_is_named():
    assert np.isnan(recor([1.0, 1.0, 1.0], [1.0, 2.0, 3.0]))
    assert np.isnan(pearson([1.0, 2.0, 3.0], [4.0, 4.0, 4.0]))
    with pytest.raises(ValueError, match="same shape"):
        recor([1, 2, 3], [1, 2])
    with pytest.raises(ValueError, match="at least 2"):
        recor([1.0], [2.0])
    with pytest.raises(ValueError, match="y contains non-finite"):
        recor([1, 2, 3], [1, np.nan, 3])


def test_scenarios_are_finite_and_monotone_on_unit_interval():
    x = np.sort(np.random.default_rng(6).random(2000))
    for name, f in MONOTONE_SCENARIOS.items():
        y = f(x)
        assert np.all(np.isfinite(y)), name
        d = np.diff(y)
        assert np.all(d >= -1e-12) or np.all(d <= 1e-12), name
    assert len(MONOTONE_SCENARIOS) == 50
    assert list(power_scenarios([1, 2.5])) == ["x^1", "x^2.5"]


def test_noise_hits_the_snr_and_truth_formula():
    rng = np.random.default_rng(7)
    sig = np.tile(np.linspace(0, 1, 4000), (3, 1))
    y = add_noise(sig, np.array([0.5, 1.0, 4.0]), rng)
    ratio = sig.var(axis=1, ddof=1) / (y - sig).var(axis=1, ddof=1)
    assert np.allclose(ratio, [0.5, 1.0, 4.0], rtol=0.08)
    assert np.allclose(np.corrcoef(sig[2], y[2])[0, 1], snr_to_r(4.0), atol=0.02)
    assert db_to_snr(10) == pytest.approx(10.0) and snr_to_r(1.0) == pytest.approx(np.sqrt(0.5))
    with pytest.raises(ValueError, match="snr"):
        add_noise(sig, 0.0, rng)


def test_simulate_is_deterministic_and_shaped():
    from reprobook.stats.correlation import COEFFICIENTS

    scen = {k: MONOTONE_SCENARIOS[k] for k in ("Linear", "Cubic", "Logarithm")}
    a = simulate(scen, [-10, 0, 20], 64, COEFFICIENTS, np.random.default_rng(8))
    b = simulate(scen, [-10, 0, 20], 64, COEFFICIENTS, np.random.default_rng(8))
    for c in COEFFICIENTS:
        assert a["values"][c].shape == (3, 3)
        assert np.array_equal(a["values"][c], b["values"][c])
    assert mae(a["values"]["r#"], a["R"]) >= 0
    with pytest.raises(ValueError, match="n must be"):
        simulate(scen, [0], 2, COEFFICIENTS, np.random.default_rng(0))


def test_recent_measures_against_direct_formulas():
    from reprobook.stats.correlation import chatterjee_xi, distance_correlation

    rng = np.random.default_rng(9)
    x, y = rng.standard_normal(30), rng.standard_normal(30)
    y[:4] = 0.0                                    # ties in y
    # distance correlation from explicitly double-centred matrices
    def dc(a):
        d = np.abs(a[:, None] - a[None, :])
        return d - d.mean(0) - d.mean(1)[:, None] + d.mean()
    A, B = dc(x), dc(y)
    ref = np.sqrt((A * B).mean() / np.sqrt((A * A).mean() * (B * B).mean()))
    assert distance_correlation(x, y) == pytest.approx(ref, abs=1e-12)
    assert distance_correlation(x, 3 * x - 2) == pytest.approx(1.0, abs=1e-12)
    # Chatterjee's xi from its definition with ties (r_i, l_i counts), x continuous
    o = np.argsort(x)
    ys = y[o]
    n = len(x)
    r = np.array([(ys <= v).sum() for v in ys])
    l = np.array([(ys >= v).sum() for v in ys])
    ref_xi = 1 - n * np.abs(np.diff(r)).sum() / (2 * (l * (n - l)).sum())
    assert chatterjee_xi(x, y) == pytest.approx(ref_xi, abs=1e-12)
    # batched equals looped
    X, Y = rng.standard_normal((5, 20)), rng.standard_normal((5, 20))
    assert np.allclose(distance_correlation(X, Y, chunk=2), [distance_correlation(a, b)
                                                             for a, b in zip(X, Y)])
    assert np.allclose(chatterjee_xi(X, Y), [chatterjee_xi(a, b) for a, b in zip(X, Y)])
    with pytest.raises(ValueError, match="chunk"):
        distance_correlation(x, y, chunk=0)
