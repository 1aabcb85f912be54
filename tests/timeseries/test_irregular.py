import numpy as np
import pytest

from reprobook.timeseries.irregular import drop_mask, sinusoids


def test_sinusoids_shapes_labels_and_determinism():
    d = sinusoids(50, 30, rng=np.random.default_rng(0), freqs=(1, 2, 3))
    assert d.times.shape == (50, 30) and d.values.shape == (50, 30, 1) and d.n_classes == 3
    assert np.all(np.diff(d.times, axis=1) >= 0) and d.times.min() >= 0 and d.times.max() <= 1
    assert set(d.labels) <= {0, 1, 2}
    d2 = sinusoids(50, 30, rng=np.random.default_rng(0), freqs=(1, 2, 3))
    assert np.array_equal(d.values, d2.values)
    long = sinusoids(200, 20, rng=np.random.default_rng(1), kind="long", freqs=(1, 2, 3, 4))
    assert long.n_classes == 16 and long.labels.max() < 16 and len(set(long.labels)) > 10
    assert len(long.subset(np.arange(5))) == 5


def test_sinusoid_frequency_is_the_label():
    d = sinusoids(40, 400, rng=np.random.default_rng(2), freqs=(2, 5), noise=0.0)
    for x, t, y in zip(d.values[:, :, 0], d.times, d.labels):
        grid = np.linspace(0, 1, 512, endpoint=False)
        spec = np.abs(np.fft.rfft(np.interp(grid, t, x)))
        assert np.argmax(spec[1:]) + 1 == (2, 5)[y]


def test_long_halves_carry_the_two_frequencies():
    d = sinusoids(30, 2000, rng=np.random.default_rng(3), kind="long", freqs=(2, 8), noise=0.0)
    for x, t, y in zip(d.values[:, :, 0], d.times, d.labels):
        first = np.abs(np.diff(np.sign(x[t < 0.5]))).sum() / 2      # zero crossings ~ 2 * f * 0.5
        second = np.abs(np.diff(np.sign(x[t >= 0.5]))).sum() / 2
        assert abs(first - (2, 8)[y // 2]) <= 1 and abs(second - (2, 8)[y % 2]) <= 1


def test_drop_mask_rate_and_minimum():
    m = drop_mask((200, 100), 0.5, rng=np.random.default_rng(4))
    assert abs(m.mean() - 0.5) < 0.02
    m = drop_mask((50, 10), 0.99, rng=np.random.default_rng(5), keep_min=3)
    assert m.sum(1).min() >= 3
    assert drop_mask((5, 5), 0.0, rng=np.random.default_rng(6)).all()


def test_bad_arguments():
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="unknown kind"):
        sinusoids(10, 10, rng=rng, kind="short")
    with pytest.raises(ValueError, match="freqs"):
        sinusoids(10, 10, rng=rng, freqs=(1,))
    with pytest.raises(ValueError, match="rate"):
        drop_mask((3, 3), 1.0, rng=rng)
    with pytest.raises(ValueError, match="keep_min"):
        drop_mask((3, 3), 0.5, rng=rng, keep_min=4)
