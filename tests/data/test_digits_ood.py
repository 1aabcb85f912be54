import numpy as np
import pytest

from reprobook.data.digits_ood import digits_ood_split, matched_noise, photo_crops


def _tiny():
    rng = np.random.default_rng(0)
    labels = np.repeat(np.arange(6), 10)
    return rng.integers(0, 17, size=(60, 64)).astype(float), labels


def test_split_is_disjoint_and_relabelled():
    pixels, labels = _tiny()
    d = digits_ood_split(np.random.default_rng(1), [4, 1, 2], [0], [3, 5], pixels=pixels,
                         labels=labels)
    assert len(d.x_train) + len(d.x_val) + len(d.x_test) == 30
    assert len(d.x_val_ood) == 10 and len(d.x_test_ood) == 20
    assert set(d.y_train.tolist()) == {0, 1, 2}
    assert d.x_train.dtype == np.float32 and 0 <= d.x_train.min() and d.x_train.max() <= 1
    # the rows of each set are the right classes' images (scaled by 1/16)
    rows = {tuple(r) for r in pixels[np.isin(labels, [3, 5])] / 16}
    assert all(tuple(r.astype(float)) in rows for r in d.x_test_ood.astype(np.float64))
    new_to_old = {0: 4, 1: 1, 2: 2}
    for x, y in zip(d.x_train, d.y_train):
        i = np.flatnonzero(np.all(np.isclose(pixels / 16, x), axis=1))
        assert labels[i[0]] == new_to_old[int(y)]


def test_split_real_digits_and_errors():
    d = digits_ood_split(np.random.default_rng(0), range(5), [5, 6], [7, 8, 9])
    from reprobook.data.digits import load_digits_arrays
    _, labels = load_digits_arrays()
    assert len(d.x_test_ood) == int(np.isin(labels, [7, 8, 9]).sum())
    assert len(d.x_val_ood) == int(np.isin(labels, [5, 6]).sum())
    assert 500 < len(d.x_train) < 600
    with pytest.raises(ValueError, match="disjoint"):
        digits_ood_split(np.random.default_rng(0), [0, 1], [1], [2])
    with pytest.raises(TypeError, match="Generator"):
        digits_ood_split(0, [0, 1], [2], [3])


def test_photo_crops_and_noise():
    x = photo_crops(20, np.random.default_rng(0))
    assert x.shape == (20, 64) and x.dtype == np.float32
    assert x.min() >= 0 and x.max() <= 1 and np.allclose(x.max(1), 1.0)
    assert np.array_equal(x, photo_crops(20, np.random.default_rng(0)))
    ref = np.random.default_rng(1).uniform(0, 0.6, size=(200, 64))
    n = matched_noise(500, ref, np.random.default_rng(2))
    assert n.shape == (500, 64) and 0 <= n.min() and n.max() <= 1
    assert abs(n.mean() - ref.mean()) < 0.02
    with pytest.raises(ValueError, match="unknown photo"):
        photo_crops(2, np.random.default_rng(0), photos=("lena",))
