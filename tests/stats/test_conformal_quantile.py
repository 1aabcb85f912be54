import numpy as np
import pytest

from reprobook.stats.conformal_quantile import (ConformalQuantileGBM, HomoscedasticGBM, QuantileGBM,
                                                conformal_correction, coverage_by_group)


def _data(n, rng):
    x = rng.uniform(0, 1, (n, 1))
    sd = 0.05 + 1.0 * x[:, 0] ** 2                         # noise grows with x
    return x, 2 * x[:, 0] + sd * rng.standard_normal(n), sd


def test_correction_is_the_conformal_order_statistic():
    s = np.arange(1, 20, dtype=float)                     # n = 19, alpha 0.1 -> rank ceil(0.9 * 20) = 18
    assert conformal_correction(s, 0.1) == 18.0
    assert conformal_correction([1.0, 2.0], 0.1) == np.inf


def test_cqr_covers_and_adapts_where_the_homoscedastic_model_does_not():
    rng = np.random.default_rng(0)
    (X, y, _), (Xc, yc, _), (Xt, yt, sdt) = _data(800, rng), _data(400, rng), _data(2000, rng)
    groups = np.digitize(sdt, np.quantile(sdt, [1 / 3, 2 / 3]))
    kw = dict(max_iter=40, min_samples_leaf=30)
    cqr = coverage_by_group(yt, *ConformalQuantileGBM(**kw).fit(X, y, Xc, yc).predict_interval(Xt), groups)
    homo = coverage_by_group(yt, *HomoscedasticGBM(**kw).fit(X, y, Xc, yc).predict_interval(Xt), groups)
    assert 0.86 <= cqr["all"][0] <= 0.94
    assert min(cqr[g][0] for g in range(3)) >= 0.82
    assert homo[2][0] < 0.8 and homo[0][0] > 0.97          # under-covers the noisy, over-covers the quiet
    assert cqr[0][1] < 0.5 * homo[0][1]


def test_quantile_model_orders_its_quantiles_and_errors_are_named():
    rng = np.random.default_rng(1)
    X, y, _ = _data(300, rng)
    lo, hi = QuantileGBM(max_iter=20).fit(X, y).predict_interval(X)
    assert np.all(lo <= hi)
    with pytest.raises(RuntimeError, match="not fitted"):
        QuantileGBM().predict(X)
    with pytest.raises(ValueError, match="y must have shape"):
        QuantileGBM().fit(X, y[:-1])
    with pytest.raises(ValueError, match="alpha"):
        ConformalQuantileGBM(alpha=1.5)
    with pytest.raises(ValueError, match="same length"):
        coverage_by_group(y, y, y, y[:3])
