"""Symmetric label noise: a fixed fraction of labels flipped to a uniformly chosen other class."""
from __future__ import annotations

import numpy as np

__all__ = ["symmetric_label_noise"]


def symmetric_label_noise(labels, rate: float, n_classes: int,
                          rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Flip exactly ``round(rate * len(labels))`` labels, chosen at random, each to one of the
    other ``n_classes - 1`` classes with equal probability. Returns (noisy labels, flipped mask)."""
    labels = np.asarray(labels)
    if labels.ndim != 1 or not np.issubdtype(labels.dtype, np.integer):
        raise ValueError(f"labels must be a 1-d integer array, got shape {labels.shape}, dtype "
                         f"{labels.dtype}")
    if isinstance(n_classes, bool) or not isinstance(n_classes, (int, np.integer)) or n_classes < 2:
        raise ValueError(f"n_classes must be an int >= 2, got {n_classes!r}")
    if labels.size and (labels.min() < 0 or labels.max() >= n_classes):
        raise ValueError(f"labels must lie in [0, {n_classes}), got [{labels.min()}, {labels.max()}]")
    if not 0 <= rate <= 1:
        raise ValueError(f"rate must be in [0, 1], got {rate}")
    if not isinstance(rng, np.random.Generator):
        raise TypeError("rng must be a numpy Generator (reprobook.rng(seed, stream))")
    flipped = np.zeros(labels.size, dtype=bool)
    flipped[rng.choice(labels.size, size=int(round(rate * labels.size)), replace=False)] = True
    shift = rng.integers(1, n_classes, size=labels.size)  # 1..C-1: never the true class
    noisy = np.where(flipped, (labels + shift) % n_classes, labels)
    return noisy.astype(labels.dtype), flipped
