r"""Rank-aware spectra of symmetric positive semi-definite matrices.

A curvature matrix such as a Gauss–Newton matrix is usually singular: its condition number is
:math:`\kappa = \lambda_{\max}/\lambda_{\min}^{+}`, the ratio of the largest eigenvalue to the
smallest *nonzero* one. In floating point "nonzero" needs a threshold; we count an eigenvalue as
zero when it is below ``rtol`` times the largest (``rtol = 1e-10`` suits float64 matrices whose
nonzero eigenvalues span less than ten decades). Both functions take eigenvalues (any order), a
NumPy array or a torch tensor.
"""
from __future__ import annotations

import numpy as np

__all__ = ["as_eigenvalues", "numerical_rank", "nonzero_eigenvalues", "condition_number",
           "DEFAULT_RTOL"]

DEFAULT_RTOL = 1e-10


def as_eigenvalues(eigenvalues) -> np.ndarray:
    """The eigenvalues as a float64 NumPy vector in decreasing order (torch tensors are copied)."""
    if hasattr(eigenvalues, "detach"):
        eigenvalues = eigenvalues.detach().cpu().numpy()
    ev = np.asarray(eigenvalues, dtype=np.float64)
    if ev.ndim != 1 or ev.size == 0:
        raise ValueError(f"eigenvalues must be a non-empty 1-d array, got shape {ev.shape}")
    if not np.all(np.isfinite(ev)):
        raise ValueError("eigenvalues contain NaN or infinity")
    return np.sort(ev)[::-1]


def _rtol(rtol: float) -> float:
    if not 0 < rtol < 1:
        raise ValueError(f"rtol must lie in (0, 1), got {rtol!r}")
    return float(rtol)


def numerical_rank(eigenvalues, rtol: float = DEFAULT_RTOL) -> int:
    """How many eigenvalues exceed ``rtol`` times the largest (0 for the zero matrix)."""
    ev = as_eigenvalues(eigenvalues)
    if ev[0] <= 0:
        return 0
    return int(np.sum(ev > _rtol(rtol) * ev[0]))


def nonzero_eigenvalues(eigenvalues, rtol: float = DEFAULT_RTOL) -> np.ndarray:
    """The eigenvalues above ``rtol`` times the largest, in decreasing order."""
    ev = as_eigenvalues(eigenvalues)
    return ev[:numerical_rank(ev, rtol)]


def condition_number(eigenvalues, rtol: float = DEFAULT_RTOL) -> float:
    """:math:`\\lambda_{\\max}/\\lambda_{\\min}^{+}` over the nonzero eigenvalues (inf for zero)."""
    nz = nonzero_eigenvalues(eigenvalues, rtol)
    if nz.size == 0:
        return float("inf")
    return float(nz[0] / nz[-1])
