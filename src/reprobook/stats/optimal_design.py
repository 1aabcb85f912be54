r"""G-optimal (equivalently D-optimal) experimental design over a finite set of feature vectors.

For points :math:`x_1, \dots, x_n \in \mathbb R^d` spanning :math:`\mathbb R^d` and a design
:math:`\rho` (a probability vector over the points), let :math:`G(\rho) = \sum_i \rho_i x_i x_i^\top`
and :math:`g(\rho) = \max_i x_i^\top G(\rho)^{-1} x_i`, the largest leverage. The Kiefer-Wolfowitz
theorem: the design minimising :math:`g` maximises :math:`\log\det G` and has :math:`g = d`. A
least-squares fit from :math:`N\rho_i` noisy observations at point :math:`i` then predicts every
point with variance at most :math:`\sigma^2 d / N`: the number of observations a uniform accuracy
needs depends on :math:`d`, not on :math:`n`. This is why linear function approximation can make
sample complexity independent of the number of states.

:func:`g_optimal_design` runs the Frank-Wolfe (Fedorov-Wynn) iteration on :math:`\log\det G`: move
mass to the point of largest leverage :math:`l` with step :math:`(l/d - 1)/(l - 1)`, the exact line
search, until :math:`g \le (1 + \text{tol})\, d`.
"""
from __future__ import annotations

import numpy as np

__all__ = ["g_optimal_design", "max_leverage"]


def _points(x) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    if x.ndim != 2 or x.shape[0] < x.shape[1] or not np.all(np.isfinite(x)):
        raise ValueError(f"points must be a finite (n, d) array with n >= d, got shape {x.shape}")
    if np.linalg.matrix_rank(x) < x.shape[1]:
        raise ValueError("the points must span R^d (otherwise no design has a finite leverage)")
    return x


def max_leverage(points, weights) -> float:
    """:math:`\\max_i x_i^\\top G(\\rho)^{-1} x_i` for the design ``weights`` over ``points``."""
    x = _points(points)
    w = np.asarray(weights, dtype=np.float64)
    if w.shape != (x.shape[0],) or np.any(w < 0) or not w.sum() > 0:
        raise ValueError(f"weights must be {x.shape[0]} non-negative numbers with a positive sum")
    G = (x * (w / w.sum())[:, None]).T @ x
    return float(np.einsum("nd,nd->n", x @ np.linalg.pinv(G), x).max())


def g_optimal_design(points, tol: float = 0.05, max_iter: int = 10_000) -> np.ndarray:
    """A design ``rho`` over ``points`` (n, d) with largest leverage at most ``(1 + tol) d``."""
    x = _points(points)
    if not (isinstance(tol, float) and tol > 0):
        raise ValueError(f"tol must be a float > 0, got {tol!r}")
    n, d = x.shape
    rho = np.full(n, 1.0 / n)
    for _ in range(max_iter):
        G = (x * rho[:, None]).T @ x
        lev = np.einsum("nd,nd->n", x @ np.linalg.inv(G), x)
        i = int(lev.argmax())
        if lev[i] <= (1 + tol) * d:
            return rho
        step = (lev[i] / d - 1) / (lev[i] - 1)
        rho *= 1 - step
        rho[i] += step
    raise RuntimeError(f"the design did not reach leverage (1 + {tol}) d within {max_iter} steps")
