r"""Irregularly sampled classification series with a known label, and random point drops.

**Sinusoids** (:func:`sinusoids`, the frequency-classification task of the Rough Transformer paper,
reconstructed). A sample is observed at :math:`L` sorted uniform times on :math:`[0, 1]` (a fresh
draw per sample, so no two samples share a grid) with

.. math:: x(t) = \sin(2\pi\,\omega(t)\,t + \varphi) + \sigma\,\varepsilon,\qquad
          \varphi \sim U[0, 2\pi),\ \varepsilon\sim N(0, 1).

* ``kind="single"``: :math:`\omega(t) = \omega` for all :math:`t`; the class is the index of
  :math:`\omega` in ``freqs``.
* ``kind="long"``: :math:`\omega(t) = \omega_1` on :math:`t < 1/2` and :math:`\omega_2` after it,
  with an independent phase for each half; the class is the pair, :math:`i_1 \cdot K + i_2` for
  ``K = len(freqs)``, so a classifier must remember the first half while reading the second.

**Drops** (:func:`drop_mask`): every point is dropped independently with probability ``rate``, and
at least ``keep_min`` points of every sample are kept (the first ones drawn among the kept are
restored), as in the paper's random-drop experiments.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["IrregularSet", "sinusoids", "drop_mask", "KINDS"]

KINDS = ("single", "long")


@dataclass
class IrregularSet:
    """``times [n, L]`` sorted in [0, 1], ``values [n, L, C]``, integer ``labels [n]``."""
    times: np.ndarray
    values: np.ndarray
    labels: np.ndarray
    n_classes: int

    def __len__(self):
        return len(self.labels)

    def subset(self, idx) -> "IrregularSet":
        return IrregularSet(self.times[idx], self.values[idx], self.labels[idx], self.n_classes)


def sinusoids(n: int, length: int, *, rng: np.random.Generator, kind: str = "single",
              freqs=tuple(range(1, 11)), noise: float = 0.1) -> IrregularSet:
    """``n`` series of ``length`` irregular points (see the module docstring), classes balanced in
    expectation (labels drawn uniformly)."""
    if kind not in KINDS:
        raise ValueError(f"unknown kind {kind!r}; choose one of {KINDS}")
    if isinstance(n, bool) or int(n) != n or n < 1 or int(length) != length or length < 2:
        raise ValueError(f"need n >= 1 and length >= 2 integers, got n={n!r}, length={length!r}")
    freqs = np.asarray(freqs, dtype=np.float64)
    if freqs.ndim != 1 or len(freqs) < 2 or np.any(freqs <= 0):
        raise ValueError(f"freqs must be at least two positive frequencies, got {freqs}")
    if noise < 0:
        raise ValueError(f"noise must be >= 0, got {noise}")
    K = len(freqs)
    t = np.sort(rng.uniform(0.0, 1.0, size=(n, length)), axis=1)
    eps = rng.standard_normal((n, length))
    if kind == "single":
        labels = rng.integers(0, K, size=n)
        phase = rng.uniform(0, 2 * np.pi, size=(n, 1))
        x = np.sin(2 * np.pi * freqs[labels][:, None] * t + phase)
        n_classes = K
    else:
        i1, i2 = rng.integers(0, K, size=n), rng.integers(0, K, size=n)
        p1, p2 = rng.uniform(0, 2 * np.pi, size=(2, n, 1))
        first = t < 0.5
        x = np.where(first, np.sin(2 * np.pi * freqs[i1][:, None] * t + p1),
                     np.sin(2 * np.pi * freqs[i2][:, None] * t + p2))
        labels, n_classes = i1 * K + i2, K * K
    return IrregularSet(t, (x + noise * eps)[..., None], labels.astype(np.int64), n_classes)


def drop_mask(shape, rate: float, *, rng: np.random.Generator, keep_min: int = 2) -> np.ndarray:
    """Boolean mask ``[n, L]`` (True = kept): each point dropped with probability ``rate``, at least
    ``keep_min`` kept per row."""
    n, L = shape
    if not 0.0 <= rate < 1.0:
        raise ValueError(f"rate must be in [0, 1), got {rate}")
    if keep_min > L:
        raise ValueError(f"keep_min={keep_min} exceeds the {L} points of a row")
    keep = rng.uniform(size=(n, L)) >= rate
    short = keep.sum(1) < keep_min
    for i in np.flatnonzero(short):   # rare: restore random points until keep_min are kept
        extra = rng.choice(np.flatnonzero(~keep[i]), size=keep_min - keep[i].sum(), replace=False)
        keep[i, extra] = True
    return keep
