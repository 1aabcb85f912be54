"""Unit tests of reprobook.stats.ppi: formulas, exact identities, allocation, ppi_py agreement."""
import itertools

import numpy as np
import pytest
from scipy import stats

from reprobook.stats.ppi import (
    Interval, calibrated_residual_sd, classical_mean_ci, combine_strata, neyman_allocation,
    normal_interval, optimal_lambda, power_tuned_lambda, ppi_mean_ci, ppi_terms, ppi_variance,
    proportional_allocation, stratified_classical_mean_ci, stratppi_mean_ci, stratppi_terms,
)

Z = stats.norm.ppf(0.975)


def _data(rng, n=60, big_n=500, slope=0.8, batch=()):
    """Labels and autorater scores with a known relation (``slope`` sets how informative f is)."""
    y = (rng.random((*batch, n)) < 0.4).astype(float)
    f = np.clip(0.3 + slope * (y - 0.4) + 0.25 * rng.standard_normal((*batch, n)), 0, 1)
    yu = (rng.random((*batch, big_n)) < 0.4).astype(float)
    fu = np.clip(0.3 + slope * (yu - 0.4) + 0.25 * rng.standard_normal((*batch, big_n)), 0, 1)
    return y, f, fu


def _strata(rng, sizes=(30, 20, 12), pools=(400, 300, 200), batch=()):
    ys, fs, fus = [], [], []
    for k, (n, big_n) in enumerate(zip(sizes, pools)):
        y, f, fu = _data(rng, n, big_n, slope=[1.2, 0.5, 0.05][k % 3], batch=batch)
        ys.append(y), fs.append(f), fus.append(fu)
    return ys, fs, fus


def _close(a: Interval, b: Interval, tol: float):
    for x, y in zip(a, b):
        np.testing.assert_allclose(x, y, rtol=0, atol=tol)


# ----------------------------------------------------------------------------- one sample
def test_classical_by_hand():
    y = np.array([1.0, 0.0, 1.0, 1.0, 0.0])
    ci = classical_mean_ci(y, alpha=0.05)
    se = np.sqrt(np.var(y, ddof=1) / 5)
    assert ci.estimate == pytest.approx(0.6)
    assert ci.se == pytest.approx(se)
    assert (ci.lower, ci.upper) == pytest.approx((0.6 - Z * se, 0.6 + Z * se))
    assert ci.width == pytest.approx(2 * Z * se)
    assert bool(ci.covers(0.6)) and not bool(ci.covers(2.0))


def test_ppi_terms_by_hand():
    rng = np.random.default_rng(0)
    y, f, fu = _data(rng)
    for lam in (0.0, 0.3, 1.0):
        t = ppi_terms(y, f, fu, lam)
        assert t.estimate == pytest.approx(lam * fu.mean() + (y - lam * f).mean(), abs=1e-15)
        assert t.var_labelled == pytest.approx(np.var(y - lam * f, ddof=1) / len(y))
        assert t.var_unlabelled == pytest.approx(lam**2 * np.var(fu, ddof=1) / len(fu))
    _close(ppi_mean_ci(y, f, fu, lam=0.0), classical_mean_ci(y), 1e-15)


def test_power_tuned_lambda_formula_and_clip():
    rng = np.random.default_rng(1)
    y, f, fu = _data(rng, slope=0.8)
    n, big_n = len(y), len(fu)
    cov = np.mean((y - y.mean()) * (f - f.mean()))
    var = np.var(np.concatenate([f, fu]), ddof=1)
    lam = power_tuned_lambda(y, f, fu, clip=False)
    assert lam == pytest.approx(cov / ((1 + n / big_n) * var), rel=1e-12)
    assert 0 < lam < 1
    # a score that over-reacts less than the label: unclipped optimum above 1
    y2, f2, fu2 = _data(rng, slope=0.3)
    f2, fu2 = 0.3 + 0.5 * (f2 - 0.3), 0.3 + 0.5 * (fu2 - 0.3)
    assert power_tuned_lambda(y2, f2, fu2, clip=False) > 1
    assert power_tuned_lambda(y2, f2, fu2) == 1.0
    assert power_tuned_lambda(y, 1 - f, 1 - fu) == 0.0  # anti-correlated: clipped at 0
    assert power_tuned_lambda(y, np.full_like(f, 0.5), np.full_like(fu, 0.5)) == 0.0


