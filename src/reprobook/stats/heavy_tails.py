r"""Heavy-tailed noise with finite variance: samplers with a known covariance, vectorised in torch.

Every model here draws zero-mean noise :math:`\xi \in \mathbb R^d` with a covariance that is known
in closed form, so an estimator's error can be put on the scale of the sub-Gaussian rate
:math:`\sqrt{\operatorname{Tr}\Sigma / T}`. A batch of ``n`` draws is an ``(n, d)`` tensor; the
generator is a ``torch.Generator`` on the tensor's device, so the same seed gives the same numbers.

**Pareto radii.** :math:`R \sim \mathrm{Pareto}(\alpha, x_m)` has
:math:`P(R > r) = (x_m / r)^\alpha` for :math:`r \ge x_m`, drawn by inversion as
:math:`R = x_m U^{-1/\alpha}`. Its moments of order :math:`k < \alpha` are
:math:`\mathbb E R^k = \alpha x_m^k / (\alpha - k)`; those of order :math:`\ge \alpha` are infinite.
For :math:`2 < \alpha \le 3` the variance is finite and the third moment is not: the regime
"finite second moment and nothing more" that clipped SGD is analysed in.

Two models:

* ``"radial-pareto"``: :math:`\xi = \Sigma^{1/2} R\,U` with :math:`U` uniform on the sphere
  :math:`S^{d-1}` and :math:`x_m` chosen so that :math:`\mathbb E R^2 = d`; then
  :math:`\operatorname{Cov}(R U) = \mathbb E R^2 / d \cdot I = I` and
  :math:`\operatorname{Cov}\xi = \Sigma`. Symmetric (:math:`\xi \overset{d}{=} -\xi`), so clipping
  it introduces no bias; one huge radius moves every coordinate at once.
* ``"gaussian"``: :math:`\xi = \Sigma^{1/2} Z`, :math:`Z \sim N(0, I)`: the sub-Gaussian reference.

:math:`\Sigma` is diagonal, given by its standard deviations ``scales``; :func:`harmonic_scales`
makes the anisotropic spectrum :math:`\lambda_j \propto 1/j` normalised to
:math:`\operatorname{Tr}\Sigma = d`.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

__all__ = ["NoiseModel", "KINDS", "pareto_scale", "pareto_tail", "pareto_clipped_second_moment",
           "harmonic_scales", "sample_pareto_radius", "sample_sphere_coordinate"]

KINDS = ("radial-pareto", "gaussian")


def _alpha(alpha) -> float:
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not alpha > 2:
        raise ValueError(f"the tail index alpha must be a number > 2 (finite variance), got {alpha!r}")
    return float(alpha)


def pareto_scale(alpha: float, second_moment: float) -> float:
    r"""The scale :math:`x_m` with :math:`\mathbb E R^2 = \alpha x_m^2/(\alpha - 2)` equal to
    ``second_moment``."""
    alpha = _alpha(alpha)
    if not second_moment > 0:
        raise ValueError(f"second_moment must be positive, got {second_moment!r}")
    return math.sqrt(second_moment * (alpha - 2) / alpha)


def pareto_tail(r, alpha: float, scale: float):
    r""":math:`P(R > r) = \min(1, (x_m/r)^\alpha)` (vectorised over ``r``)."""
    r = np.asarray(r, dtype=np.float64)
    with np.errstate(divide="ignore"):
        return np.minimum(1.0, (scale / np.maximum(r, 0.0)) ** _alpha(alpha))


def pareto_clipped_second_moment(level, alpha: float, scale: float):
    r""":math:`\mathbb E\min(R, c)^2` for :math:`R \sim \mathrm{Pareto}(\alpha, x_m)`, vectorised
    over the level :math:`c`:

    .. math::

       \mathbb E\min(R, c)^2 = \frac{\alpha x_m^2}{\alpha - 2}\Big(1 - \big(\tfrac{x_m}{c}\big)^{\alpha-2}\Big)
       + c^2\big(\tfrac{x_m}{c}\big)^{\alpha} \quad (c \ge x_m), \qquad c^2 \quad (c < x_m).
    """
    alpha = _alpha(alpha)
    c = np.asarray(level, dtype=np.float64)
    if np.any(np.isnan(c)) or np.any(c < 0):
        raise ValueError("clip levels must be >= 0")
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(c > 0, scale / c, np.inf)
        above = (alpha * scale**2 / (alpha - 2) * (1 - ratio ** (alpha - 2))
                 + np.where(np.isinf(c), 0.0, c**2 * ratio**alpha))
    return np.where(c >= scale, above, c**2)


def harmonic_scales(d: int) -> np.ndarray:
    r"""Standard deviations :math:`\sqrt{\lambda_j}` with :math:`\lambda_j = d\,(1/j)/H_d`, so that
    :math:`\operatorname{Tr}\Sigma = d` and :math:`\|\Sigma\|_2 = d/H_d`."""
    if isinstance(d, bool) or not isinstance(d, (int, np.integer)) or d < 1:
        raise ValueError(f"d must be a positive int, got {d!r}")
    inv = 1.0 / np.arange(1, d + 1)
    return np.sqrt(d * inv / inv.sum())


def sample_pareto_radius(n: int, alpha: float, scale: float, rng: np.random.Generator) -> np.ndarray:
    """``n`` Pareto radii by inversion (NumPy), :math:`x_m U^{-1/alpha}` with U in (0, 1]."""
    u = 1.0 - rng.random(n)            # (0, 1]: no infinite radius
    return scale * u ** (-1.0 / _alpha(alpha))


def sample_sphere_coordinate(n: int, d: int, rng: np.random.Generator) -> np.ndarray:
    r"""``n`` draws of one coordinate :math:`u = \langle U, e\rangle` of :math:`U` uniform on
    :math:`S^{d-1}`: :math:`(u+1)/2 \sim \mathrm{Beta}(\tfrac{d-1}2, \tfrac{d-1}2)`; for
    :math:`d = 1`, :math:`u = \pm 1`."""
    if isinstance(d, bool) or not isinstance(d, (int, np.integer)) or d < 1:
        raise ValueError(f"d must be a positive int, got {d!r}")
    if d == 1:
        return rng.choice(np.array([-1.0, 1.0]), size=n)
    return 2.0 * rng.beta((d - 1) / 2, (d - 1) / 2, size=n) - 1.0


@dataclass(frozen=True)
class NoiseModel:
    """Zero-mean noise with covariance ``diag(scales**2)``; see the module for the three kinds.

    ``alpha`` is the Pareto tail index (ignored for ``"gaussian"``). ``scales`` defaults to ones
    (:math:`\\Sigma = I`).
    """

    kind: str
    dim: int
    alpha: float = 2.2
    scales: tuple[float, ...] | None = None
    _scales: np.ndarray = field(init=False, repr=False, compare=False)

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"unknown noise kind {self.kind!r}; use one of {', '.join(KINDS)}")
        if isinstance(self.dim, bool) or not isinstance(self.dim, (int, np.integer)) or self.dim < 1:
            raise ValueError(f"dim must be a positive int, got {self.dim!r}")
        if self.kind != "gaussian":
            _alpha(self.alpha)
        s = np.ones(self.dim) if self.scales is None else np.asarray(self.scales, dtype=np.float64)
        if s.shape != (self.dim,) or not np.all(np.isfinite(s)) or np.any(s <= 0):
            raise ValueError(f"scales must be {self.dim} positive numbers (the standard deviations "
                             f"of Sigma's diagonal), got shape {s.shape}")
        object.__setattr__(self, "_scales", s)

    @property
    def trace(self) -> float:
        r""":math:`\operatorname{Tr}\Sigma`."""
        return float(np.sum(self._scales ** 2))

    @property
    def op_norm(self) -> float:
        r""":math:`\|\Sigma\|_2`."""
        return float(np.max(self._scales ** 2))

    @property
    def covariance_diagonal(self) -> np.ndarray:
        return self._scales ** 2

    @property
    def radial_scale(self) -> float:
        """The Pareto scale x_m of the radius (``"radial-pareto"``: E R^2 = d)."""
        return pareto_scale(self.alpha, float(self.dim))

    def clipped_trace(self, level: float, rng: np.random.Generator | None = None,
                      n_directions: int = 200_000) -> float:
        r""":math:`\operatorname{Tr}\Sigma_\Gamma`, the trace of the covariance of the clipped noise
        :math:`\operatorname{clip}_\Gamma(\xi)`: the :math:`\Sigma` of the paper's rate (its
        "covariance of the clipped gradient", at :math:`x^\star`, where the gradient is :math:`-\xi`).

        The noise is symmetric, so the clipped noise has mean zero and the trace is
        :math:`\mathbb E\lVert\operatorname{clip}_\Gamma\xi\rVert^2 = \mathbb E\min(\lVert\xi\rVert,\Gamma)^2`.
        Radial Pareto: :math:`\lVert\xi\rVert = R\,w` with :math:`w = \lVert\Sigma^{1/2}U\rVert`, so it is
        :math:`\mathbb E_w\big[w^2\,\mathbb E\min(R, \Gamma/w)^2\big]`: exact for :math:`\Sigma = I`
        (:math:`w = 1`), an average over ``n_directions`` sampled :math:`U` otherwise. Gaussian:
        Monte Carlo over ``n_directions`` draws. ``level = inf`` gives :math:`\operatorname{Tr}\Sigma`.
        """
        if not level > 0:
            raise ValueError(f"the clip level must be positive (inf for none), got {level!r}")
        if math.isinf(level):
            return self.trace
        if self.kind == "radial-pareto" and self.scales is None:
            return float(pareto_clipped_second_moment(level, self.alpha, self.radial_scale))
        if rng is None:
            raise ValueError("this noise model needs an rng for the Monte Carlo over directions")
        z = rng.standard_normal((n_directions, self.dim))
        if self.kind == "radial-pareto":
            w = np.linalg.norm(z * self._scales, axis=1) / np.linalg.norm(z, axis=1)
            return float(np.mean(w**2 * pareto_clipped_second_moment(level / w, self.alpha,
                                                                     self.radial_scale)))
        return float(np.mean(np.minimum(np.sum((z * self._scales) ** 2, axis=1), level**2)))

    def _pareto(self, torch, shape, scale, generator, device):
        # float64 uniforms whatever the output dtype: float32's grid of 2^-24 would cut the
        # tail off at x_m 2^(24/alpha), which the extreme quantiles of a mean of heavy draws reach
        u = 1.0 - torch.rand(shape, generator=generator, dtype=torch.float64, device=device)
        return scale * u ** (-1.0 / self.alpha)

    def sample(self, n: int, generator, *, dtype=None):
        """``n`` draws as an ``(n, dim)`` torch tensor on ``generator``'s device."""
        import torch

        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
            raise ValueError(f"n must be a positive int, got {n!r}")
        if not isinstance(generator, torch.Generator):
            raise TypeError("generator must be a torch.Generator (seeded from the ledger's seed)")
        device = generator.device
        dtype = torch.float64 if dtype is None else dtype
        d = self.dim
        kw = dict(generator=generator, dtype=dtype, device=device)
        if self.kind == "gaussian":
            z = torch.randn(n, d, **kw)
        else:  # radial-pareto
            u = torch.randn(n, d, **kw)
            u = u / torch.linalg.vector_norm(u, dim=1, keepdim=True)
            z = self._pareto(torch, (n, 1), self.radial_scale, generator, device).to(dtype) * u
        if self.scales is not None:
            z = z * torch.as_tensor(self._scales, dtype=dtype, device=device)
        return z
