"""Digits features: whitening makes the uncentred second moment I; subsets; a made-up pixel array."""
import numpy as np
import pytest

from reprobook import rng
from reprobook.data.digits import (N_DIGITS, N_PIXELS, digits_arrays, digits_features,
                                   load_digits_arrays, one_hot)


def small_pixels():
    g = rng(0)
    return g.integers(0, 17, size=(60, 12)).astype(float), np.arange(60) % 10


def test_whitened_second_moment_is_identity_on_a_made_array():
    pix, lab = small_pixels()
    f = digits_features(5, pixels=pix, labels=lab)
    np.testing.assert_allclose(f.second_moment, np.eye(5), atol=1e-12)
    assert f.y.shape == (60, 10) and np.all(f.y.sum(axis=1) == 1)
    g = digits_features(5, whiten=False, pixels=pix, labels=lab)
    np.testing.assert_allclose(g.second_moment, np.diag(g.variances), atol=1e-9)
    assert np.all(np.diff(g.variances) <= 0)


def test_subset_is_whitened_on_itself_and_reproducible():
    pix, lab = small_pixels()
    a = digits_features(4, n=30, rng=rng(1), pixels=pix, labels=lab)
    b = digits_features(4, n=30, rng=rng(1), pixels=pix, labels=lab)
    np.testing.assert_array_equal(a.x, b.x)
    np.testing.assert_allclose(a.second_moment, np.eye(4), atol=1e-12)


def test_sklearn_copy_loads_offline():
    pix, lab = load_digits_arrays()
    assert pix.shape == (N_DIGITS, N_PIXELS) and set(lab) == set(range(10))
    f = digits_features(16)
    np.testing.assert_allclose(f.second_moment, np.eye(16), atol=1e-10)


def test_bad_input():
    pix, lab = small_pixels()
    with pytest.raises(ValueError, match="exceeds"):
        digits_features(13, pixels=pix, labels=lab)
    with pytest.raises(ValueError, match="rng"):
        digits_features(3, n=10, pixels=pix, labels=lab)
    with pytest.raises(ValueError, match="labels must have shape"):
        digits_features(3, pixels=pix, labels=lab[:5])
    with pytest.raises(ValueError, match="dim"):
        digits_features(0, pixels=pix, labels=lab)
    with pytest.raises(ValueError, match="lie in"):
        one_hot(np.array([0, 10]), 10)


def test_digits_arrays_checks_what_a_split_is_given():
    px, lab = digits_arrays(rng(0, 0), np.ones((5, 4), dtype=np.int32), np.arange(5))
    assert px.dtype == np.float64 and px.shape == (5, 4) and lab.tolist() == list(range(5))
    with pytest.raises(TypeError, match="numpy Generator"):
        digits_arrays(0)
    with pytest.raises(ValueError, match="together"):
        digits_arrays(rng(0, 0), pixels=np.ones((5, 4)))
    with pytest.raises(ValueError, match=r"\(n, d\)"):
        digits_arrays(rng(0, 0), np.ones((5, 4)), np.arange(4))
