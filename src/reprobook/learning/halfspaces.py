r"""Homogeneous halfspaces under Gaussian marginals: learning them, and their exact disagreement.

A homogeneous halfspace is :math:`f_w(x) = \operatorname{sign}\langle w, x\rangle` with
:math:`\lVert w\rVert = 1`.

**Learning (Chow parameters).** With :math:`x \sim N(0, I_d)` and :math:`y = f_{w^\star}(x)`, the
Chow vector :math:`\mathbb E[yx] = \sqrt{2/\pi}\,w^\star`, so :math:`\hat w = c/\lVert c\rVert` with
:math:`c = \frac1n\sum_i y_i x_i` is consistent (:func:`chow_estimate`, :func:`train_chow`).

**A finite-sample angle bound (our derivation, exact, no CLT).** Split :math:`c` along
:math:`w^\star` and orthogonally to it. Orthogonally, :math:`y\,x_\perp` is :math:`x_\perp` with a
sign that is independent of it, hence exactly :math:`N(0, I_{d-1})`, so
:math:`n\lVert c_\perp\rVert^2 \sim \chi^2_{d-1}`. Along :math:`w^\star`, :math:`c_\parallel` is a
mean of :math:`n` half-normals :math:`|z|`, a 1-Lipschitz function of a Gaussian, so
:math:`P(c_\parallel < \sqrt{2/\pi} - s) \le e^{-ns^2/2}`. With :math:`\delta/2` on each side,
with probability at least :math:`1 - \delta`

.. math::

   \tan\angle(\hat w, w^\star) = \frac{\lVert c_\perp\rVert}{c_\parallel}
   \le \frac{\sqrt{\chi^2_{d-1,\,1-\delta/2}/n}}{\sqrt{2/\pi} - \sqrt{2\ln(2/\delta)/n}}
   =: \tan\hat\theta \qquad (:func:`chow_angle_bound`).

**Exact disagreement.** For two unit vectors and a Gaussian :math:`x \sim N(\mu, C)`, the pair
:math:`(u, v) = (\langle w_1, x\rangle, \langle w_2, x\rangle)` is bivariate normal, and
:math:`P(f_{w_1} \ne f_{w_2}) = P(u > 0, v < 0) + P(u < 0, v > 0)`, each term a bivariate normal
orthant probability computed with Owen's :math:`T` function (:func:`bivariate_normal_cdf`):

.. math::

   \Phi_2(h, k; \rho) = \tfrac12\Phi(h) + \tfrac12\Phi(k) - T\Big(h, \frac{k - \rho h}{h\sqrt{1-\rho^2}}\Big)
   - T\Big(k, \frac{h - \rho k}{k\sqrt{1-\rho^2}}\Big) - \beta,

with :math:`\beta = \tfrac12` when :math:`hk < 0` (or :math:`hk = 0` and :math:`h + k < 0`) and
:math:`0` otherwise. Centred, this is Sheppard's :math:`\arccos(\rho)/\pi`; degenerate directions
(a point mass, a component flat along :math:`w_1` or :math:`w_2`) are handled exactly.
"""
from __future__ import annotations

import math

import numpy as np
from scipy import special, stats

__all__ = ["unit", "angle_between", "chow_estimate", "train_chow", "chow_angle_bound",
           "bivariate_normal_cdf", "gaussian_disagreement"]

_TINY = 1e-300


def unit(w) -> np.ndarray:
    """``w / ||w||`` (a 1-D array); a zero vector is an error."""
    w = np.asarray(w, dtype=np.float64)
    if w.ndim != 1 or w.size == 0:
        raise ValueError(f"a direction must be a 1-D vector, got shape {w.shape}")
    norm = np.linalg.norm(w)
    if not np.isfinite(norm) or norm == 0:
        raise ValueError("a direction must be a finite, non-zero vector")
    return w / norm


