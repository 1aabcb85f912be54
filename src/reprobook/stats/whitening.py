"""ZCA (zero-phase, symmetric) whitening: ``x -> (x - mean) C^{-1/2}`` with ``C`` the sample
covariance and ``C^{-1/2} = U diag(lambda^{-1/2}) U^T`` its symmetric inverse square root.

Among all linear maps ``M`` with ``M C M^T = I`` it is the unique symmetric positive-definite one,
and the one closest to the identity (it rotates nothing): the fixed point of the linear adaptive
whitening circuit (:mod:`reprobook.learning.interneuron_circuit`), and the baseline it is judged
against.
"""
from __future__ import annotations

import numpy as np


def inverse_sqrt(cov) -> np.ndarray:
    """The symmetric inverse square root of a symmetric positive-definite matrix."""
    cov = np.asarray(cov, dtype=np.float64)
    if cov.ndim != 2 or cov.shape[0] != cov.shape[1]:
        raise ValueError(f"cov must be a square matrix, got shape {cov.shape}")
    if not np.allclose(cov, cov.T, rtol=1e-10, atol=1e-12 * np.abs(cov).max()):
        raise ValueError("cov must be symmetric")
    lam, u = np.linalg.eigh(cov)
    if lam[0] <= 0:
        raise ValueError(f"cov must be positive definite (smallest eigenvalue {lam[0]:.3g})")
    return (u / np.sqrt(lam)) @ u.T


class ZCA:
    """Offline ZCA whitening fitted on samples ``x`` (n, d)."""

    def __init__(self, x, center: bool = True):
        x = np.asarray(x, dtype=np.float64)
        if x.ndim != 2 or x.shape[0] <= x.shape[1]:
            raise ValueError(f"x must be (n, d) with n > d, got shape {x.shape}")
        self.mean = x.mean(axis=0) if center else np.zeros(x.shape[1])
        xc = x - self.mean
        self.cov = xc.T @ xc / (len(x) - 1)
        self.matrix = inverse_sqrt(self.cov)

    def __call__(self, x) -> np.ndarray:
        x = np.asarray(x, dtype=np.float64)
        if x.ndim != 2 or x.shape[1] != len(self.mean):
            raise ValueError(f"x must be (n, {len(self.mean)}), got shape {x.shape}")
        return (x - self.mean) @ self.matrix
