r"""A stratified population with a binary human label and an autorater score, moments known exactly.

The stand-in for "an LLM judged by people on a few items and by an autorater on all of them",
with strata (topics, languages, difficulty bins) where the autorater is more or less reliable.
In stratum :math:`k`, which has probability :math:`w_k`:

.. math::

   Y \sim \mathrm{Bernoulli}(p_k), \qquad
   f = \operatorname{expit}\big(q_k\,(2Y - 1) + s\,\varepsilon\big), \quad \varepsilon \sim N(0, 1).

:math:`q_k \ge 0` is the autorater's *quality* in stratum :math:`k`: with :math:`q_k` large the
score sits near the label, with :math:`q_k = 0` it is noise that ignores the label. The score is
not calibrated (it is a biased judge), which PPI's rectifier corrects. The target is
:math:`\theta = \sum_k w_k p_k`, exactly.

:meth:`StratifiedAutorater.moments` gives :math:`\mathbb E f`, :math:`\operatorname{Var} f` and
:math:`\operatorname{Cov}(Y, f)` per stratum by Gauss–Hermite quadrature (no simulation), so the
asymptotic variance of every estimator can be written down and compared with the simulation.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import expit

__all__ = ["StratifiedAutorater", "StratumMoments"]

_GH_NODES, _GH_WEIGHTS = np.polynomial.hermite.hermgauss(96)


@dataclass(frozen=True)
class StratumMoments:
    """Population moments per stratum (arrays of length K)."""

    mean_y: np.ndarray
    var_y: np.ndarray
    mean_f: np.ndarray
    var_f: np.ndarray
    cov_yf: np.ndarray


def _tuple(name: str, values, k: int | None = None) -> tuple[float, ...]:
    a = np.atleast_1d(np.asarray(values, dtype=np.float64))
    if a.ndim != 1 or a.size == 0:
        raise ValueError(f"{name} must be a flat list of numbers, got {values!r}")
    if k is not None and a.size != k:
        raise ValueError(f"{name} needs one value per stratum ({k}), got {a.size}")
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{name} must be finite, got {values!r}")
    return tuple(float(x) for x in a)


@dataclass(frozen=True)
class StratifiedAutorater:
    """The population: ``weights`` :math:`w_k`, ``positive_rate`` :math:`p_k`, ``quality``
    :math:`q_k` and the score's ``noise`` :math:`s`."""

    weights: tuple[float, ...]
    positive_rate: tuple[float, ...]
    quality: tuple[float, ...]
    noise: float = 1.0

    def __post_init__(self):
        w = _tuple("weights", self.weights)
        k = len(w)
        p = _tuple("positive_rate", self.positive_rate, k)
        q = _tuple("quality", self.quality, k)
        if min(w) <= 0 or abs(sum(w) - 1) > 1e-9:
            raise ValueError(f"weights must be positive and sum to 1, got {w}")
        if min(p) < 0 or max(p) > 1:
            raise ValueError(f"positive_rate must be probabilities in [0, 1], got {p}")
        if min(q) < 0:
            raise ValueError(f"quality must be >= 0 (0 = the score ignores the label), got {q}")
        if not np.isfinite(self.noise) or self.noise <= 0:
            raise ValueError(f"noise must be a positive number, got {self.noise!r}")
        object.__setattr__(self, "weights", w)
        object.__setattr__(self, "positive_rate", p)
        object.__setattr__(self, "quality", q)
        object.__setattr__(self, "noise", float(self.noise))

    # ----------------------------------------------------------------------------- facts
    @property
    def n_strata(self) -> int:
        return len(self.weights)

    @property
    def theta(self) -> float:
        r"""The target :math:`\theta = \sum_k w_k p_k`."""
        return float(np.dot(self.weights, self.positive_rate))

    def with_heterogeneity(self, h: float) -> "StratifiedAutorater":
        r"""Shrink the strata towards each other: :math:`p_k \to \theta + h(p_k - \theta)`,
        :math:`q_k \to \bar q + h(q_k - \bar q)` with :math:`\bar q = \sum_k w_k q_k`.

        ``h = 1`` is this population, ``h = 0`` makes every stratum identical (stratifying can
        then gain nothing); :math:`\theta` is the same for every ``h``.
        """
        if not 0 <= h <= 1:
            raise ValueError(f"h (heterogeneity) must be in [0, 1], got {h!r}")
        if h == 1:
            return self
        w, p, q = (np.asarray(a) for a in (self.weights, self.positive_rate, self.quality))
        theta, qbar = float(w @ p), float(w @ q)
        return StratifiedAutorater(self.weights, tuple(theta + h * (p - theta)),
                                   tuple(qbar + h * (q - qbar)), self.noise)

    def moments(self) -> StratumMoments:
        r"""Exact per-stratum moments. With :math:`m_y = \mathbb E[f \mid Y=y]`, symmetry of
        :math:`\varepsilon` gives :math:`m_0 = 1 - m_1`, and
        :math:`\operatorname{Cov}(Y, f) = p(1-p)(m_1 - m_0)`."""
        p, q = np.asarray(self.positive_rate), np.asarray(self.quality)
        # E g(eps) for eps ~ N(0, 1) is sum_i w_i g(sqrt(2) x_i) / sqrt(pi)
        z = np.sqrt(2.0) * self.noise * _GH_NODES[None, :]
        gw = _GH_WEIGHTS / np.sqrt(np.pi)
        f1, f0 = expit(q[:, None] + z), expit(-q[:, None] + z)
        m1, m0 = f1 @ gw, f0 @ gw
        s1, s0 = f1**2 @ gw, f0**2 @ gw
        mean_f = p * m1 + (1 - p) * m0
        return StratumMoments(mean_y=p, var_y=p * (1 - p), mean_f=mean_f,
                              var_f=p * s1 + (1 - p) * s0 - mean_f**2,
                              cov_yf=p * (1 - p) * (m1 - m0))

    def mixture_moments(self) -> StratumMoments:
        """The same moments for the whole population (length-1 arrays), by the law of total
        variance / covariance over strata."""
        m, w = self.moments(), np.asarray(self.weights)
        ey, ef = w @ m.mean_y, w @ m.mean_f
        var_y = w @ (m.var_y + m.mean_y**2) - ey**2
        var_f = w @ (m.var_f + m.mean_f**2) - ef**2
        cov = w @ (m.cov_yf + m.mean_y * m.mean_f) - ey * ef
        return StratumMoments(*(np.atleast_1d(x) for x in (ey, var_y, ef, var_f, cov)))

    # ----------------------------------------------------------------------------- sampling
    def _draw(self, p, q, size: int, rng: np.random.Generator):
        y = (rng.random(size) < p).astype(np.float64)
        return y, expit(q * (2 * y - 1) + self.noise * rng.standard_normal(size))

    def draw_stratum(self, k: int, size: int, rng: np.random.Generator):
        """``size`` labelled units ``(y, f)`` from stratum ``k``."""
        if not 0 <= k < self.n_strata:
            raise ValueError(f"stratum k must be in 0..{self.n_strata - 1}, got {k}")
        return self._draw(self.positive_rate[k], self.quality[k], int(size), rng)

    def draw_mixture(self, size: int, rng: np.random.Generator):
        """``size`` i.i.d. units from the whole population: ``(stratum, y, f)``."""
        strata = rng.choice(self.n_strata, size=int(size), p=self.weights)
        p, q = np.asarray(self.positive_rate)[strata], np.asarray(self.quality)[strata]
        return (strata, *self._draw(p, q, int(size), rng))

    def draw_stratified(self, sizes, rng: np.random.Generator):
        """``sizes[k]`` units from each stratum: lists ``ys``, ``fs`` (a stratified sample)."""
        sizes = [int(s) for s in sizes]
        if len(sizes) != self.n_strata or min(sizes) < 0:
            raise ValueError(f"sizes must be {self.n_strata} non-negative counts, got {sizes}")
        pairs = [self.draw_stratum(k, s, rng) for k, s in enumerate(sizes)]
        return [y for y, _ in pairs], [f for _, f in pairs]

    def pool_sizes(self, big_n: int) -> np.ndarray:
        """Stratum sizes of an unlabelled pool of ``big_n`` units, proportional to the weights
        (largest remainder), so that :math:`N_k/N = w_k` up to rounding."""
        if int(big_n) < self.n_strata:
            raise ValueError(f"big_n must be at least the number of strata, got {big_n}")
        x = int(big_n) * np.asarray(self.weights)
        counts = np.floor(x + 1e-9).astype(int)
        for i in np.argsort(-(x - counts), kind="stable")[: int(big_n) - counts.sum()]:
            counts[i] += 1
        return counts

    def draw_pool(self, big_n: int, rng: np.random.Generator) -> list[np.ndarray]:
        """Autorater scores (labels discarded) of an unlabelled pool, one array per stratum.

        The pool is stratified proportionally. An unstratified method that treats it as i.i.d.
        over-states the variance of its mean by a between-strata term of order :math:`1/N`.
        """
        return [self.draw_stratum(k, s, rng)[1] for k, s in enumerate(self.pool_sizes(big_n))]