def angle_between(u, v) -> float:
    r"""The angle between two vectors, accurate for tiny angles:
    :math:`2\arctan(\lVert\hat u - \hat v\rVert / \lVert\hat u + \hat v\rVert)`."""
    u, v = unit(u), unit(v)
    if u.shape != v.shape:
        raise ValueError(f"u and v must have the same dimension, got {u.size} and {v.size}")
    return float(2 * math.atan2(np.linalg.norm(u - v), np.linalg.norm(u + v)))


def chow_estimate(x, y) -> np.ndarray:
    r""":math:`\hat w = c / \lVert c\rVert` with :math:`c = \frac1n\sum_i y_i x_i` (labels :math:`\pm1`)."""
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if x.ndim != 2 or y.shape != (x.shape[0],):
        raise ValueError(f"x must be (n, d) and y (n,), got {x.shape} and {y.shape}")
    if not np.isin(y, (-1.0, 1.0)).all():
        raise ValueError("labels y must be +1 or -1")
    return unit(y @ x / x.shape[0])


def train_chow(w_star, n: int, rng: np.random.Generator, chunk: int = 200_000) -> np.ndarray:
    """Draw ``n`` examples ``x ~ N(0, I)``, ``y = sign(<w*, x>)``, in chunks, and return the Chow
    estimate (the training phase: labelled data from the training distribution)."""
    w_star = unit(w_star)
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"n must be a positive int, got {n!r}")
    if not isinstance(rng, np.random.Generator):
        raise TypeError("rng must be a numpy Generator (reprobook.rng(seed, ...))")
    total = np.zeros_like(w_star)
    left = int(n)
    while left:
        k = min(chunk, left)
        x = rng.standard_normal((k, w_star.size))
        total += np.where(x @ w_star >= 0, 1.0, -1.0) @ x
        left -= k
    return unit(total)


