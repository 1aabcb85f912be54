r"""A strongly monotone Fourier neural-operator layer on periodic functions, at any resolution.

**Fourier multipliers.** A multiplier with complex coefficients :math:`m_0,\dots,m_{M-1}`
(:math:`m_0` real) acts on a periodic function on :math:`[0,1)` by
:math:`\widehat{Ku}(k)=m_k\hat u(k)` for :math:`0\le k<M` (and :math:`\bar m_k` on :math:`-k`), and
kills every higher frequency: the FNO layer's spectral convolution. On a grid of :math:`n\ge2M`
points it is ``irfft(m * rfft(u))``, the same continuum operator at every resolution. With the grid
inner product :math:`\langle u,v\rangle_n=\frac1n\sum_iu_iv_i` (the :math:`L^2(0,1)` inner product
of the trigonometric interpolants), :math:`K` is a normal operator with operator norm
:math:`\max_k|m_k|` at every :math:`n`: **spectral normalisation** is scaling the coefficients.

**The layer.** :math:`F(u)=u+G(u)` with :math:`G(u)=K_2\tanh(K_1u)`. The pointwise
:math:`\tanh` is 1-Lipschitz on grid values, so :math:`\operatorname{Lip}(G)\le\lVert K_2\rVert\lVert
K_1\rVert=:L_G` on every grid and in the continuum. If :math:`L_G<1`:

* :math:`F` is strongly monotone with constant :math:`c=1-L_G`:
  :math:`\langle F(u)-F(v),u-v\rangle\ge\lVert u-v\rVert^2-L_G\lVert u-v\rVert^2`;
* :math:`F` is invertible, and :math:`u_{k+1}=f-G(u_k)` converges to :math:`F^{-1}(f)` with
  contraction factor at most :math:`L_G` (Banach), at every resolution alike
  (:meth:`MonotoneFourierLayer.inverse`);
* :math:`\lVert F^{-1}(f)-F^{-1}(g)\rVert\le\lVert f-g\rVert/c`.

Everything is float64 NumPy; a batch of functions is an array whose last axis is the grid.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..linalg.monotone import DIVERGED, MonotoneInverse

__all__ = ["FourierMultiplier", "MonotoneFourierLayer", "random_multiplier",
           "random_monotone_layer", "grid_norm", "grid_inner", "NORMALISATIONS"]

#: How the multipliers are scaled to their target norm: by the largest |m_k| (correct spectral
#: normalisation) or by the root-mean-square |m_k| (a planted bug that under-estimates the norm).
NORMALISATIONS = ("max", "rms")


def grid_inner(u, v) -> np.ndarray:
    """:math:`\\langle u,v\\rangle_n=\\frac1n\\sum_i u_iv_i` along the last axis."""
    u, v = np.asarray(u), np.asarray(v)
    return np.mean(u * v, axis=-1)


def grid_norm(u) -> np.ndarray:
    """The discrete :math:`L^2(0,1)` norm :math:`\\sqrt{\\langle u,u\\rangle_n}` along the last axis."""
    return np.sqrt(grid_inner(u, u))


@dataclass(frozen=True)
class FourierMultiplier:
    """A Fourier multiplier on the first ``len(coeffs)`` frequencies of periodic functions."""

    coeffs: np.ndarray

    def __post_init__(self):
        c = np.asarray(self.coeffs, dtype=np.complex128)
        if c.ndim != 1 or c.size == 0:
            raise ValueError(f"coeffs must be a non-empty 1-d array, got shape {c.shape}")
        if abs(c[0].imag) > 0:
            raise ValueError("the zero-frequency coefficient must be real (the operator maps real "
                             "functions to real functions)")
        object.__setattr__(self, "coeffs", c)

    @property
    def modes(self) -> int:
        return int(self.coeffs.size)

    @property
    def norm(self) -> float:
        """Operator norm on :math:`L^2(0,1)` and on every grid: :math:`\\max_k|m_k|`."""
        return float(np.abs(self.coeffs).max())

    def check_grid(self, n: int) -> None:
        if n < 2 * self.modes:
            raise ValueError(f"a grid of {n} points cannot hold {self.modes} modes: use n >= "
                             f"{2 * self.modes}")

    def __call__(self, u) -> np.ndarray:
        u = np.asarray(u, dtype=np.float64)
        n = u.shape[-1]
        self.check_grid(n)
        spec = np.fft.rfft(u, axis=-1)
        out = np.zeros_like(spec)
        out[..., :self.modes] = self.coeffs * spec[..., :self.modes]
        return np.fft.irfft(out, n=n, axis=-1)

    def matrix(self, n: int) -> np.ndarray:
        """The n × n matrix of the multiplier on a grid of n points."""
        return self(np.eye(n)).T


def random_multiplier(modes: int, norm: float, rng: np.random.Generator, *,
                      normalise: str = "max", decay: float = 1.0) -> FourierMultiplier:
    """Gaussian coefficients :math:`(a_k+ib_k)/(1+k)^{\\text{decay}}`, scaled so that the largest
    :math:`|m_k|` equals ``norm`` (``normalise="max"``) or, as a planted bug, so that their
    root-mean-square does (``"rms"``)."""
    if normalise not in NORMALISATIONS:
        raise ValueError(f"normalise must be one of {NORMALISATIONS}, got {normalise!r}")
    if isinstance(modes, bool) or not isinstance(modes, (int, np.integer)) or modes < 1:
        raise ValueError(f"modes must be a positive int, got {modes!r}")
    if not norm > 0:
        raise ValueError(f"norm must be positive, got {norm!r}")
    k = np.arange(modes)
    c = (rng.normal(size=modes) + 1j * rng.normal(size=modes)) / (1.0 + k) ** decay
    c[0] = c[0].real
    size = np.abs(c).max() if normalise == "max" else np.sqrt(np.mean(np.abs(c) ** 2))
    return FourierMultiplier(c * norm / size)


@dataclass(frozen=True)
class MonotoneFourierLayer:
    """:math:`F(u)=u+K_2\\tanh(K_1u)`."""

    k1: FourierMultiplier
    k2: FourierMultiplier

    @property
    def lipschitz_g(self) -> float:
        """:math:`L_G=\\lVert K_2\\rVert\\lVert K_1\\rVert`, a Lipschitz constant of G."""
        return self.k1.norm * self.k2.norm

    @property
    def monotonicity(self) -> float:
        """:math:`c = 1 - L_G` (meaningful when positive)."""
        return 1.0 - self.lipschitz_g

    def g(self, u) -> np.ndarray:
        return self.k2(np.tanh(self.k1(u)))

    def __call__(self, u) -> np.ndarray:
        u = np.asarray(u, dtype=np.float64)
        return u + self.g(u)

    def jacobian(self, u) -> np.ndarray:
        """:math:`DF(u)=I+K_2\\operatorname{diag}(1-\\tanh^2(K_1u))K_1` on the grid of ``u`` (1-d)."""
        u = np.asarray(u, dtype=np.float64)
        if u.ndim != 1:
            raise ValueError(f"jacobian takes one function (a 1-d grid array), got shape {u.shape}")
        n = u.size
        a1, a2 = self.k1.matrix(n), self.k2.matrix(n)
        d = 1.0 - np.tanh(a1 @ u) ** 2
        return np.eye(n) + a2 @ (d[:, None] * a1)

    def inverse(self, f, *, tol: float = 1e-12, max_steps: int = 10_000,
                norm=grid_norm) -> MonotoneInverse:
        """Solve :math:`F(u)=f` by :math:`u_{k+1}=f-G(u_k)` from :math:`u_0=f`, until
        :math:`\\lVert u_{k+1}-u_k\\rVert\\le` ``tol`` in ``norm`` (the grid's :math:`L^2(0,1)` norm).
        Since :math:`F(u_k)-f=u_k-u_{k+1}`, that increment is the residual."""
        f = np.asarray(f, dtype=np.float64)
        if f.ndim != 1:
            raise ValueError(f"inverse takes one function (a 1-d grid array), got shape {f.shape}")
        u, inc = f.copy(), []
        for _ in range(max_steps):
            new = f - self.g(u)
            inc.append(float(norm(new - u)))
            u = new
            if not math.isfinite(inc[-1]) or inc[-1] <= tol or inc[-1] > DIVERGED:
                break
        res = float(grid_norm(self(u) - f))
        return MonotoneInverse(u=u, steps=len(inc), residual=res, increments=np.array(inc),
                               converged=bool(math.isfinite(res) and inc[-1] <= tol))


def random_monotone_layer(rng: np.random.Generator, *, modes: int = 16, lipschitz: float = 0.6,
                          inner_norm: float = 2.0, normalise: str = "max") -> MonotoneFourierLayer:
    """A layer with :math:`\\lVert K_1\\rVert=` ``inner_norm`` and
    :math:`\\lVert K_2\\rVert=` ``lipschitz / inner_norm``, so :math:`L_G=` ``lipschitz``
    (with ``normalise="max"``; ``"rms"`` is the planted bug of :func:`random_multiplier`)."""
    if not 0 < lipschitz:
        raise ValueError(f"lipschitz must be positive, got {lipschitz!r}")
    k1 = random_multiplier(modes, inner_norm, rng, normalise=normalise)
    k2 = random_multiplier(modes, lipschitz / inner_norm, rng, normalise=normalise)
    return MonotoneFourierLayer(k1, k2)
