r"""Testers for learning with distribution shift (TDS learning): accept the unlabelled test sample
or reject it, so that an accepted classifier's test error is small.

In TDS learning (Klivans, Stavropoulos & Vasilyan, 2023) a learner trains on labelled examples
from :math:`D` and sees unlabelled examples from a test marginal :math:`D'`. It must **accept** with
probability :math:`\ge 1-\delta` when :math:`D' = D` (completeness) and, **whenever it accepts**,
output a classifier with small error on :math:`D'` (soundness). A *localised discrepancy* tester
(Chandrasekaran, Klivans, Kontonis, Stavropoulos & Vasilyan, NeurIPS 2024) only asks whether
:math:`D'` puts too much mass where the output :math:`\hat f` could disagree with some classifier
of its neighbourhood :math:`\mathcal N(\hat f)`, not whether :math:`D'` looks like :math:`D`.

**The boundary-proximity tester for one halfspace (our reconstruction).** Let the neighbourhood be
every homogeneous halfspace within angle :math:`\hat\theta` of :math:`\hat w`. Two unit vectors at
angle :math:`\alpha` disagree on :math:`x` only if :math:`x` lies between their hyperplanes, and then
:math:`|\langle\hat w, x\rangle| \le \sin\alpha\,\lVert x\rVert` (write :math:`x` in the plane of the two
normals). So every disagreement region of the neighbourhood lies in the band

.. math::

   B = \{x : |\langle\hat w, x\rangle| \le \sin\hat\theta\,\lVert x\rVert\},

and for the true :math:`w^\star \in \mathcal N(\hat w)`, :math:`\operatorname{err}_{D'}(\hat w)
\le D'(B)`, whatever :math:`D'` is. The tester estimates :math:`D'(B)` by the band fraction
:math:`\hat p` of :math:`m` test points and accepts iff :math:`\hat p + \sqrt{\ln(1/\delta)/(2m)}
\le \varepsilon`; by Hoeffding, :math:`D'(B) \le \hat p + \sqrt{\ln(1/\delta)/(2m)}` with probability
:math:`\ge 1-\delta`, so an accepted :math:`\hat w` has :math:`\operatorname{err}_{D'} \le \varepsilon`
(soundness), up to the probability that :math:`w^\star` is outside the neighbourhood. Under
:math:`D = N(0, I_d)` the direction :math:`x/\lVert x\rVert` is uniform on the sphere, so
:math:`D(B) = P(U_1^2 \le \sin^2\hat\theta)` with :math:`U_1^2 \sim \mathrm{Beta}(\tfrac12, \tfrac{d-1}2)`
exactly (:func:`band_mass_spherical`), and the acceptance probability under :math:`D` is a binomial
tail (:meth:`BoundaryProximityTester.acceptance_probability`): completeness in closed form. The same
holds for *any* spherically symmetric :math:`D'`, however heavy its radial tail.

**The global moment tester (the baseline).** It tests :math:`D' = N(0, I)` through the first two
moments: the :math:`d` means, the :math:`d` second moments :math:`\overline{x_j^2}` and the
:math:`d(d-1)/2` cross moments :math:`\overline{x_jx_k}`, standardised by their null standard errors
(:math:`1/\sqrt m`, :math:`\sqrt{2/m}`, :math:`1/\sqrt m`), with a Bonferroni threshold
:math:`z_{1-\delta/(2K)}` over the :math:`K = d + d(d+1)/2` statistics, so that it is complete at the
same :math:`\delta`.
"""
from __future__ import annotations

import math

import numpy as np
from scipy import special, stats

from .halfspaces import unit

__all__ = ["band_mass_spherical", "BoundaryProximityTester", "MomentTester", "AlwaysAccept"]


def _sample(x, dim: int | None = None) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    if x.ndim != 2 or x.shape[0] < 1:
        raise ValueError(f"the test sample must be (m, d) with m >= 1, got shape {x.shape}")
    if dim is not None and x.shape[1] != dim:
        raise ValueError(f"the test sample has dimension {x.shape[1]}, the tester {dim}")
    if not np.all(np.isfinite(x)):
        raise ValueError("the test sample has non-finite values")
    return x


def _delta(delta) -> float:
    if isinstance(delta, bool) or not isinstance(delta, (int, float)) or not 0 < delta < 1:
        raise ValueError(f"delta must be in (0, 1), got {delta!r}")
    return float(delta)


