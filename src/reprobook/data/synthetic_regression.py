r"""Regression data with known ground truth, for benchmarking GP model selection.

* :func:`friedman1`: Friedman's (1991) benchmark, :math:`x \sim U[0,1]^d` (:math:`d \ge 5`),

  .. math:: f(x) = 10\sin(\pi x_1 x_2) + 20(x_3 - \tfrac12)^2 + 10x_4 + 5x_5,

  :math:`y = f(x) + \varepsilon`, :math:`\varepsilon \sim \mathcal N(0, \text{noise}^2)`; the
  coordinates beyond the fifth are irrelevant (scikit-learn's ``make_friedman1`` draws it).
* :func:`gp_draw`: one function drawn from a zero-mean GP with an ARD squared-exponential kernel
  :math:`k(x,x') = s^2\exp(-\tfrac12\sum_j (x_j - x'_j)^2/\ell_j^2)` whose lengthscales are known,
  by random Fourier features (Rahimi & Recht 2007):
  :math:`f(x) = s\sqrt{2/D}\sum_{r=1}^D w_r\cos(\omega_r^\top x + b_r)`,
  :math:`\omega_r \sim \mathcal N(0, \operatorname{diag}(\ell)^{-2})`, :math:`b_r \sim U[0, 2\pi]`,
  :math:`w_r \sim \mathcal N(0, 1)`. Its covariance is the RFF kernel, whose expectation is
  :math:`k`; with :math:`D` in the thousands it is a faithful GP draw at O(nD) cost instead of the
  O(n^3) of a Cholesky factor.

Both return float64 torch tensors ``X`` (n, d), ``y`` (n,) and the noiseless ``f`` (n,).
"""
from __future__ import annotations

import math

import numpy as np
import torch

__all__ = ["friedman1", "gp_draw"]


def _check_n(n) -> None:
    if not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"n must be a positive int, got {n!r}")


def friedman1(n: int, seed: int, d: int = 10, noise: float = 1.0):
    """``n`` points of Friedman #1 in ``d >= 5`` dimensions with Gaussian noise of sd ``noise``."""
    _check_n(n)
    if not isinstance(d, int) or d < 5:
        raise ValueError(f"d must be an int >= 5 (Friedman #1 uses five inputs), got {d!r}")
    if not noise >= 0:
        raise ValueError(f"noise must be >= 0, got {noise!r}")
    from sklearn.datasets import make_friedman1
    X, f = make_friedman1(n_samples=n, n_features=d, noise=0.0, random_state=np.random.RandomState(seed))
    rng = np.random.default_rng([seed, 1])
    y = f + noise * rng.standard_normal(n)
    t = lambda a: torch.tensor(a, dtype=torch.float64)  # noqa: E731
    return t(X), t(y), t(f)


def gp_draw(n: int, seed: int, lengthscales, outputscale: float = 1.0, noise: float = 0.1,
            n_features: int = 2048):
    """``n`` uniform points in the unit cube of a GP draw with the given ARD ``lengthscales`` (d,)."""
    _check_n(n)
    ell = np.asarray(lengthscales, dtype=float)
    if ell.ndim != 1 or ell.size < 1 or not (ell > 0).all():
        raise ValueError(f"lengthscales must be a 1-D array of positive numbers, got {lengthscales!r}")
    if not outputscale > 0 or not noise >= 0:
        raise ValueError(f"outputscale must be > 0 and noise >= 0, got {outputscale!r}, {noise!r}")
    if not isinstance(n_features, int) or n_features < 1:
        raise ValueError(f"n_features must be a positive int, got {n_features!r}")
    rng = np.random.default_rng([seed, 2])
    d = ell.size
    omega = rng.standard_normal((n_features, d)) / ell
    b = rng.uniform(0, 2 * math.pi, n_features)
    w = rng.standard_normal(n_features)
    X = rng.uniform(0, 1, (n, d))
    f = math.sqrt(outputscale) * math.sqrt(2.0 / n_features) * np.cos(X @ omega.T + b) @ w
    y = f + noise * rng.standard_normal(n)
    t = lambda a: torch.tensor(a, dtype=torch.float64)  # noqa: E731
    return t(X), t(y), t(f)
