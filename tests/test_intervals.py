import math

import numpy as np
import pytest
from scipy import stats

from reprobook import intervals


def test_mean_is_students_t_interval():
    x = [0.71, 0.74, 0.69, 0.75, 0.72]
    e = intervals.mean(x, unit="training seed")
    m, se = np.mean(x), np.std(x, ddof=1) / math.sqrt(5)
    lo, hi = stats.t.interval(0.95, 4, loc=m, scale=se)
    assert e.value == pytest.approx(m) and e.interval == pytest.approx((lo, hi))
    assert e.n == 5 and e.unit == "training seed" and e.samples == tuple(x)
    assert e.why_inconclusive() is None
    assert "n = 5 training seeds" in e.describe()


def test_difference_is_paired_and_ratio_is_the_delta_method():
    a, b = np.array([3.0, 2.5, 2.8, 3.1]), np.array([2.0, 2.1, 1.9, 2.2])
    d = intervals.difference(a, b, unit="seed")
    ref = intervals.mean(a - b, unit="seed")
    assert (d.value, d.low, d.high) == (ref.value, ref.low, ref.high) and d.method == "paired t"
    r = intervals.ratio(a, b, unit="seed")
    R = a.mean() / b.mean()
    half = stats.t.ppf(0.975, 3) * (a - R * b).std(ddof=1) / (2 * b.mean())
    assert r.value == pytest.approx(R) and r.interval == pytest.approx((R - half, R + half))
    assert r.samples == tuple(zip(a.tolist(), b.tolist()))  # the pairs: recomputable
    assert r.to_json()["samples"][0] == [3.0, 2.0]
    with pytest.raises(ValueError, match="paired"):
        intervals.difference(a, b[:3], unit="seed")
    with pytest.raises(ValueError, match="positive mean"):
        intervals.ratio(a, -b, unit="seed")


def test_rates_wilson_and_clopper_pearson():
    w = intervals.rate(95, 100, unit="trial")
    assert w.value == 0.95 and w.k == 95 and 0.88 < w.low < 0.95 < w.high < 0.99
    cp = intervals.rate(95, 100, unit="trial", method="clopper-pearson")
    assert cp.interval == pytest.approx((stats.beta.ppf(0.025, 95, 6), stats.beta.ppf(0.975, 96, 5)))
    full = intervals.rate([True] * 20, unit="trial", method="clopper-pearson")
    assert full.high == 1.0 and full.low == pytest.approx(0.025 ** (1 / 20))
    assert not full.degenerate
    with pytest.raises(ValueError, match="0 <= k <= n"):
        intervals.rate(5, 3, unit="trial")
    with pytest.raises(ValueError, match="0/1"):
        intervals.rate([0.5, 1.0], unit="trial")


def test_bootstrap_needs_enough_replicates_and_is_reproducible():
    x = np.random.default_rng(0).normal(size=40)
    a = intervals.bootstrap(np.median, x, unit="instance", seed=3)
    b = intervals.bootstrap(np.median, x, unit="instance", seed=3)
    assert (a.low, a.high) == (b.low, b.high) and a.low < np.median(x) < a.high
    assert a.method == "BCa bootstrap"
    p = intervals.bootstrap(lambda u, v: np.mean(u) / np.mean(v), x + 5, x + 6, unit="instance",
                            method="percentile")
    assert p.method == "percentile bootstrap" and p.n == 40
    assert p.samples[0] == (x[0] + 5, x[0] + 6)  # paired arms, not a per-replicate statistic
    with pytest.raises(ValueError, match="at least 10 replicates"):
        intervals.bootstrap(np.mean, x[:5], unit="seed")


def test_inconclusive_reasons_and_bad_input():
    assert "only 2" in intervals.mean([1.0, 2.0], unit="seed").why_inconclusive()
    assert "degenerate" in intervals.mean([1.0, 1.0, 1.0], unit="seed").why_inconclusive()
    one = intervals.mean([1.0], unit="seed")
    assert one.degenerate and "only 1" in one.why_inconclusive()
    with pytest.raises(ValueError, match="what one replicate is"):
        intervals.mean([1.0, 2.0, 3.0], unit="")
    with pytest.raises(ValueError, match="1-D"):
        intervals.mean([[1.0, 2.0]], unit="seed")
    with pytest.raises(ValueError, match="non-finite"):
        intervals.mean([1.0, float("nan"), 2.0], unit="seed")
    with pytest.raises(ValueError, match="level"):
        intervals.mean([1.0, 2.0, 3.0], unit="seed", level=95)


def test_json_keeps_samples_and_summarises_huge_ones():
    small = intervals.mean([0.1, 0.2, 0.3], unit="seed").to_json()
    assert small["samples"] == [0.1, 0.2, 0.3] and small["unit"] == "seed"
    big = intervals.rate(np.arange(5000) % 2, unit="trial").to_json()
    assert "samples" not in big and big["samples_summary"]["count"] == 5000 and big["k"] == 2500


def test_quantile_order_statistic_interval_covers_and_refuses_too_few():
    rng = np.random.default_rng(1)
    hits, q = 0, 0.9
    truth = stats.expon.ppf(q)
    for _ in range(400):
        e = intervals.quantile(rng.exponential(size=200), q, unit="stream")
        hits += e.low <= truth <= e.high
    assert hits / 400 >= 0.93  # distribution-free coverage of at least 95%, up to MC noise
    few = intervals.quantile(rng.exponential(size=20), 0.999, unit="stream")
    assert few.high == math.inf and "degenerate" in few.why_inconclusive()
    with pytest.raises(ValueError, match="in \\(0, 1\\)"):
        intervals.quantile([1.0, 2.0, 3.0], 1.5, unit="stream")


def test_rate_difference_newcombe():
    e = intervals.rate_difference(56, 70, 48, 80, unit="trial")
    # Newcombe (1998), Table II, example (a): 56/70 - 48/80 = 0.2, method 10: [0.0524, 0.3339]
    assert e.value == pytest.approx(0.2)
    assert e.interval == pytest.approx((0.0524, 0.3339), abs=6e-4)
    full = intervals.rate_difference(20, 20, 3, 20, unit="seed")
    assert not full.degenerate and full.high <= 1.0