def band_mass_spherical(width: float, d: int) -> float:
    r""":math:`P(|U_1| \le s)` for :math:`U` uniform on :math:`S^{d-1}`: the mass of the band
    :math:`|\langle w, x\rangle| \le s\lVert x\rVert` under any spherically symmetric law,
    :math:`I_{s^2}(\tfrac12, \tfrac{d-1}2)` (regularised incomplete beta)."""
    if isinstance(d, bool) or not isinstance(d, (int, np.integer)) or d < 1:
        raise ValueError(f"d must be a positive int, got {d!r}")
    if not 0 <= width:
        raise ValueError(f"the band width must be >= 0, got {width!r}")
    if width >= 1:
        return 1.0
    if d == 1:
        return 0.0
    return float(special.betainc(0.5, (d - 1) / 2, width * width))


class BoundaryProximityTester:
    r"""Accept iff the fraction of test points in the band
    :math:`|\langle\hat w, x\rangle| \le \sin(\text{radius})\lVert x\rVert` plus the Hoeffding slack
    :math:`\sqrt{\ln(1/\delta)/(2m)}` is at most ``epsilon`` (see the module)."""

    name = "localised (boundary proximity)"

    def __init__(self, w_hat, radius: float, epsilon: float, delta: float):
        self.w_hat = unit(w_hat)
        if not 0 <= radius <= math.pi / 2:
            raise ValueError(f"radius must be an angle in [0, pi/2], got {radius!r}")
        if not 0 < epsilon < 1:
            raise ValueError(f"epsilon must be in (0, 1), got {epsilon!r}")
        self.radius, self.epsilon, self.delta = float(radius), float(epsilon), _delta(delta)
        self.width = math.sin(self.radius)

    @property
    def dim(self) -> int:
        return self.w_hat.size

    def in_band(self, x) -> np.ndarray:
        x = _sample(x, self.dim)
        return np.abs(x @ self.w_hat) <= self.width * np.linalg.norm(x, axis=1)

    def slack(self, m: int) -> float:
        return math.sqrt(math.log(1 / self.delta) / (2 * m))

    def statistic(self, x) -> float:
        """The band fraction of the test sample."""
        return float(np.mean(self.in_band(x)))

    def accepts(self, x) -> bool:
        x = _sample(x, self.dim)
        return self.statistic(x) + self.slack(x.shape[0]) <= self.epsilon

    def acceptance_probability(self, band_mass: float, m: int) -> float:
        r""":math:`P(\mathrm{Bin}(m, p) \le \lfloor m(\varepsilon - \text{slack})\rfloor)`: the exact
        probability of accepting ``m`` i.i.d. points from a law with band mass ``p``."""
        if not 0 <= band_mass <= 1:
            raise ValueError(f"band_mass must be a probability, got {band_mass!r}")
        k = math.floor(m * (self.epsilon - self.slack(m)) + 1e-9)
        return float(stats.binom.cdf(k, m, band_mass)) if k >= 0 else 0.0


class MomentTester:
    """Accept iff every standardised first and second moment of the sample is within the
    Bonferroni threshold of its value under N(0, I) (see the module)."""

    name = "global moments"

    def __init__(self, dim: int, delta: float):
        if isinstance(dim, bool) or not isinstance(dim, (int, np.integer)) or dim < 1:
            raise ValueError(f"dim must be a positive int, got {dim!r}")
        self.dim, self.delta = int(dim), _delta(delta)
        self.n_statistics = self.dim + self.dim * (self.dim + 1) // 2
        self.threshold = float(stats.norm.isf(self.delta / (2 * self.n_statistics)))
        self._upper = np.triu_indices(self.dim, k=1)

    def statistics(self, x) -> np.ndarray:
        """The K standardised statistics, which are approximately N(0, 1) under N(0, I)."""
        x = _sample(x, self.dim)
        m = x.shape[0]
        second = x.T @ x / m
        z_mean = math.sqrt(m) * x.mean(axis=0)
        z_var = math.sqrt(m / 2) * (np.diag(second) - 1.0)
        z_cross = math.sqrt(m) * second[self._upper]
        return np.concatenate([z_mean, z_var, z_cross])

    def accepts(self, x) -> bool:
        return bool(np.max(np.abs(self.statistics(x))) <= self.threshold)


class AlwaysAccept:
    """The trivial tester: accepts every sample (the learner that ignores the shift)."""

    name = "always accept"

    def accepts(self, x) -> bool:
        _sample(x)
        return True