def test_power_tuning_minimises_estimated_variance():
    # The plug-in lambda minimises the estimated variance up to O(1/sqrt(n)) differences between
    # the pooled and the labelled-sample variance of f; with a large sample they agree closely.
    rng = np.random.default_rng(2)
    y, f, fu = _data(rng, 4000, 40000, slope=0.6)
    lam = float(power_tuned_lambda(y, f, fu, clip=False))
    grid = np.linspace(-0.5, 2.0, 501)
    v = ppi_terms(y, f, fu, grid, ddof=0).variance
    assert abs(grid[int(np.argmin(v))] - lam) < 0.03


def test_batched_equals_one_by_one():
    rng = np.random.default_rng(3)
    y, f, fu = _data(rng, batch=(7,))
    batched = ppi_mean_ci(y, f, fu, lam=None)
    for i in range(7):
        _close(ppi_mean_ci(y[i], f[i], fu[i], lam=None), Interval(*(a[i] for a in batched)), 1e-15)
    ys, fs, fus = _strata(rng, batch=(5,))
    w = [0.5, 0.3, 0.2]
    sb = stratppi_mean_ci(ys, fs, fus, w)
    for i in range(5):
        one = stratppi_mean_ci([a[i] for a in ys], [a[i] for a in fs], [a[i] for a in fus], w)
        _close(one, Interval(*(a[i] for a in sb)), 1e-15)


# ----------------------------------------------------------------------------- exact identities
def test_k1_stratppi_equals_ppi_plus_plus():
    rng = np.random.default_rng(4)
    for batch in ((), (11,)):
        y, f, fu = _data(rng, batch=batch)
        _close(stratppi_mean_ci([y], [f], [fu], [1.0]), ppi_mean_ci(y, f, fu, lam=None), 1e-12)
        _close(stratppi_mean_ci([y], [f], [fu], [1.0], lam=1.0), ppi_mean_ci(y, f, fu), 1e-12)


def test_lambda_zero_stratppi_equals_stratified_classical():
    rng = np.random.default_rng(5)
    ys, fs, fus = _strata(rng, batch=(9,))
    w = [0.2, 0.5, 0.3]
    for ddof in (0, 1):
        _close(stratppi_mean_ci(ys, fs, fus, w, lam=0.0, ddof=ddof),
               stratified_classical_mean_ci(ys, w, ddof=ddof), 1e-12)


def test_stratppi_by_hand():
    rng = np.random.default_rng(6)
    ys, fs, fus = _strata(rng)
    w = np.array([0.5, 0.3, 0.2])
    est, var = 0.0, 0.0
    for k in range(3):
        n, big_n = len(ys[k]), len(fus[k])
        cov = np.mean((ys[k] - ys[k].mean()) * (fs[k] - fs[k].mean()))
        lam = np.clip(cov / ((1 + n / big_n) * np.var(np.concatenate([fs[k], fus[k]]), ddof=1)),
                      0, 1)
        r = ys[k] - lam * fs[k]
        est += w[k] * (lam * fus[k].mean() + r.mean())
        var += w[k] ** 2 * (np.var(r, ddof=1) / n + lam**2 * np.var(fus[k], ddof=1) / big_n)
    ci = stratppi_mean_ci(ys, fs, fus, w)
    assert ci.estimate == pytest.approx(est, abs=1e-14)
    assert ci.se == pytest.approx(np.sqrt(var), rel=1e-12)
    lams = [t.lam for t in stratppi_terms(ys, fs, fus)]
    assert lams[0] > lams[2]  # the informative stratum gets the larger lambda


def test_per_stratum_lambda_sequence():
    rng = np.random.default_rng(7)
    ys, fs, fus = _strata(rng)
    terms = stratppi_terms(ys, fs, fus, lam=[1.0, 0.5, 0.0])
    assert [float(t.lam) for t in terms] == [1.0, 0.5, 0.0]
    _close(combine_strata(terms, [0.2, 0.3, 0.5]),
           stratppi_mean_ci(ys, fs, fus, [0.2, 0.3, 0.5], lam=[1.0, 0.5, 0.0]), 0)


