r"""Power-law exponents: the least-squares slope of :math:`\log y` against :math:`\log x`.

A quantity that scales as :math:`y \approx c\,x^{p}` has :math:`\log y = \log c + p \log x`; the
fitted slope estimates :math:`p` from a finite range of :math:`x` (width, heads, depth).
"""
from __future__ import annotations

import numpy as np

__all__ = ["loglog_slope"]


def loglog_slope(x, y) -> np.ndarray:
    """Slope of log y against log x, fitted along the last axis of ``y`` (one slope per row).

    ``x``: 1-D, >= 2 distinct positive values; ``y``: (..., len(x)), positive. Returns an array of
    shape ``y.shape[:-1]`` (a 0-d array for 1-D ``y``).
    """
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    if x.ndim != 1 or len(x) < 2 or len(np.unique(x)) < 2:
        raise ValueError(f"x must be 1-D with >= 2 distinct values, got {x}")
    if y.ndim < 1 or y.shape[-1] != len(x):
        raise ValueError(f"y's last axis must have len(x) = {len(x)} entries, got shape {y.shape}")
    if np.any(x <= 0) or np.any(~(y > 0)):
        raise ValueError("log-log slopes need positive, finite x and y")
    lx = np.log(x) - np.log(x).mean()
    ly = np.log(y)
    return (ly - ly.mean(axis=-1, keepdims=True)) @ lx / (lx @ lx)
