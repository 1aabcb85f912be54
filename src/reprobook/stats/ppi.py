r"""Confidence intervals for a mean from a few human labels and many autorater scores.

Classical, PPI, PPI++ and stratified PPI (StratPPI, Fisch et al., NeurIPS 2024), plus the
allocation rules that decide how many labels each stratum gets.

**Setting.** We want :math:`\theta = \mathbb E[Y]`, e.g. the rate at which a language model's
answers are judged correct by people. Labels :math:`Y` are expensive; an *autorater* gives every
unit a cheap score :math:`f \in [0, 1]` that may be biased. We hold :math:`n` labelled pairs
:math:`(Y_i, f_i)` and :math:`N` unlabelled scores :math:`\tilde f_j`, all drawn independently.

**PPI family.** For any fixed :math:`\lambda`,

.. math::

   \hat\theta(\lambda) = \lambda\,\overline{\tilde f} + \overline{(Y - \lambda f)},
   \qquad
   \operatorname{Var}\hat\theta(\lambda) = \frac{\operatorname{Var}(Y - \lambda f)}{n}
                                         + \lambda^2 \frac{\operatorname{Var}(f)}{N},

is unbiased whatever the autorater does, because the two :math:`\lambda f` terms have the same
mean. :math:`\lambda = 0` is the classical mean, :math:`\lambda = 1` is PPI (Angelopoulos et al.
2023). PPI++ (Angelopoulos, Duchi & Zrnic 2023) picks the variance-minimising value

.. math::

   \lambda^\star = \frac{\operatorname{Cov}(Y, f)}{(1 + n/N)\operatorname{Var}(f)} ,

estimated by plug-in and clipped to :math:`[0, 1]`. The interval is
:math:`\hat\theta \pm z_{1-\alpha/2}\,\widehat{\mathrm{se}}`, valid as :math:`n, N \to \infty`
because :math:`\hat\lambda \to \lambda^\star` (Slutsky).

**StratPPI.** Split the population into strata :math:`k = 1..K` with known weights
:math:`w_k = P(A = k)`, and sample :math:`n_k` labelled and :math:`N_k` unlabelled units inside
each stratum. Then

.. math::

   \hat\theta = \sum_k w_k\,\hat\theta_k(\lambda_k),
   \qquad
   \operatorname{Var}\hat\theta = \sum_k w_k^2
       \Big[\frac{\operatorname{Var}_k(Y - \lambda_k f)}{n_k}
             + \lambda_k^2 \frac{\operatorname{Var}_k(f)}{N_k}\Big].

The variance separates over strata, so each :math:`\lambda_k` is tuned by the PPI++ rule inside its
own stratum: StratPPI is the :math:`w`-weighted sum of per-stratum PPI++ estimates.

**Allocation.** With :math:`N_k \gg n_k` only the first term depends on :math:`n_k`. Writing
:math:`\sigma_k^2 = \operatorname{Var}_k(Y - \lambda_k f)`, minimising
:math:`\sum_k w_k^2\sigma_k^2/n_k` subject to :math:`\sum_k n_k = n` (a Lagrange multiplier, or
Cauchy–Schwarz) gives Neyman's rule :math:`n_k \propto w_k\sigma_k` with variance
:math:`(\sum_k w_k\sigma_k)^2/n`; proportional allocation :math:`n_k = n w_k` gives
:math:`\sum_k w_k\sigma_k^2/n`. The gap is :math:`\operatorname{Var}_w(\sigma_A)/n \ge 0`.
The allocation must not look at the labels used for estimation; :func:`calibrated_residual_sd`
estimates :math:`\sigma_k` from autorater scores alone.

**Conventions** (chosen so that :func:`ppi_mean_ci` agrees with ``ppi_py.ppi_mean_ci`` 0.2.x):
:math:`\hat\lambda` uses the :math:`1/n` covariance of the labelled pairs over the
:math:`1/(n+N-1)` variance of *all* :math:`n+N` scores, as ``ppi_py`` does. Standard errors use
``ddof=1`` (unbiased variances) by default; ``ppi_py`` uses :math:`1/n` (``ddof=0``). The two
differ by a factor :math:`n/(n-1)` in variance, which matters only for strata with few labels.

**Finite samples.** The plug-in standard error ignores the sampling error of :math:`\hat\lambda`.
Where the autorater is sharp (:math:`\operatorname{Var} f \gg \operatorname{Var}(Y - \lambda f)`)
that error is costly, and it is correlated with the labelled sample's mean. With a few dozen labels
per stratum, StratPPI's interval can then under-cover by 1–3 points (the ``stratified-ppi`` chapter
measures it). A fixed or cross-fitted :math:`\lambda` avoids this.

Every function reduces over the **last axis**, so a batch of independent trials ``y[t, i]`` is one
call; leading axes broadcast.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
from scipy import stats

__all__ = [
    "Interval", "PPITerms", "normal_interval", "classical_mean_ci", "power_tuned_lambda",
    "ppi_terms", "ppi_mean_ci", "stratified_classical_mean_ci", "stratppi_terms",
    "combine_strata", "stratppi_mean_ci", "proportional_allocation", "neyman_allocation",
    "calibrated_residual_sd", "ppi_variance", "optimal_lambda",
]


class Interval(NamedTuple):
    """A normal-approximation confidence interval (arrays over any leading trial axes)."""

    estimate: np.ndarray
    se: np.ndarray
    lower: np.ndarray
    upper: np.ndarray

    @property
    def width(self) -> np.ndarray:
        return self.upper - self.lower

    def covers(self, theta: float) -> np.ndarray:
        return (self.lower <= theta) & (theta <= self.upper)


class PPITerms(NamedTuple):
    r"""The pieces of a PPI estimate: :math:`\hat\theta(\lambda)`, the labelled-sample variance
    :math:`\widehat{\operatorname{Var}}(Y-\lambda f)/n`, the unlabelled-sample variance
    :math:`\lambda^2\widehat{\operatorname{Var}}(\tilde f)/N`, and :math:`\lambda` itself."""

    estimate: np.ndarray
    var_labelled: np.ndarray
    var_unlabelled: np.ndarray
    lam: np.ndarray

    @property
    def variance(self) -> np.ndarray:
        return self.var_labelled + self.var_unlabelled


# ------------------------------------------------------------------------------- input checks
def _samples(name: str, x, min_n: int = 2) -> np.ndarray:
    a = np.asarray(x, dtype=np.float64)
    if a.ndim == 0:
        raise ValueError(f"{name} must be an array of observations on its last axis, not a scalar")
    if a.shape[-1] < min_n:
        raise ValueError(f"{name} needs at least {min_n} observations on its last axis, "
                         f"got {a.shape[-1]}")
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{name} contains non-finite values (nan or inf)")
    return a


def _labelled(y, f) -> tuple[np.ndarray, np.ndarray]:
    y, f = _samples("y", y), _samples("f", f)
    if y.shape != f.shape:
        raise ValueError(f"y and f must have the same shape (one score per label), got {y.shape} "
                         f"and {f.shape}")
    return y, f


def _alpha(alpha: float) -> float:
    if not isinstance(alpha, (int, float)) or not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha!r}")
    return float(alpha)


def _ddof(ddof: int) -> int:
    if ddof not in (0, 1):
        raise ValueError(f"ddof must be 0 (1/n variances, like ppi_py) or 1 (unbiased), "
                         f"got {ddof!r}")
    return int(ddof)


def _strata(name: str, arrays) -> list:
    if isinstance(arrays, np.ndarray) or not isinstance(arrays, Sequence) or not arrays:
        raise ValueError(f"{name} must be a non-empty list with one array per stratum")
    return list(arrays)


def _weights(weights, k: int) -> np.ndarray:
    w = np.asarray(weights, dtype=np.float64)
    if w.shape != (k,):
        raise ValueError(f"weights must have one entry per stratum ({k}), got shape {w.shape}")
    if not np.all(np.isfinite(w)) or np.any(w <= 0):
        raise ValueError(f"weights must be positive and finite, got {w.tolist()}")
    if abs(w.sum() - 1.0) > 1e-9:
        raise ValueError(f"weights must sum to 1 (they are P(stratum)), got sum {w.sum():.12g}")
    return w


# ------------------------------------------------------------------------------- one sample
def normal_interval(estimate, variance, alpha: float = 0.05) -> Interval:
    r"""The interval :math:`\hat\theta \pm z_{1-\alpha/2}\sqrt{v}` for an estimate and its
    variance :math:`v`."""
    z = stats.norm.ppf(1 - _alpha(alpha) / 2)
    estimate = np.asarray(estimate, dtype=np.float64)
    se = np.sqrt(np.asarray(variance, dtype=np.float64))
    return Interval(estimate, se, estimate - z * se, estimate + z * se)


def classical_mean_ci(y, *, alpha: float = 0.05, ddof: int = 1) -> Interval:
    r"""The CLT interval :math:`\bar Y \pm z\,s_Y/\sqrt n` from the labels alone."""
    y = _samples("y", y)
    return normal_interval(y.mean(axis=-1), y.var(axis=-1, ddof=_ddof(ddof)) / y.shape[-1], alpha)


def power_tuned_lambda(y, f, f_unlabelled, *, clip: bool = True) -> np.ndarray:
    r"""PPI++'s plug-in :math:`\hat\lambda = \widehat{\operatorname{Cov}}(Y, f) /
    \big((1 + n/N)\,\widehat{\operatorname{Var}}(f)\big)`, clipped to :math:`[0, 1]` if ``clip``.

    The covariance is the :math:`1/n` one over the labelled pairs; the variance is the unbiased
    one over all :math:`n + N` scores (labels are not needed for it). These are ``ppi_py``'s
    choices. A constant autorater carries no information: :math:`\hat\lambda = 0`.
    """
    y, f = _labelled(y, f)
    fu = _samples("f_unlabelled", f_unlabelled)
    n, big_n = f.shape[-1], fu.shape[-1]
    cov = ((y - y.mean(axis=-1, keepdims=True)) * (f - f.mean(axis=-1, keepdims=True))).mean(-1)
    centre = (f.sum(axis=-1) + fu.sum(axis=-1)) / (n + big_n)
    ss = (((f - centre[..., None]) ** 2).sum(axis=-1)
          + ((fu - centre[..., None]) ** 2).sum(axis=-1))
    denom = (1 + n / big_n) * ss / (n + big_n - 1)
    lam = np.divide(cov, denom, out=np.zeros(np.broadcast(cov, denom).shape), where=denom > 0)
    return np.clip(lam, 0.0, 1.0) if clip else lam


def ppi_terms(y, f, f_unlabelled, lam=1.0, *, ddof: int = 1, clip: bool = True) -> PPITerms:
    r"""The estimate :math:`\hat\theta(\lambda)` and its two variance terms.

    ``lam=None`` tunes :math:`\lambda` by :func:`power_tuned_lambda` (PPI++); a number (or an
    array over the leading axes) fixes it: ``1.0`` is PPI, ``0.0`` the classical estimate.
    """
    y, f = _labelled(y, f)
    fu = _samples("f_unlabelled", f_unlabelled)
    ddof = _ddof(ddof)
    if lam is None:
        lam = power_tuned_lambda(y, f, fu, clip=clip)
    else:
        lam = np.asarray(lam, dtype=np.float64)
        if not np.all(np.isfinite(lam)):
            raise ValueError(f"lam must be finite (or None to tune it), got {lam!r}")
    resid = y - lam[..., None] * f
    return PPITerms(
        estimate=lam * fu.mean(axis=-1) + resid.mean(axis=-1),
        var_labelled=resid.var(axis=-1, ddof=ddof) / y.shape[-1],
        var_unlabelled=lam**2 * fu.var(axis=-1, ddof=ddof) / fu.shape[-1],
        lam=lam,
    )


def ppi_mean_ci(y, f, f_unlabelled, lam=1.0, *, alpha: float = 0.05, ddof: int = 1,
                clip: bool = True) -> Interval:
    """PPI (``lam=1``), PPI++ (``lam=None``: power-tuned) or any fixed-``lam`` interval."""
    t = ppi_terms(y, f, f_unlabelled, lam, ddof=ddof, clip=clip)
    return normal_interval(t.estimate, t.variance, alpha)


# ------------------------------------------------------------------------------- stratified
def stratified_classical_mean_ci(ys, weights, *, alpha: float = 0.05, ddof: int = 1) -> Interval:
    r"""The stratified-sampling interval :math:`\sum_k w_k\bar Y_k \pm
    z\sqrt{\sum_k w_k^2 s_k^2/n_k}` from the labels alone (``ys[k]`` holds stratum k's labels)."""
    ys = [_samples(f"ys[{k}]", y) for k, y in enumerate(_strata("ys", ys))]
    w = _weights(weights, len(ys))
    ddof = _ddof(ddof)
    estimate = sum(w[k] * y.mean(axis=-1) for k, y in enumerate(ys))
    # same order of operations as combine_strata, so lambda = 0 StratPPI matches bit for bit
    variance = sum(w[k] ** 2 * (y.var(axis=-1, ddof=ddof) / y.shape[-1])
                   for k, y in enumerate(ys))
    return normal_interval(estimate, variance, alpha)


def stratppi_terms(ys, fs, f_unlabelled, lam=None, *, ddof: int = 1,
                   clip: bool = True) -> list[PPITerms]:
    """Per-stratum :class:`PPITerms`. ``lam``: ``None`` tunes each stratum's own
    :math:`\\lambda_k`; a number fixes all of them; a sequence gives one per stratum."""
    ys, fs, fus = _strata("ys", ys), _strata("fs", fs), _strata("f_unlabelled", f_unlabelled)
    k = len(ys)
    if len(fs) != k or len(fus) != k:
        raise ValueError(f"ys, fs and f_unlabelled need one array per stratum each, got "
                         f"{len(ys)}, {len(fs)} and {len(fus)}")
    if lam is None or np.ndim(lam) == 0:
        lams = [lam] * k
    else:
        lams = list(lam)
        if len(lams) != k:
            raise ValueError(f"lam must be None, a number or one value per stratum ({k}), "
                             f"got {len(lams)} values")
    out = []
    for i in range(k):
        try:
            out.append(ppi_terms(ys[i], fs[i], fus[i], lams[i], ddof=ddof, clip=clip))
        except ValueError as e:
            raise ValueError(f"stratum {i}: {e}") from None
    return out


def combine_strata(terms: Sequence[PPITerms], weights, *, alpha: float = 0.05) -> Interval:
    r""":math:`\hat\theta = \sum_k w_k\hat\theta_k` with variance :math:`\sum_k w_k^2 v_k`
    (strata are sampled independently, so their estimates are independent)."""
    terms = _strata("terms", terms)
    w = _weights(weights, len(terms))
    estimate = sum(w[k] * t.estimate for k, t in enumerate(terms))
    variance = sum(w[k] ** 2 * t.variance for k, t in enumerate(terms))
    return normal_interval(estimate, variance, alpha)


def stratppi_mean_ci(ys, fs, f_unlabelled, weights, lam=None, *, alpha: float = 0.05,
                     ddof: int = 1, clip: bool = True) -> Interval:
    """StratPPI: per-stratum PPI++ (``lam=None``) combined with the stratum weights."""
    return combine_strata(stratppi_terms(ys, fs, f_unlabelled, lam, ddof=ddof, clip=clip),
                          weights, alpha=alpha)


# ------------------------------------------------------------------------------- allocation
def _check_budget(n, k: int, min_per_stratum) -> tuple[int, int]:
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
        raise TypeError(f"n (the labelling budget) must be an int, got {type(n).__name__}")
    if isinstance(min_per_stratum, bool) or not isinstance(min_per_stratum, (int, np.integer)) \
            or min_per_stratum < 0:
        raise ValueError(f"min_per_stratum must be a non-negative int, got {min_per_stratum!r}")
    if n < k * min_per_stratum:
        raise ValueError(f"n = {n} labels cannot give each of {k} strata at least "
                         f"{min_per_stratum}")
    return int(n), int(min_per_stratum)


def neyman_allocation(n: int, weights, sigmas, *, min_per_stratum: int = 2) -> np.ndarray:
    r"""Integer labels per stratum, :math:`n_k \propto w_k\sigma_k`, summing to ``n``.

    Strata whose share falls below ``min_per_stratum`` (2 is the least that gives a variance) are
    raised to it and the rest is shared again in proportion (the recursive Neyman rule); the
    reals are then rounded by largest remainder so the total is exactly ``n``. If every
    :math:`\sigma_k` is 0 there is nothing to optimise and the allocation is proportional.
    """
    w = _weights(weights, len(np.atleast_1d(weights)))
    s = np.asarray(sigmas, dtype=np.float64)
    if s.shape != w.shape or not np.all(np.isfinite(s)) or np.any(s < 0):
        raise ValueError(f"sigmas must be {len(w)} finite non-negative numbers, got {sigmas!r}")
    n, m = _check_budget(n, len(w), min_per_stratum)
    score = w * s if np.any(w * s > 0) else w
    fixed = np.zeros(len(w), dtype=bool)
    while True:
        free = n - m * fixed.sum()
        share = np.where(fixed, 0.0, score)
        x = np.where(fixed, float(m), free * share / share.sum())
        newly = ~fixed & (x < m)
        if not newly.any():
            break
        fixed |= newly
    counts = np.floor(x + 1e-9).astype(int)
    remainder = x - counts
    for i in np.argsort(-remainder, kind="stable")[: n - counts.sum()]:
        counts[i] += 1
    return counts


def proportional_allocation(n: int, weights, *, min_per_stratum: int = 2) -> np.ndarray:
    """Integer labels per stratum, :math:`n_k \\approx n w_k`, summing to ``n``."""
    w = np.asarray(weights, dtype=np.float64)
    return neyman_allocation(n, w, np.ones_like(w), min_per_stratum=min_per_stratum)


def calibrated_residual_sd(f_unlabelled) -> np.ndarray:
    r"""A label-free guess of :math:`\sigma = \operatorname{sd}(Y - f)`:
    :math:`\sqrt{\overline{f(1-f)}}` over unlabelled scores.

    Exact when the score is a calibrated probability, :math:`P(Y = 1 \mid f) = f` (then
    :math:`\mathbb E[(Y-f)^2 \mid f] = f(1-f)`), and :math:`\lambda = 1`: the paper's heuristic
    for allocating labels before any are collected. Using no labels keeps the allocation
    independent of the labelled sample, which the validity argument needs.
    """
    fu = _samples("f_unlabelled", f_unlabelled, min_n=1)
    if np.any(fu < 0) or np.any(fu > 1):
        raise ValueError("f_unlabelled must be probabilities in [0, 1] for this heuristic")
    return np.sqrt((fu * (1 - fu)).mean(axis=-1))


# ------------------------------------------------------------------------------- theory
def ppi_variance(var_y, cov_yf, var_f, n, big_n, lam):
    r"""The exact variance of :math:`\hat\theta(\lambda)` for a *fixed* :math:`\lambda`:
    :math:`(\operatorname{Var}Y - 2\lambda\operatorname{Cov}(Y,f) + \lambda^2\operatorname{Var}f)/n
    + \lambda^2\operatorname{Var}f/N` (from population moments; ``lam=0`` is the classical one)."""
    return (var_y - 2 * lam * cov_yf + lam**2 * var_f) / n + lam**2 * var_f / big_n


def optimal_lambda(cov_yf, var_f, n, big_n, *, clip: bool = True):
    r"""The population :math:`\lambda^\star = \operatorname{Cov}(Y,f)/((1+n/N)\operatorname{Var}f)`,
    clipped to :math:`[0, 1]` like its plug-in estimate."""
    lam = np.asarray(cov_yf, dtype=np.float64) / ((1 + n / big_n) * np.asarray(var_f))
    return np.clip(lam, 0.0, 1.0) if clip else lam
