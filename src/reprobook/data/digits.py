r"""scikit-learn's handwritten digits (shipped inside the package), as a PCA or whitened design matrix.

``sklearn.datasets.load_digits`` holds 1 797 grey-level 8×8 images of the digits 0–9 (64 pixels, values
0–16). It installs with scikit-learn, so it loads with no network; it is the book's stand-in for
MNIST, which cannot be had offline.

:func:`digits_features` centres the pixels, projects them on their top ``dim`` principal directions
and, with ``whiten=True``, rescales each direction to unit variance. Because the columns are centred,
the *uncentred* second moment is then exactly the identity,

.. math:: \Sigma = \tfrac1n\sum_i x_i x_i^\top = I_{\text{dim}},

which is the moment a Gauss–Newton matrix of a linear model sees (see
:mod:`reprobook.optim.linear_gn`). With ``whiten=False`` the features keep the PCA variances, so
:math:`\kappa(\Sigma)` is the ratio of the first to the ``dim``-th principal variance.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["DigitsFeatures", "digits_features", "load_digits_arrays", "digits_arrays", "one_hot",
           "N_DIGITS", "N_PIXELS"]

N_DIGITS = 1797
N_PIXELS = 64


@dataclass(frozen=True)
class DigitsFeatures:
    """A design matrix ``x`` (n, dim), one-hot targets ``y`` (n, classes) and the integer labels."""

    x: np.ndarray
    y: np.ndarray
    labels: np.ndarray
    variances: np.ndarray      # the principal variances of the kept directions (before whitening)
    whitened: bool

    @property
    def second_moment(self) -> np.ndarray:
        """The uncentred second moment :math:`\\tfrac1n X^\\top X` (dim × dim)."""
        return self.x.T @ self.x / len(self.x)


def load_digits_arrays() -> tuple[np.ndarray, np.ndarray]:
    """The 1 797 images as float64 pixels (1797, 64) and their labels, from scikit-learn's copy."""
    from sklearn.datasets import load_digits

    data = load_digits()
    return np.asarray(data.data, dtype=np.float64), np.asarray(data.target, dtype=np.int64)


def digits_arrays(rng, pixels: np.ndarray | None = None,
                  labels: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The checked inputs of a split: ``rng`` must be a numpy Generator, and ``pixels``/``labels``
    (the tests pass a small array; default scikit-learn's copy) an (n, d) float64 array and its
    (n,) labels, given together or not at all."""
    if not isinstance(rng, np.random.Generator):
        raise TypeError("rng must be a numpy Generator (reprobook.rng(seed, stream))")
    if (pixels is None) != (labels is None):
        raise ValueError("pass pixels together with labels, or neither")
    if pixels is None:
        pixels, labels = load_digits_arrays()
    pixels, labels = np.asarray(pixels, dtype=np.float64), np.asarray(labels)
    if pixels.ndim != 2 or labels.shape != (pixels.shape[0],):
        raise ValueError(f"pixels must be (n, d) and labels (n,), got {pixels.shape} and "
                         f"{labels.shape}")
    return pixels, labels


def one_hot(labels: np.ndarray, classes: int) -> np.ndarray:
    """One-hot rows (n, classes) of integer labels in ``[0, classes)``."""
    labels = np.asarray(labels)
    if labels.ndim != 1 or not np.issubdtype(labels.dtype, np.integer):
        raise ValueError(f"labels must be a 1-d integer array, got shape {labels.shape}, "
                         f"dtype {labels.dtype}")
    if labels.size and (labels.min() < 0 or labels.max() >= classes):
        raise ValueError(f"labels must lie in [0, {classes}), got [{labels.min()}, {labels.max()}]")
    out = np.zeros((labels.size, classes))
    out[np.arange(labels.size), labels] = 1.0
    return out


def digits_features(dim: int, *, whiten: bool = True, n: int | None = None,
                    rng: np.random.Generator | None = None,
                    classes: int = 10, pixels: np.ndarray | None = None,
                    labels: np.ndarray | None = None) -> DigitsFeatures:
    """The digits as ``dim`` principal components, whitened (second moment ``I``) or not.

    ``n`` keeps a random subset of that many images (drawn with ``rng``, required then) *before*
    the PCA, so that the subset's own second moment is the identity. ``classes``: the width of the
    one-hot targets (10 digits). ``pixels``/``labels`` replace
    scikit-learn's copy (the tests pass a small array they make).
    """
    if pixels is None:
        if labels is not None:
            raise ValueError("pass pixels together with labels, or neither")
        pixels, labels = load_digits_arrays()
    pixels = np.asarray(pixels, dtype=np.float64)
    if pixels.ndim != 2:
        raise ValueError(f"pixels must be a 2-d array (images, pixels), got shape {pixels.shape}")
    labels = np.asarray(labels)
    if labels.shape != (pixels.shape[0],):
        raise ValueError(f"labels must have shape ({pixels.shape[0]},), got {labels.shape}")
    if isinstance(dim, bool) or not isinstance(dim, (int, np.integer)) or dim < 1:
        raise ValueError(f"dim must be a positive int, got {dim!r}")
    if n is not None:
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or not 2 <= n <= len(pixels):
            raise ValueError(f"n must be an int in [2, {len(pixels)}], got {n!r}")
        if rng is None:
            raise ValueError("a subset (n=...) needs rng, a numpy Generator, to draw it")
        keep = np.sort(rng.choice(len(pixels), size=int(n), replace=False))
        pixels, labels = pixels[keep], labels[keep]
    centred = pixels - pixels.mean(axis=0)
    # principal directions from the SVD of the centred data; the variance of direction j is s_j^2/n
    _, s, vt = np.linalg.svd(centred, full_matrices=False)
    variances = s ** 2 / len(centred)
    rank = int(np.sum(variances > 1e-12 * variances[0]))
    if dim > rank:
        raise ValueError(f"dim={dim} exceeds the {rank} directions of nonzero variance in these "
                         f"{len(centred)} images")
    x = centred @ vt[:dim].T
    if whiten:
        x = x / np.sqrt(variances[:dim])
    return DigitsFeatures(x=x, y=one_hot(labels.astype(np.int64), classes),
                          labels=labels.astype(np.int64), variances=variances[:dim],
                          whitened=bool(whiten))
