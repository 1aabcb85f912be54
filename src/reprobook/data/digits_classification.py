"""scikit-learn's handwritten digits as a classification task: split, standardised, noisy labels.

``sklearn.datasets.load_digits`` holds 1 797 grey-level 8x8 images of the digits 0-9 (64 pixels,
values 0-16); it installs with scikit-learn, so it loads with no network. :func:`digits_split`
shuffles the images, holds out a test and a validation set, standardises every pixel with the
training set's mean and standard deviation, and flips a fraction of the *training* labels
(:func:`reprobook.data.noisy_labels.symmetric_label_noise`); validation and test labels stay clean.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .digits import digits_arrays
from .noisy_labels import symmetric_label_noise

__all__ = ["DigitsSplit", "digits_split"]


@dataclass(frozen=True)
class DigitsSplit:
    x_train: np.ndarray        # (n_train, 64) float32, standardised
    y_train: np.ndarray        # noisy training labels
    y_train_clean: np.ndarray
    flipped: np.ndarray        # which training labels were flipped
    x_val: np.ndarray
    y_val: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray


def digits_split(rng: np.random.Generator, *, n_test: int = 400, n_val: int = 200,
                 label_noise: float = 0.2, pixels: np.ndarray | None = None,
                 labels: np.ndarray | None = None, n_classes: int = 10) -> DigitsSplit:
    """A shuffled train / validation / test split with noisy training labels (see the module).

    ``pixels`` and ``labels`` replace scikit-learn's copy (the tests pass a small array).
    """
    pixels, labels = digits_arrays(rng, pixels, labels)
    for name, v in (("n_test", n_test), ("n_val", n_val)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{name} must be a positive int, got {v!r}")
    if n_test + n_val >= len(pixels):
        raise ValueError(f"n_test + n_val = {n_test + n_val} leaves no training images out of "
                         f"{len(pixels)}")
    order = rng.permutation(len(pixels))
    test, val, train = order[:n_test], order[n_test:n_test + n_val], order[n_test + n_val:]
    mean, std = pixels[train].mean(axis=0), pixels[train].std(axis=0)
    std = np.where(std > 1e-12, std, 1.0)          # constant pixels (the image border) stay 0
    z = ((pixels - mean) / std).astype(np.float32)
    noisy, flipped = symmetric_label_noise(labels[train], label_noise, n_classes, rng)
    return DigitsSplit(z[train], noisy, labels[train], flipped, z[val], labels[val], z[test],
                       labels[test])