# ----------------------------------------------------------------------------- ppi_py
@pytest.mark.anchor
@pytest.mark.parametrize("slope,n,big_n,alpha", [(0.8, 50, 400, 0.05), (0.3, 200, 5000, 0.1),
                                                 (1.5, 30, 100, 0.05), (-0.5, 80, 1000, 0.2)])
def test_agrees_with_ppi_python(slope, n, big_n, alpha):
    # ppi_py uses 1/n variances (ddof=0) and the same lambda-hat convention (see the module doc)
    ppi_py = pytest.importorskip("ppi_py", reason="ppi-python is not installed: cannot cross-check")
    rng = np.random.default_rng(n)
    for _ in range(3):
        y, f, fu = _data(rng, n, big_n, slope=slope)
        for lam in (1.0, None, 0.4):  # PPI, PPI++ (power-tuned and clipped), fixed lambda
            ours = ppi_mean_ci(y, f, fu, lam=lam, alpha=alpha, ddof=0)
            lo, hi = ppi_py.ppi_mean_ci(y, f, fu, alpha=alpha, lam=lam)
            assert abs(ours.lower - float(np.squeeze(lo))) < 1e-8
            assert abs(ours.upper - float(np.squeeze(hi))) < 1e-8
        lo, hi = ppi_py.classical_mean_ci(y, alpha=alpha)
        ours = classical_mean_ci(y, alpha=alpha, ddof=0)
        assert abs(ours.lower - lo) < 1e-12 and abs(ours.upper - hi) < 1e-12


def test_default_ddof_differs_from_ppi_python_only_by_the_n_over_n_minus_1_factor():
    rng = np.random.default_rng(8)
    y, f, fu = _data(rng, 40, 300)
    a, b = ppi_terms(y, f, fu, 1.0, ddof=1), ppi_terms(y, f, fu, 1.0, ddof=0)
    assert a.var_labelled / b.var_labelled == pytest.approx(40 / 39)
    assert a.var_unlabelled / b.var_unlabelled == pytest.approx(300 / 299)


# ----------------------------------------------------------------------------- allocation
def test_allocation_examples():
    assert proportional_allocation(200, [0.4, 0.3, 0.2, 0.1]).tolist() == [80, 60, 40, 20]
    assert neyman_allocation(100, [0.5, 0.5], [1.0, 3.0]).tolist() == [25, 75]
    assert neyman_allocation(100, [0.98, 0.01, 0.01], [1, 1, 1]).tolist() == [96, 2, 2]
    assert neyman_allocation(10, [0.5, 0.5], [0.0, 0.0]).tolist() == [5, 5]  # no information
    assert neyman_allocation(10, [0.5, 0.5], [0.0, 1.0]).tolist() == [2, 8]
    assert neyman_allocation(7, [0.5, 0.5], [1, 1], min_per_stratum=0).sum() == 7


def test_allocation_properties():
    rng = np.random.default_rng(9)
    for _ in range(300):
        k = int(rng.integers(1, 7))
        w = rng.dirichlet(np.full(k, 0.5)) + 1e-12
        w /= w.sum()
        s = rng.gamma(0.7, size=k) * (rng.random(k) > 0.2)
        n = int(rng.integers(2 * k, 400))
        a = neyman_allocation(n, w, s)
        assert a.sum() == n and a.min() >= 2 and a.dtype.kind == "i"
        # strata above the floor are in proportion to w*s up to rounding (the KKT condition)
        free = a > 2
        if free.sum() >= 2 and np.all(w[free] * s[free] > 0):
            ratio = a[free] / (w[free] * s[free])
            assert ratio.max() - ratio.min() <= (1.0 + 1e-9) / (w[free] * s[free]).min()


def test_neyman_is_optimal_among_integer_allocations():
    # brute force over every allocation of a small budget: Neyman's variance is within rounding
    w, s, n = np.array([0.5, 0.3, 0.2]), np.array([0.2, 0.6, 1.0]), 24
    var = lambda a: float(np.sum(w**2 * s**2 / np.asarray(a)))
    best = min(var(a) for a in itertools.product(range(2, n), repeat=3) if sum(a) == n)
    assert var(neyman_allocation(n, w, s)) <= best * 1.02
    assert var(neyman_allocation(n, w, s)) < var(proportional_allocation(n, w))


