"""The digits split with noisy training labels, on a small array the test makes."""
import numpy as np
import pytest

from reprobook import rng
from reprobook.data.digits_classification import digits_split
from reprobook.data.noisy_labels import symmetric_label_noise


def _fake(n=120, d=9):
    r = np.random.default_rng(0)
    pixels = r.integers(0, 17, size=(n, d)).astype(float)
    pixels[:, 0] = 0.0                                   # a constant pixel, as on the border
    return pixels, r.integers(0, 10, size=n)


def test_split_standardises_with_training_statistics_and_keeps_eval_labels_clean():
    pixels, labels = _fake()
    s = digits_split(rng(0), n_test=20, n_val=10, label_noise=0.3, pixels=pixels, labels=labels)
    assert s.x_train.shape == (90, 9) and s.x_val.shape == (10, 9) and s.x_test.shape == (20, 9)
    assert s.x_train.dtype == np.float32
    assert np.allclose(s.x_train[:, 1:].mean(axis=0), 0, atol=1e-5)
    assert np.allclose(s.x_train[:, 1:].std(axis=0), 1, atol=1e-4)
    assert not s.x_train[:, 0].any()
    assert s.flipped.sum() == 27 and (s.y_train[s.flipped] != s.y_train_clean[s.flipped]).all()
    assert (s.y_train[~s.flipped] == s.y_train_clean[~s.flipped]).all()
    everything = np.sort(np.concatenate([s.y_train_clean, s.y_val, s.y_test]))
    assert (everything == np.sort(labels)).all()


def test_noise_flips_to_every_other_class():
    labels = np.zeros(5000, dtype=np.int64)
    noisy, flipped = symmetric_label_noise(labels, 1.0, 4, rng(1))
    assert flipped.all() and set(np.unique(noisy)) == {1, 2, 3}
    counts = np.bincount(noisy, minlength=4)[1:]
    assert counts.min() > 1500


@pytest.mark.parametrize("call, match", [
    (lambda: symmetric_label_noise(np.array([0, 5]), 0.1, 3, rng(0)), r"\[0, 3\)"),
    (lambda: symmetric_label_noise(np.array([0.5]), 0.1, 3, rng(0)), "integer"),
    (lambda: symmetric_label_noise(np.array([0]), 1.5, 3, rng(0)), "rate"),
    (lambda: digits_split(rng(0), n_test=100, n_val=30, pixels=_fake()[0], labels=_fake()[1]),
     "no training"),
    (lambda: digits_split(rng(0), pixels=_fake()[0]), "together"),
])
def test_bad_arguments_are_named(call, match):
    with pytest.raises(ValueError, match=match):
        call()
