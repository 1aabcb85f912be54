"""Unit tests of reprobook.data.natural_images."""
import numpy as np
import pytest

from reprobook.data.natural_images import (
    PHOTOS, band_pass, derivative_of_gaussian, neighbour_pairs, photo,
)


def test_photos_load_as_grey_levels():
    for name in ("camera", "china"):
        img = photo(name)
        assert img.ndim == 2 and 0 <= img.min() and img.max() <= 1 and not img.flags.writeable
    assert len(PHOTOS) == 6
    with pytest.raises(ValueError, match="unknown photo"):
        photo("lena")


def test_filter_is_an_oriented_zero_mean_derivative():
    h = derivative_of_gaussian(7, 1.5, 0.0)
    assert h.shape == (7, 7) and abs(h.sum()) < 1e-12 and np.linalg.norm(h) == pytest.approx(1)
    # a horizontal ramp excites the x-derivative and not the y-derivative
    ramp = np.tile(np.arange(20.0), (20, 1))
    assert np.all(np.abs(band_pass(ramp, orientation=0.0)) > 0.1)
    assert np.allclose(band_pass(ramp, orientation=np.pi / 2), 0, atol=1e-12)
    assert np.allclose(band_pass(np.ones((10, 10))), 0, atol=1e-12)
    with pytest.raises(ValueError, match="odd"):
        derivative_of_gaussian(6)


def test_neighbour_pairs_pick_the_offset_partner_within_the_row_band():
    resp = np.arange(100.0).reshape(10, 10)          # value = 10 * row + column
    p = neighbour_pairs(resp, 500, np.random.default_rng(0), offset=(2, 1), rows=(0.5, 1.0))
    assert np.allclose(p[:, 1] - p[:, 0], 21)
    assert p[:, 0].min() >= 40 and p[:, 0].max() < 80
    with pytest.raises(ValueError, match="2-D"):
        neighbour_pairs(np.zeros(5), 3, np.random.default_rng(0))
    with pytest.raises(ValueError, match="rows"):
        neighbour_pairs(resp, 3, np.random.default_rng(0), rows=(0.5, 0.5))
