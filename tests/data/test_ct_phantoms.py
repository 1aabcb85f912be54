"""Random 3-D ellipsoid phantoms: shape, range, the circle, determinism, cross-slice correlation."""
import numpy as np
import pytest

from reprobook.data.ct_phantoms import ellipsoid_volumes


def test_shapes_range_and_circle():
    v = ellipsoid_volumes(3, 16, 10, np.random.default_rng(0))
    assert v.shape == (3, 10, 16, 16)
    assert v.min() >= 0 and v.max() <= 1 and v.max() > 0.2
    c = 8
    r2 = (np.arange(16) - c)[:, None] ** 2 + (np.arange(16) - c)[None, :] ** 2
    assert np.all(v[..., r2 > c ** 2] == 0)


def test_deterministic_and_varied():
    a = ellipsoid_volumes(2, 12, 6, np.random.default_rng(5))
    b = ellipsoid_volumes(2, 12, 6, np.random.default_rng(5))
    assert np.array_equal(a, b)
    assert not np.array_equal(a[0], a[1])


def test_neighbouring_slices_are_more_alike_than_neighbouring_columns():
    v = ellipsoid_volumes(8, 24, 24, np.random.default_rng(1))
    assert np.abs(np.diff(v, axis=1)).mean() < 0.7 * np.abs(np.diff(v, axis=3)).mean()


def test_bad_sizes_are_named():
    with pytest.raises(ValueError, match="count"):
        ellipsoid_volumes(0, 8, 8, np.random.default_rng(0))
    with pytest.raises(ValueError, match="n must"):
        ellipsoid_volumes(1, 2, 8, np.random.default_rng(0))
