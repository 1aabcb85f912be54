"""Unit tests of reprobook.stats.coverage: the trial harness and its interval summaries."""
import numpy as np
import pytest

from reprobook.stats.coverage import (
    Trials, mean_ci, ratio_of_means_ci, run_trials, stack_trials, summarize, wilson_interval,
)
from reprobook.stats.ppi import classical_mean_ci


def _draw(rng):
    return {"x": rng.standard_normal(30), "pair": (rng.random(3), np.float64(1.0))}


METHODS = {"classical": lambda d: classical_mean_ci(d["x"]),
           "too narrow": lambda d: classical_mean_ci(d["x"], alpha=0.5)}


def test_stack_trials_nested():
    out = stack_trials([_draw(np.random.default_rng(i)) for i in range(4)])
    assert out["x"].shape == (4, 30)
    assert isinstance(out["pair"], tuple) and out["pair"][0].shape == (4, 3)
    assert out["pair"][1].shape == (4,)
    with pytest.raises(ValueError, match="at least one trial"):
        stack_trials([])


def test_run_trials_is_deterministic_and_chunk_free():
    a = run_trials(_draw, METHODS, range(23), chunk=5)
    b = run_trials(_draw, METHODS, range(23), chunk=23)
    c = run_trials(_draw, METHODS, range(7), chunk=3)  # the first trials do not depend on T
    for name in METHODS:
        np.testing.assert_array_equal(a[name].estimate, b[name].estimate)
        np.testing.assert_array_equal(a[name].lower[:7], c[name].lower)
    d = run_trials(_draw, METHODS, range(23), key=(1,))  # another experiment: other data
    assert not np.allclose(a["classical"].estimate, d["classical"].estimate)


def test_coverage_of_a_valid_and_an_invalid_method():
    res = run_trials(_draw, METHODS, range(600), chunk=200)
    good, bad = summarize(res["classical"], 0.0), summarize(res["too narrow"], 0.0)
    assert good.n_trials == 600
    assert good.coverage_ci[0] < 0.95 < good.coverage_ci[1] + 0.01  # t-vs-z at n = 30
    assert bad.coverage_ci[1] < 0.6          # a 50 % interval
    assert good.mean_width > bad.mean_width
    assert good.bias_ci[0] < 0 < good.bias_ci[1]


def test_run_trials_errors():
    with pytest.raises(ValueError, match="method 'scalar' must return one interval per trial"):
        run_trials(_draw, {"scalar": lambda d: classical_mean_ci(d["x"][0])}, range(3))
    with pytest.raises(ValueError, match="seeds must hold"):
        run_trials(_draw, METHODS, [])
    with pytest.raises(ValueError, match="chunk must be"):
        run_trials(_draw, METHODS, range(3), chunk=0)


def test_wilson_interval():
    lo, hi = wilson_interval(95, 100)
    assert lo == pytest.approx(0.8882, abs=1e-4) and hi == pytest.approx(0.9785, abs=1e-4)
    assert wilson_interval(0, 10)[0] == 0.0 and wilson_interval(10, 10)[1] == 1.0
    a, b = wilson_interval(3, 40), wilson_interval(37, 40)
    assert a[0] == pytest.approx(1 - b[1]) and a[1] == pytest.approx(1 - b[0])
    with pytest.raises(ValueError, match="successes"):
        wilson_interval(5, 3)


def test_mean_and_ratio_intervals():
    rng = np.random.default_rng(0)
    b = 1 + rng.random(500)
    r, lo, hi = ratio_of_means_ci(2 * b, b)
    assert (r, lo, hi) == pytest.approx((2.0, 2.0, 2.0))
    # delta-method interval covers the true ratio of means about 95 % of the time
    hits = 0
    for i in range(300):
        g = np.random.default_rng(i)
        x = 1 + g.random(200)
        y = 0.8 * x + 0.2 * g.random(200)
        _, lo, hi = ratio_of_means_ci(y, x)
        hits += lo <= (0.8 * 1.5 + 0.1) / 1.5 <= hi
    assert 0.9 < hits / 300 <= 1.0
    m, lo, hi = mean_ci(np.arange(10.0))
    assert m == 4.5 and lo < m < hi
    with pytest.raises(ValueError, match="paired samples"):
        ratio_of_means_ci([1.0, 2.0], [1.0])


def test_trials_helpers():
    t = Trials(np.array([0.0, 1.0]), np.array([-1.0, 0.5]), np.array([1.0, 2.0]))
    assert t.n_trials == 2
    np.testing.assert_array_equal(t.width, [2.0, 1.5])
    np.testing.assert_array_equal(t.covers(0.0), [True, False])
