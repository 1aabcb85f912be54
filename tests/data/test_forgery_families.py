import numpy as np
import pytest
from scipy.fft import dctn

from reprobook.data.forgery_families import (FAMILIES, face_crops, jpeg_table, make_fakes, real_crops,
                                             transposed_conv_kernel)


@pytest.fixture(scope="module")
def crops():
    return real_crops(24, np.random.default_rng(0), rows=(0.0, 0.5))


def test_real_crops_shape_range_and_determinism(crops):
    assert crops.shape == (24, 1, 32, 32) and crops.dtype == np.float32
    assert crops.min() >= 0 and crops.max() <= 1 and crops.std() > 0.05
    again = real_crops(24, np.random.default_rng(0), rows=(0.0, 0.5))
    np.testing.assert_array_equal(crops, again)


def test_real_crops_rejects_bad_input():
    g = np.random.default_rng(0)
    with pytest.raises(ValueError, match="rows"):
        real_crops(2, g, rows=(0.5, 0.5))
    with pytest.raises(ValueError, match="size"):
        real_crops(2, g, size=30)
    with pytest.raises(ValueError, match="unknown photos"):
        real_crops(2, g, photos=("lena",))
    with pytest.raises(ValueError, match="positive integer"):
        real_crops(0, g)


def test_face_crops_are_windows_of_disjoint_lfw_faces():
    from skimage.data import lfw_subset
    faces = lfw_subset()[:100]
    tr = face_crops(40, np.random.default_rng(0), faces=(0.0, 0.7))
    te = face_crops(20, np.random.default_rng(1), faces=(0.7, 1.0))
    assert tr.shape == (40, 1, 24, 24) and tr.dtype == np.float32
    assert np.array_equal(tr, face_crops(40, np.random.default_rng(0), faces=(0.0, 0.7)))

    def source(c):   # the face index a crop was cut from (any offset, either flip)
        for i, f in enumerate(faces):
            for a in (0, 1):
                for b in (0, 1):
                    w = f[a:a + 24, b:b + 24]
                    if np.allclose(w, c) or np.allclose(w[:, ::-1], c):
                        return i
        return None
    assert all(source(c[0]) is not None and source(c[0]) < 70 for c in tr)
    assert all(source(c[0]) is not None and source(c[0]) >= 70 for c in te)
    with pytest.raises(ValueError, match="size"):
        face_crops(4, np.random.default_rng(0), size=32)
    with pytest.raises(ValueError, match="fraction range"):
        face_crops(4, np.random.default_rng(0), faces=(0.5, 0.5))


@pytest.mark.parametrize("family", FAMILIES)
def test_every_family_is_a_small_bounded_trace(crops, family):
    fake = make_fakes(crops, family, np.random.default_rng(1))
    assert fake.shape == crops.shape and fake.dtype == np.float32
    assert fake.min() >= 0 and fake.max() <= 1
    rms = float(np.sqrt(((fake - crops) ** 2).mean()))
    assert 0.003 < rms < 0.1, rms            # a trace, not a new image


def test_nearest_is_block_constant_with_the_block_means(crops):
    fake = make_fakes(crops, "nearest", np.random.default_rng(0))
    blocks = fake.reshape(24, 1, 16, 2, 16, 2)
    assert np.allclose(blocks, blocks[:, :, :, :1, :, :1], atol=1e-7)
    means = crops.reshape(24, 1, 16, 2, 16, 2).mean(axis=(3, 5))
    np.testing.assert_allclose(fake[:, :, ::2, ::2], means, atol=1e-6)


def test_jpeg_table_and_quality():
    assert jpeg_table(50)[0, 0] == 16 and jpeg_table(50)[7, 7] == 99
    assert (jpeg_table(100) == 1).all()
    with pytest.raises(ValueError, match="quality"):
        jpeg_table(0)


def test_transposed_conv_kernel_has_unequal_polyphase_gains():
    k = transposed_conv_kernel(np.random.default_rng(3))
    gains = np.array([[k[a::2, b::2].sum() for b in range(2)] for a in range(2)])
    assert abs(gains.mean() - 1) < 1e-12
    assert gains.std() > 1e-3                 # what prints the checkerboard


def test_periodic_trace_is_high_frequency(crops):
    fake = make_fakes(crops, "periodic", np.random.default_rng(2))
    e = (dctn((fake - crops)[:, 0].astype(np.float64), norm="ortho", axes=(1, 2)) ** 2).mean(0)
    u = np.arange(32)
    r = np.sqrt(u[:, None] ** 2 + u[None] ** 2)
    assert e[r > 12].sum() / e.sum() > 0.8


def test_make_fakes_rejects_bad_input(crops):
    with pytest.raises(ValueError, match="unknown family"):
        make_fakes(crops, "gan", np.random.default_rng(0))
    with pytest.raises(ValueError, match="shape"):
        make_fakes(crops[:, 0], "jpeg", np.random.default_rng(0))