def test_allocation_errors():
    with pytest.raises(ValueError, match="n = 5 labels cannot give each of 3 strata"):
        proportional_allocation(5, [0.2, 0.3, 0.5])
    with pytest.raises(TypeError, match="n .* must be an int"):
        proportional_allocation(10.0, [0.5, 0.5])
    with pytest.raises(ValueError, match="sigmas must be 2"):
        neyman_allocation(10, [0.5, 0.5], [1.0, -1.0])
    with pytest.raises(ValueError, match="weights must sum to 1"):
        neyman_allocation(10, [0.5, 0.6], [1.0, 1.0])


def test_calibrated_residual_sd_is_exact_for_a_calibrated_score():
    rng = np.random.default_rng(10)
    f = rng.beta(0.5, 0.8, size=400_000)
    y = (rng.random(f.size) < f).astype(float)  # P(Y = 1 | f) = f: calibrated
    assert calibrated_residual_sd(f) == pytest.approx(np.std(y - f), rel=5e-3)
    with pytest.raises(ValueError, match="probabilities"):
        calibrated_residual_sd([0.2, 1.5])


# ----------------------------------------------------------------------------- theory helpers
def test_theory_variance_and_optimal_lambda():
    var_y, cov, var_f, n, big_n = 0.24, 0.1, 0.15, 100, 1000
    lam = optimal_lambda(cov, var_f, n, big_n, clip=False)
    v = lambda l: ppi_variance(var_y, cov, var_f, n, big_n, l)
    assert v(lam) <= min(v(lam - 1e-3), v(lam + 1e-3))
    assert v(0.0) == pytest.approx(var_y / n)
    assert optimal_lambda(0.5, 0.1, n, big_n) == 1.0


def test_theory_matches_simulation():
    # the exact fixed-lambda variance against the spread of the estimate over 4000 data sets
    rng = np.random.default_rng(11)
    y, f, fu = _data(rng, 50, 400, slope=0.8, batch=(4000,))
    est = ppi_terms(y, f, fu, 0.7).estimate
    big_y, big_f, _ = _data(rng, 400_000, 2, slope=0.8)
    var = ppi_variance(big_y.var(), np.cov(big_y, big_f)[0, 1], big_f.var(), 50, 400, 0.7)
    assert est.var() == pytest.approx(var, rel=0.08)  # 4000 draws: about 2.2% sd on a variance


# ----------------------------------------------------------------------------- bad input
def test_bad_input_names_the_argument():
    y, f = np.zeros(5), np.zeros(5)
    with pytest.raises(ValueError, match="y and f must have the same shape"):
        ppi_mean_ci(y, f[:4], f)
    with pytest.raises(ValueError, match="f_unlabelled needs at least 2"):
        ppi_mean_ci(y, f, [0.1])
    with pytest.raises(ValueError, match="alpha must be in"):
        classical_mean_ci(y, alpha=1.5)
    with pytest.raises(ValueError, match="ddof must be 0"):
        classical_mean_ci(y, ddof=2)
    with pytest.raises(ValueError, match="y contains non-finite"):
        classical_mean_ci([1.0, np.nan])
    with pytest.raises(ValueError, match="lam must be None, a number or one value per stratum"):
        stratppi_mean_ci([y, y], [f, f], [f, f], [0.5, 0.5], lam=[1.0])
    with pytest.raises(ValueError, match="one array per stratum each"):
        stratppi_mean_ci([y, y], [f], [f, f], [0.5, 0.5])
    with pytest.raises(ValueError, match="weights must have one entry per stratum"):
        stratified_classical_mean_ci([y, y], [1.0])
    with pytest.raises(ValueError, match="stratum 1: y needs at least 2"):
        stratppi_mean_ci([y, y[:1]], [f, f[:1]], [f, f], [0.5, 0.5])
    with pytest.raises(ValueError, match="ys must be a non-empty list"):
        stratified_classical_mean_ci(np.zeros((2, 5)), [0.5, 0.5])
    with pytest.raises(ValueError, match="lam must be finite"):
        ppi_mean_ci(y, f, f, lam=np.inf)
    assert normal_interval(0.0, 0.0).width == 0.0
