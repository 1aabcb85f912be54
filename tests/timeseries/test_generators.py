import numpy as np
import pytest

from reprobook import rng
from reprobook.timeseries.generators import corrupt_channels, leader_follower, multi_period


def test_leader_follower_structure():
    d = leader_follower(8, 500, rng=rng(0), noise_sigma=0.0, drift_sigma=0.0)
    assert d.values.shape == (500, 8) and d.leaders.sum() == 4
    assert ((d.lags == 0) | ((d.lags >= 4) & (d.lags <= 12))).all()
    # without noise each channel is exactly its loadings times the delayed drivers
    hi = 12
    for c in range(8):
        z = d.drivers[hi - d.lags[c]: hi - d.lags[c] + 500]
        np.testing.assert_allclose(d.values[:, c], z @ d.loadings[c], atol=1e-12)


def test_follower_is_a_delayed_leader():
    """A follower with the leader's loadings is the leader shifted by its lag."""
    d = leader_follower(2, 300, rng=rng(1), noise_sigma=0.0, drift_sigma=0.0, leader_share=0.5)
    lead, fol = np.flatnonzero(d.lags == 0)[0], np.flatnonzero(d.lags > 0)[0]
    lag = d.lags[fol]
    z = d.drivers
    x_f = z[12 - lag: 12 - lag + 300] @ d.loadings[lead]        # follower reading leader's loadings
    np.testing.assert_allclose(x_f[lag:], d.values[:-lag, lead], atol=1e-12)


def test_leader_follower_seeded_and_checked():
    a = leader_follower(4, 100, rng=rng(3)).values
    b = leader_follower(4, 100, rng=rng(3)).values
    c = leader_follower(4, 100, rng=rng(4)).values
    assert np.array_equal(a, b) and not np.array_equal(a, c)
    with pytest.raises(ValueError, match="n_channels"):
        leader_follower(0, 100, rng=rng(0))
    with pytest.raises(ValueError, match="lag_range"):
        leader_follower(4, 100, lag_range=(0, 3), rng=rng(0))
    with pytest.raises(TypeError, match="Generator"):
        leader_follower(4, 100, rng=0)


def test_corrupt_channels():
    x = rng(0).standard_normal((1000, 8)) * 3 + 5
    y, mask = corrupt_channels(x, 0.25, rng=rng(1))
    assert mask.sum() == 2
    np.testing.assert_array_equal(y[:, ~mask], x[:, ~mask])
    for c in np.flatnonzero(mask):
        assert abs(np.corrcoef(x[:, c], y[:, c])[0, 1]) < 0.1
        assert y[:, c].std() == pytest.approx(x[:, c].std(), rel=0.1)
    with pytest.raises(ValueError, match="share"):
        corrupt_channels(x, 1.5, rng=rng(0))


def test_multi_period_long_sine():
    x0 = multi_period(3, 4000, long_period=None, rng=rng(0), walk_sigma=0, noise_sigma=0)
    x1 = multi_period(3, 4000, long_period=1000, rng=rng(0), walk_sigma=0, noise_sigma=0)
    d = x1 - x0                                             # the long sine alone
    spec = np.abs(np.fft.rfft(d[:, 0]))
    assert spec.argmax() == 4                                # 4000 / 1000 cycles
    with pytest.raises(ValueError, match="long_period"):
        multi_period(1, 10, long_period=-1, rng=rng(0))


def test_ar1_recursion_and_variance():
    from reprobook.timeseries.generators import _ar1
    r1, r2 = rng(5), rng(5)
    u = _ar1(r1, (20000, 2), 0.9)
    eps = r2.standard_normal((20000, 2))
    manual = np.empty_like(eps)
    manual[0] = eps[0]
    for t in range(1, 50):
        manual[t] = 0.9 * manual[t - 1] + np.sqrt(1 - 0.81) * eps[t]
    np.testing.assert_allclose(u[:50], manual[:50], atol=1e-12)
    assert u.var(0) == pytest.approx([1, 1], rel=0.1)
