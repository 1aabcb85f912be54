import numpy as np
import pytest

from reprobook.data.lowlight import (COLOUR_PHOTOS, DarkeningRange, colour_photo, darken,
                                     illumination_field, make_pairs, random_patches)


def test_photos_are_rgb_in_unit_range():
    for name in COLOUR_PHOTOS:
        img = colour_photo(name)
        assert img.ndim == 3 and img.shape[0] == 3 and min(img.shape[1:]) >= 256
        assert img.dtype == np.float32 and 0 <= img.min() and img.max() <= 1
        assert not img.flags.writeable
    with pytest.raises(ValueError, match="unknown colour photo"):
        colour_photo("lena")


def test_illumination_field_is_smooth_and_bounded():
    f = illumination_field(40, 50, np.random.default_rng(0), low=0.6, grid=3)
    assert f.shape == (40, 50)
    assert 0.6 <= f.min() and f.max() <= 1.0
    # bilinear between 3 lattice points over 40 pixels: neighbour steps are tiny
    assert np.abs(np.diff(f, axis=0)).max() < 0.4 / 19 + 1e-9
    assert np.abs(np.diff(f, axis=1)).max() < 0.4 / 24 + 1e-9
    assert f.std() > 0.01        # it does vary


def test_noiseless_darkening_is_the_stated_formula():
    clean = colour_photo("chelsea")[:, :32, :32]
    low, p = darken(clean, np.random.default_rng(1), noise=False)
    expect = p["gain"] * p["field"][None] * clean.astype(np.float64) ** p["gamma"]
    np.testing.assert_allclose(low, expect, atol=1e-6)
    spec = DarkeningRange()
    assert spec.gamma[0] <= p["gamma"] <= spec.gamma[1] and spec.gain[0] <= p["gain"] <= spec.gain[1]


def test_noise_variance_is_poisson_gaussian():
    clean = np.full((3, 64, 64), 0.9, dtype=np.float32)
    spec = DarkeningRange(gamma=(1.0, 1.0), gain=(0.2, 0.2), field_min=1.0, shot=(0.05, 0.05),
                          read=(0.02, 0.02))
    rng = np.random.default_rng(2)
    res = np.concatenate([darken(clean, rng, spec)[0].ravel() for _ in range(20)])
    mu = 0.2 * 0.9
    assert abs(res.mean() - mu) < 1e-3
    assert abs(res.var() / (0.05 ** 2 * mu + 0.02 ** 2) - 1) < 0.05


def test_pairs_deterministic_and_shaped():
    a = make_pairs(["astronaut", "rocket"], 5, 16, np.random.default_rng(3))
    b = make_pairs(["astronaut", "rocket"], 5, 16, np.random.default_rng(3))
    for x, y in zip(a, b):
        assert x.shape == (5, 3, 16, 16) and x.dtype == np.float32
        np.testing.assert_array_equal(x, y)
    low, clean = a
    assert low.mean() < 0.5 * clean.mean()       # darker
    assert (low >= 0).all() and (low <= 1).all()


def test_bad_inputs_named():
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="RGB patch"):
        darken(np.zeros((16, 16)), rng)
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        darken(np.full((3, 4, 4), 2.0), rng)
    with pytest.raises(ValueError, match="at least one"):
        random_patches([], 2, 8, rng)
    with pytest.raises(ValueError, match="gamma"):
        DarkeningRange(gamma=(2.0, 1.0))
    with pytest.raises(ValueError, match="smaller than the patch"):
        random_patches(["chelsea"], 1, 400, rng)