def chow_angle_bound(n: int, d: int, delta: float) -> float:
    r"""The angle :math:`\hat\theta` of the module's bound: with probability at least
    :math:`1 - \delta`, :math:`\angle(\hat w, w^\star) \le \hat\theta` for the Chow estimate from
    ``n`` Gaussian examples in dimension ``d``."""
    for name, v in (("n", n), ("d", d)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
            raise ValueError(f"{name} must be a positive int, got {v!r}")
    if not 0 < delta < 1:
        raise ValueError(f"delta must be in (0, 1), got {delta!r}")
    if d == 1:
        return 0.0
    along = math.sqrt(2 / math.pi) - math.sqrt(2 * math.log(2 / delta) / n)
    if along <= 0:
        raise ValueError(f"n = {n} is too small for a bound at delta = {delta}")
    return float(math.atan(math.sqrt(stats.chi2.ppf(1 - delta / 2, d - 1) / n) / along))


def bivariate_normal_cdf(h, k, rho, sqrt_one_minus_rho2=None):
    r""":math:`P(Z_1 \le h, Z_2 \le k)` for standard normals with correlation :math:`\rho`
    (vectorised; Owen's T formula of the module; :math:`|\rho| = 1` handled exactly).

    ``sqrt_one_minus_rho2`` may pass :math:`\sqrt{1-\rho^2}` computed without cancellation (for
    :math:`\rho` within rounding of :math:`\pm1`, as for two nearly equal halfspaces)."""
    h, k, rho = np.broadcast_arrays(*(np.asarray(a, dtype=np.float64) for a in (h, k, rho)))
    if np.any(np.abs(rho) > 1):
        raise ValueError("a correlation must lie in [-1, 1]")
    s_all = (np.sqrt(np.maximum(1 - rho * rho, 0.0)) if sqrt_one_minus_rho2 is None
             else np.broadcast_to(np.asarray(sqrt_one_minus_rho2, dtype=np.float64), h.shape))
    out = np.empty(h.shape)
    one = s_all <= 0
    # rho = +1: Z2 = Z1; rho = -1: Z2 = -Z1
    out[one] = np.where(rho[one] > 0, special.ndtr(np.minimum(h[one], k[one])),
                        np.maximum(special.ndtr(h[one]) - special.ndtr(-k[one]), 0.0))
    g = ~one
    hg, kg, rg, s = h[g], k[g], rho[g], s_all[g]
    with np.errstate(divide="ignore", invalid="ignore"):
        ah = np.where(hg != 0, (kg - rg * hg) / (hg * s), np.inf * np.sign(kg - rg * hg + _TINY))
        ak = np.where(kg != 0, (hg - rg * kg) / (kg * s), np.inf * np.sign(hg - rg * kg + _TINY))
    # T(0, a) = arctan(a) / (2 pi): at h = 0 (k != 0) a_h is +-inf and T(0, a_h) = +-1/4
    th = np.where(hg != 0, special.owens_t(hg, np.where(np.isfinite(ah), ah, 0.0)),
                  np.arctan(ah) / (2 * np.pi))
    tk = np.where(kg != 0, special.owens_t(kg, np.where(np.isfinite(ak), ak, 0.0)),
                  np.arctan(ak) / (2 * np.pi))
    beta = np.where((hg * kg < 0) | ((hg * kg == 0) & (hg + kg < 0)), 0.5, 0.0)
    val = 0.5 * special.ndtr(hg) + 0.5 * special.ndtr(kg) - th - tk - beta
    both = (hg == 0) & (kg == 0)     # the limit depends on the path: Sheppard, 1/4 + asin(rho)/2pi
    out[g] = np.where(both, 0.5 - np.arctan2(s, rg) / (2 * np.pi), val)
    return np.clip(out, 0.0, 1.0)


def gaussian_disagreement(w1, w2, mean, cov) -> float:
    r""":math:`P_{x \sim N(\mu, C)}(\operatorname{sign}\langle w_1, x\rangle \ne
    \operatorname{sign}\langle w_2, x\rangle)` exactly (``cov`` may be singular, even zero)."""
    w1, w2 = unit(w1), unit(w2)
    mean = np.asarray(mean, dtype=np.float64)
    cov = np.asarray(cov, dtype=np.float64)
    d = w1.size
    if w2.size != d or mean.shape != (d,) or cov.shape != (d, d):
        raise ValueError(f"w1, w2, mean must have dimension {d} and cov be ({d}, {d}); got "
                         f"{w2.shape}, {mean.shape}, {cov.shape}")
    mu, mv = float(w1 @ mean), float(w2 @ mean)
    vu, vv, cuv = float(w1 @ cov @ w1), float(w2 @ cov @ w2), float(w1 @ cov @ w2)
    scale = max(1.0, float(np.abs(cov).max()))
    flat_u, flat_v = vu <= 1e-24 * scale, vv <= 1e-24 * scale
    if flat_u and flat_v:                       # a point mass (along both directions)
        if mu == 0 or mv == 0:
            raise ValueError("a point mass on a decision boundary has no defined sign")
        return float(np.sign(mu) != np.sign(mv))
    if flat_u:                                  # u = mu is fixed: P(sign v != sign mu)
        return float(special.ndtr(-np.sign(mu) * mv / math.sqrt(vv)))
    if flat_v:
        return float(special.ndtr(-np.sign(mv) * mu / math.sqrt(vu)))
    su, sv = math.sqrt(vu), math.sqrt(vv)
    rho = max(-1.0, min(1.0, cuv / (su * sv)))
    # 1 - rho^2 without cancellation: in the basis e1 = w1, e2 (w2 = cos a e1 + sin a e2),
    # Var(u) Var(v) - Cov(u, v)^2 = sin(a)^2 det(S), S the covariance of (e1.x, e2.x)
    alpha = angle_between(w1, w2)
    rest = w2 - (w2 @ w1) * w1
    if alpha > 0 and np.linalg.norm(rest) > 0:
        e2 = rest / np.linalg.norm(rest)
        det = max(vu * float(e2 @ cov @ e2) - float(w1 @ cov @ e2) ** 2, 0.0)
        s = min(1.0, math.sin(alpha) * math.sqrt(det) / (su * sv))
    else:
        s = 0.0
    # P(u > 0, v < 0) = P(-U' <= mu/su, V' <= -mv/sv) with corr(-U', V') = -rho
    p = bivariate_normal_cdf([mu / su, -mu / su], [-mv / sv, mv / sv], -rho, s)
    return float(p.sum())
