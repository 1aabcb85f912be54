r"""Strongly monotone maps: measuring monotonicity, inverting by iteration, and factorising linear maps.

A map :math:`F:\mathbb R^n\to\mathbb R^n` is **strongly monotone** with constant :math:`c>0` if
:math:`\langle F(u)-F(v),u-v\rangle\ge c\lVert u-v\rVert^2` for all :math:`u,v`. For a
differentiable :math:`F` this holds iff the symmetric part of every Jacobian has
:math:`\lambda_{\min}\big(\tfrac12(DF+DF^\top)\big)\ge c` (:func:`sym_min_eig`); so the Jacobian's
eigenvalues have positive real parts and :math:`\det DF>0`: a strongly monotone map, and any
composition of them, preserves orientation.

**Inversion by iteration** (:func:`invert_monotone`). If :math:`F` is strongly monotone with
constant :math:`c` and Lipschitz with constant :math:`L`, then for :math:`\tau=c/L^2` the map
:math:`T(u) = u-\tau(F(u)-g)` is a contraction with factor
:math:`q=\sqrt{1-c^2/L^2}`, since :math:`\lVert T(u)-T(v)\rVert^2\le(1-2\tau c+\tau^2L^2)\lVert u-v\rVert^2`.
Its fixed point solves :math:`F(u)=g` (Zarantonello's theorem; Banach's fixed-point theorem).

**Factorising a linear map** (:func:`monotone_factorisation`). An invertible :math:`A` has the polar
form :math:`A=QS` with :math:`S=(A^\top A)^{1/2}` symmetric positive definite (strongly monotone
with constant :math:`\sigma_{\min}(A)`) and :math:`Q` orthogonal. With :math:`H` the reflection
:math:`\operatorname{diag}(-1,1,\dots,1)` when :math:`\det A<0` (else :math:`H=I`), :math:`R=HQ` is a
rotation, and :math:`R=(R^{1/k})^k` with :math:`R^{1/k}=\exp(\log(R)/k)`, whose rotation angles are
at most :math:`\pi/k`, so its symmetric part is at least :math:`\cos(\pi/k)>0` for :math:`k\ge3`:

.. math:: A = H\,\underbrace{R^{1/k}\cdots R^{1/k}}_{k}\,S ,

strongly monotone factors and at most one simple isometry, which is needed exactly when
:math:`\det A<0`. (When :math:`R` has an eigenvalue :math:`-1` its real logarithm is not unique;
a random :math:`A` has none, and :func:`monotone_factorisation` says so if it meets one.)
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

#: An increment above this is divergence: the iteration stops before it overflows.
DIVERGED = 1e100

__all__ = ["DIVERGED", "sym_min_eig", "monotonicity_ratios", "invert_monotone", "MonotoneInverse",
           "MonotoneFactorisation", "monotone_factorisation", "householder_reflection"]


def _square(a, name="matrix") -> np.ndarray:
    a = np.asarray(a, dtype=np.float64)
    if a.ndim != 2 or a.shape[0] != a.shape[1]:
        raise ValueError(f"{name} must be a square 2-d array, got shape {a.shape}")
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{name} has non-finite entries")
    return a


def sym_min_eig(jacobian) -> float:
    """:math:`\\lambda_{\\min}` of the symmetric part :math:`\\tfrac12(J+J^\\top)`: the local
    monotonicity constant of a map with Jacobian J."""
    j = _square(jacobian, "jacobian")
    return float(np.linalg.eigvalsh((j + j.T) / 2)[0])


def monotonicity_ratios(f: Callable, u, v, inner: Callable | None = None) -> np.ndarray:
    """:math:`\\langle F(u_i)-F(v_i),u_i-v_i\\rangle/\\lVert u_i-v_i\\rVert^2` for the rows of u and v.

    ``inner(a, b)`` is the inner product along the last axis (default: the Euclidean one); the ratio
    does not depend on a common weight, so the grid's quadrature weight 1/n can be left out.
    """
    u, v = np.atleast_2d(np.asarray(u, dtype=np.float64)), np.atleast_2d(np.asarray(v, dtype=np.float64))
    if u.shape != v.shape:
        raise ValueError(f"u and v must have the same shape, got {u.shape} and {v.shape}")
    inner = inner or (lambda a, b: np.sum(a * b, axis=-1))
    d = u - v
    norm2 = inner(d, d)
    if np.any(norm2 <= 0):
        raise ValueError("every pair must have u != v")
    return inner(f(u) - f(v), d) / norm2


@dataclass(frozen=True)
class MonotoneInverse:
    """A solution of F(u) = g found by iteration, and how the iteration went."""

    u: np.ndarray
    steps: int
    residual: float              # ||F(u) - g||
    increments: np.ndarray       # ||u_{k+1} - u_k|| for every step
    converged: bool

    @property
    def contraction(self) -> float:
        """The largest ratio of consecutive increments (the observed contraction factor)."""
        inc = self.increments[self.increments > 0]
        if inc.size < 2:
            return 0.0
        return float(np.max(inc[1:] / inc[:-1]))


def invert_monotone(f: Callable, g, c: float, lipschitz: float, *, u0=None, tol: float = 1e-12,
                    max_steps: int = 100_000, norm: Callable | None = None) -> MonotoneInverse:
    """Solve :math:`F(u)=g` for a map with monotonicity constant ``c`` and Lipschitz constant
    ``lipschitz`` by :math:`u\\leftarrow u-\\tau(F(u)-g)`, :math:`\\tau=c/L^2` (module docstring).
    Stops when an increment is below ``tol`` (in ``norm``, default Euclidean), or above
    :data:`DIVERGED` (then ``converged`` is False and the residual is large but finite)."""
    if not (c > 0 and lipschitz >= c):
        raise ValueError(f"need 0 < c <= lipschitz, got c={c!r}, lipschitz={lipschitz!r}")
    g = np.asarray(g, dtype=np.float64)
    norm = norm or (lambda x: float(np.linalg.norm(x)))
    tau = c / lipschitz ** 2
    u = g.copy() if u0 is None else np.asarray(u0, dtype=np.float64).copy()
    inc = []
    with np.errstate(over="ignore", invalid="ignore"):
        for _ in range(max_steps):
            new = u - tau * (f(u) - g)
            inc.append(norm(new - u))
            u = new
            if not np.isfinite(inc[-1]) or inc[-1] <= tol or inc[-1] > DIVERGED:
                break
        res = norm(f(u) - g)
    return MonotoneInverse(u=u, steps=len(inc), residual=res, increments=np.array(inc),
                           converged=bool(np.isfinite(res) and inc[-1] <= tol))


def householder_reflection(n: int) -> np.ndarray:
    """:math:`\\operatorname{diag}(-1, 1, \\dots, 1)`: the reflection in :math:`e_1^\\perp`."""
    h = np.eye(n)
    h[0, 0] = -1.0
    return h


@dataclass(frozen=True)
class MonotoneFactorisation:
    """:math:`A = H\\,R^{1/k}\\cdots R^{1/k}\\,S` (H the reflection, or None when det A > 0)."""

    reflection: np.ndarray | None
    root: np.ndarray             # R^(1/k), a rotation by angles at most pi/k
    k: int
    s: np.ndarray                # (A^T A)^(1/2)
    q: np.ndarray                # the orthogonal polar factor

    def factors(self) -> list[np.ndarray]:
        """The factors in the order they act (S first, H last)."""
        out = [self.s] + [self.root] * self.k
        return out + ([self.reflection] if self.reflection is not None else [])

    def product(self) -> np.ndarray:
        out = np.eye(self.s.shape[0])
        for f in self.factors():
            out = f @ out
        return out

    def monotone_constants(self) -> list[float]:
        """:func:`sym_min_eig` of every factor but the reflection."""
        return [sym_min_eig(self.s)] + [sym_min_eig(self.root)] * self.k


def monotone_factorisation(a, k: int = 3, *, use_reflection: bool = True) -> MonotoneFactorisation:
    """The factorisation of the module docstring. ``use_reflection=False`` skips H (a planted
    omission: for det A < 0 the real root of Q then does not exist, and the real part of the
    principal root is returned, which no longer reproduces A)."""
    from scipy.linalg import expm, logm, polar

    a = _square(a, "a")
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise ValueError(f"k must be a positive int, got {k!r}")
    q, s = polar(a, side="right")
    det = np.linalg.det(q)
    h = householder_reflection(a.shape[0]) if (use_reflection and det < 0) else None
    r = q if h is None else h @ q
    log_r = logm(r)
    if np.iscomplexobj(log_r) and np.max(np.abs(log_r.imag)) > 1e-8 * max(1.0, np.abs(log_r).max()):
        if use_reflection:
            raise ValueError("the rotation has an eigenvalue -1: its real logarithm is not unique")
    log_r = np.real(log_r)
    log_r = (log_r - log_r.T) / 2 if h is not None or det > 0 else log_r
    root = np.real(expm(log_r / int(k)))
    return MonotoneFactorisation(reflection=h, root=root, k=int(k), s=(s + s.T) / 2, q=q)
