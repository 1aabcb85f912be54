"""Mutual information between two continuous variables from binned samples.

:func:`equal_mass_mi` bins each variable into ``bins`` equal-mass (quantile) bins by rank and
computes the plug-in mutual information of the ``bins x bins`` contingency table,

    I = H(X) + H(Y) - H(X, Y),    H = -sum_c p_c log p_c    (nats),

with the Miller-Madow bias correction ``H_MM = H + (m - 1) / (2 N)`` on each entropy (``m`` the
number of occupied cells), which removes the plug-in estimator's first-order upward bias of
``(m_xy - m_x - m_y + 1) / (2 N)`` on ``I``. Ranks make the estimate invariant to any strictly
increasing transform of either variable, as the mutual information itself is; so it compares a
linear and a nonlinear transform of the same data on an equal footing (fixed-width bins do not:
a heavy-tailed variable fills few of them).

:func:`fixed_width_mi` is the plug-in estimate on bins of a fixed width (``floor(x / width)``), no
correction; it is what the official code of Lipshutz & Simoncelli (2024) reports.

:func:`gaussian_mi` is the exact value ``-log(1 - rho^2) / 2`` for a bivariate Gaussian with
correlation ``rho``, the ground truth of the tests.
"""
from __future__ import annotations

import numpy as np


def _pair(x, y) -> tuple[np.ndarray, np.ndarray]:
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if x.ndim != 1 or y.ndim != 1 or len(x) != len(y):
        raise ValueError(f"x and y must be 1-D of the same length, got shapes {x.shape} and {y.shape}")
    if len(x) < 2:
        raise ValueError("need at least 2 samples")
    if not (np.all(np.isfinite(x)) and np.all(np.isfinite(y))):
        raise ValueError("x and y must be finite")
    return x, y


def gaussian_mi(rho) -> np.ndarray | float:
    """``I(X; Y) = -log(1 - rho^2) / 2`` nats for jointly Gaussian X, Y with correlation ``rho``."""
    rho = np.asarray(rho, dtype=np.float64)
    if np.any(np.abs(rho) >= 1):
        raise ValueError("|rho| must be < 1")
    out = -0.5 * np.log1p(-rho**2)
    return float(out) if out.ndim == 0 else out


def _table_mi(ix: np.ndarray, iy: np.ndarray, correction: bool) -> float:
    n = len(ix)
    ix, iy = ix - ix.min(), iy - iy.min()
    _, joint = np.unique(ix * (int(iy.max()) + 1) + iy, return_counts=True)   # one code per cell
    _, cx = np.unique(ix, return_counts=True)
    _, cy = np.unique(iy, return_counts=True)

    def entropy(c):
        p = c / n
        return float(-(p * np.log(p)).sum())

    mi = entropy(cx) + entropy(cy) - entropy(joint)
    if correction:
        mi -= (len(joint) - len(cx) - len(cy) + 1) / (2 * n)
    return mi


def equal_mass_bins(x, bins: int) -> np.ndarray:
    """Bin index in ``0..bins-1`` of each sample by rank (ties broken by order): equal counts."""
    x = np.asarray(x)
    if int(bins) != bins or bins < 2:
        raise ValueError(f"bins must be an integer >= 2, got {bins!r}")
    if len(x) < bins:
        raise ValueError(f"need at least bins={bins} samples, got {len(x)}")
    ranks = np.empty(len(x), dtype=np.int64)
    ranks[np.argsort(x, kind="stable")] = np.arange(len(x))
    return ranks * int(bins) // len(x)


def equal_mass_mi(x, y, bins: int = 20, correction: bool = True) -> float:
    """Mutual information (nats) from a ``bins x bins`` equal-mass histogram, Miller-Madow
    corrected unless ``correction=False``."""
    x, y = _pair(x, y)
    return _table_mi(equal_mass_bins(x, bins), equal_mass_bins(y, bins), correction)


def fixed_width_mi(x, y, width: float = 0.5) -> float:
    """Plug-in mutual information (nats) on square bins of side ``width`` (no correction)."""
    x, y = _pair(x, y)
    if not width > 0:
        raise ValueError(f"width must be positive, got {width!r}")
    return _table_mi(np.floor(x / width).astype(np.int64), np.floor(y / width).astype(np.int64),
                     correction=False)
