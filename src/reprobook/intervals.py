r"""Intervals for the whole book: every interval a verdict is read from is made here.

A claim about a random quantity is judged on an :class:`Estimate`: the value, a confidence
interval, the per-replicate samples it came from and *what a replicate is* (a training seed, a data
draw, a graph build; the thing the paper's claim varies, not only the test queries). The ledger
stores the samples, so a reader can recompute the interval, and it refuses a definite verdict when
fewer than :data:`MIN_REPLICATES` replicates or a degenerate interval stand behind it.

The methods, each for the situation it is right for:

* :func:`mean`: Student's t interval :math:`\bar x \pm t_{n-1,1-\alpha/2}\, s/\sqrt n` over
  independent replicates (seeds are few, so t, not the normal quantile);
* :func:`difference`: the t interval of paired differences :math:`d_i = a_i - b_i` (method and
  baseline run on the same replicate: common random numbers);
* :func:`ratio`: a ratio of means :math:`R = \bar a / \bar b` over paired replicates with the
  delta-method interval :math:`R \pm t_{n-1}\,\operatorname{sd}(a_i - R b_i)/(\sqrt n\,\bar b)`;
* :func:`bootstrap`: BCa (default) or percentile bootstrap of any statistic, for medians, quantiles
  and other non-linear statistics, only from :data:`MIN_BOOTSTRAP` replicates on, where the
  bootstrap distribution means something;
* :func:`rate`: a binomial proportion with Wilson's score interval or the exact Clopper-Pearson
  interval (coverage, acceptance and error rates), where the replicates are the trials;
* :func:`rate_difference`: the difference of two independent proportions with Newcombe's hybrid
  score interval (from the two Wilson intervals), which stays inside [-1, 1] and is not degenerate
  at 0/n or n/n;
* :func:`quantile`: a quantile :math:`\xi_q` with the distribution-free order-statistic interval
  :math:`[X_{(l)}, X_{(u)}]`, where :math:`l` and :math:`u` come from the Binomial(n, q) law of the
  number of replicates below :math:`\xi_q` (exact coverage at least the level; an end that would
  need more replicates than there are is infinite, so a high quantile of few replicates is
  honestly inconclusive).
"""
from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy import stats

__all__ = ["Estimate", "mean", "difference", "ratio", "bootstrap", "rate", "rate_difference",
           "quantile",
           "MIN_REPLICATES", "MIN_BOOTSTRAP"]

#: Fewer independent replicates than this never give a definite verdict.
MIN_REPLICATES = 3
#: The bootstrap is refused below this many replicates (use :func:`mean` or :func:`ratio`).
MIN_BOOTSTRAP = 10
#: Samples kept in the ledger beyond this many are summarised, so a 10^5-trial rate stays small.
MAX_STORED_SAMPLES = 2000


@dataclass(frozen=True)
class Estimate:
    """A measured value, its interval and the replicates behind it.

    ``samples`` are the per-replicate values the interval was computed from: one number per
    replicate, or for a paired statistic (:func:`ratio`, a multi-sample :func:`bootstrap`) one tuple
    per replicate holding each arm's value, so the interval can be recomputed from the ledger. For a
    rate the count of successes is in ``k``. ``unit`` names what one replicate is. Construct through
    the functions of this module.
    """

    value: float
    low: float
    high: float
    n: int
    method: str
    unit: str
    level: float = 0.95
    samples: tuple = field(default=(), repr=False)
    k: int | None = None

    @property
    def interval(self) -> tuple[float, float]:
        return (self.low, self.high)

    @property
    def degenerate(self) -> bool:
        """No usable interval: not finite, or of zero width."""
        return not (math.isfinite(self.low) and math.isfinite(self.high)) or self.high <= self.low

    def why_inconclusive(self) -> str | None:
        """The reason no definite verdict may be read from this estimate, or None."""
        if self.n < MIN_REPLICATES:
            return f"only {self.n} replicate(s) ({self.unit}); at least {MIN_REPLICATES} are needed"
        if self.degenerate:
            return f"degenerate interval [{self.low:.4g}, {self.high:.4g}] over {self.n} {self.unit}s"
        return None

    def describe(self) -> str:
        """One line: how many replicates of what, and which interval."""
        pct = f"{100 * self.level:g}%"
        if self.k is not None:
            return f"{self.k}/{self.n} {self.unit}s, {pct} {self.method} interval"
        return f"n = {self.n} {self.unit}s, {pct} {self.method} interval"

    def to_json(self) -> dict:
        samples = list(self.samples)
        out = {"value": self.value, "low": _finite(self.low), "high": _finite(self.high),
               "n": self.n, "method": self.method, "unit": self.unit, "level": self.level}
        if self.k is not None:
            out["k"] = self.k
        if len(samples) > MAX_STORED_SAMPLES:
            arr = np.asarray(samples, dtype=np.float64)
            out["samples_summary"] = {"count": len(samples), "mean": arr.mean(axis=0).tolist(),
                                      "sd": arr.std(axis=0, ddof=1).tolist()}
        else:
            out["samples"] = [[_round(v) for v in x] if isinstance(x, tuple) else _round(x)
                              for x in samples]
        return out


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None


def _round(x: float) -> float:
    return float(f"{x:.10g}") if math.isfinite(x) else x


def _level(level: float) -> float:
    if isinstance(level, bool) or not isinstance(level, (int, float)) or not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), e.g. 0.95; got {level!r}")
    return float(level)


def _unit(unit: str) -> str:
    if not isinstance(unit, str) or not unit.strip():
        raise ValueError("unit must say what one replicate is, e.g. unit='training seed'")
    return unit.strip()


def _samples(name: str, x) -> np.ndarray:
    a = np.asarray(x, dtype=np.float64)
    if a.ndim != 1:
        raise ValueError(f"{name} must be one value per replicate (1-D), got shape {a.shape}")
    if a.size == 0:
        raise ValueError(f"{name} holds no replicates")
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{name} has non-finite values: {a[~np.isfinite(a)][:3].tolist()}")
    return a


def _t(level: float, n: int) -> float:
    return float(stats.t.ppf(0.5 + level / 2, n - 1)) if n >= 2 else math.inf


def mean(samples: Sequence[float], *, unit: str, level: float = 0.95) -> Estimate:
    """The mean over independent replicates with Student's t interval."""
    x, level, unit = _samples("samples", samples), _level(level), _unit(unit)
    m = float(x.mean())
    half = _t(level, x.size) * float(x.std(ddof=1)) / math.sqrt(x.size) if x.size > 1 else math.inf
    return Estimate(m, m - half, m + half, x.size, "t", unit, level, tuple(x.tolist()))


def difference(a: Sequence[float], b: Sequence[float], *, unit: str,
               level: float = 0.95) -> Estimate:
    """Mean of the paired differences ``a_i - b_i`` (same replicate, both arms) with a t interval."""
    a, b = _samples("a", a), _samples("b", b)
    if a.shape != b.shape:
        raise ValueError(f"a and b must be paired (one value each per replicate): {a.size} != "
                         f"{b.size}")
    est = mean(a - b, unit=unit, level=level)
    return Estimate(est.value, est.low, est.high, est.n, "paired t", est.unit, est.level,
                    est.samples)


def ratio(a: Sequence[float], b: Sequence[float], *, unit: str, level: float = 0.95) -> Estimate:
    r"""Ratio of means :math:`\bar a/\bar b` over paired replicates, delta-method t interval.

    The samples stored are the pairs :math:`(a_i, b_i)`, from which the interval is recomputed.
    """
    a, b = _samples("a", a), _samples("b", b)
    level, unit = _level(level), _unit(unit)
    if a.shape != b.shape:
        raise ValueError(f"a and b must be paired (one value each per replicate): {a.size} != "
                         f"{b.size}")
    if b.mean() <= 0:
        raise ValueError("ratio() needs a positive mean of b (the denominator)")
    r = float(a.mean() / b.mean())
    if a.size > 1:
        half = _t(level, a.size) * float((a - r * b).std(ddof=1)) / (math.sqrt(a.size) * b.mean())
    else:
        half = math.inf
    return Estimate(r, r - half, r + half, a.size, "delta-method ratio", unit, level,
                    tuple(zip(a.tolist(), b.tolist())))


def bootstrap(statistic: Callable[..., float], *samples: Sequence[float], unit: str,
              level: float = 0.95, method: str = "BCa", n_resamples: int = 2000,
              seed: int = 0) -> Estimate:
    """A bootstrap interval of ``statistic(*samples)``; several samples are resampled jointly
    (paired: replicate i of each array stays together).

    Refused below :data:`MIN_BOOTSTRAP` replicates: with 3-5 seeds the bootstrap distribution is a
    handful of atoms and its percentiles are not an interval worth judging on.
    """
    arrays = [_samples(f"sample {i}", s) for i, s in enumerate(samples)]
    level, unit = _level(level), _unit(unit)
    if not arrays:
        raise ValueError("bootstrap() needs at least one sample")
    n = arrays[0].size
    if any(a.size != n for a in arrays):
        raise ValueError(f"bootstrap() samples must be paired, got sizes {[a.size for a in arrays]}")
    if n < MIN_BOOTSTRAP:
        raise ValueError(f"bootstrap() needs at least {MIN_BOOTSTRAP} replicates, got {n}: use "
                         "intervals.mean, difference or ratio (t intervals) for few replicates")
    kind = {"bca": "BCa", "percentile": "percentile"}.get(method.lower())
    if kind is None:
        raise ValueError(f"bootstrap method must be 'BCa' or 'percentile', got {method!r}")
    value = float(statistic(*arrays))

    def run(how):
        with warnings.catch_warnings():
            # scipy warns when BCa's jackknife is degenerate (a min, a constant statistic); the
            # non-finite interval it then returns is caught below and the method named
            warnings.simplefilter("ignore", RuntimeWarning)
            warnings.simplefilter("ignore", getattr(stats, "DegenerateDataWarning", RuntimeWarning))
            res = stats.bootstrap(arrays, lambda *xs: statistic(*xs), paired=True,
                                  vectorized=False, confidence_level=level,
                                  n_resamples=n_resamples, method=how,
                                  random_state=np.random.default_rng(np.random.SeedSequence([seed,
                                                                                             n])))
        return float(res.confidence_interval.low), float(res.confidence_interval.high)

    lo, hi = run(kind)
    if not (math.isfinite(lo) and math.isfinite(hi)) and kind == "BCa":
        lo, hi = run("percentile")  # BCa needs a non-constant jackknife: fall back, say so
        kind = "percentile (BCa undefined)"
    per = tuple(arrays[0].tolist()) if len(arrays) == 1 else \
        tuple(zip(*(a.tolist() for a in arrays)))
    return Estimate(value, lo, hi, n, f"{kind} bootstrap", unit, level, per)


def rate(successes: int | Sequence[bool], trials: int | None = None, *, unit: str,
         level: float = 0.95, method: str = "wilson") -> Estimate:
    """A proportion ``k / n`` with Wilson's score interval (default) or Clopper-Pearson's exact one.

    Pass either the count and the number of trials, or the per-trial outcomes (booleans).
    """
    level, unit = _level(level), _unit(unit)
    outcomes: tuple[float, ...] = ()
    if trials is None:
        x = np.asarray(successes)
        if x.ndim != 1 or x.size == 0 or not np.isin(x, (0, 1)).all():
            raise ValueError("rate(outcomes) needs a 1-D array of 0/1 (or bool) per trial")
        k, n = int(x.sum()), int(x.size)
        outcomes = tuple(float(v) for v in x)
    else:
        k, n = successes, trials
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or \
                not isinstance(n, (int, np.integer)):
            raise TypeError(f"rate(k, n) needs integer counts, got {k!r}, {n!r}")
        k, n = int(k), int(n)
        if n < 1 or not 0 <= k <= n:
            raise ValueError(f"rate(k, n) needs 0 <= k <= n and n >= 1, got {k}/{n}")
    alpha = 1 - level
    if method == "wilson":
        z = float(stats.norm.ppf(1 - alpha / 2))
        centre = (k + z * z / 2) / (n + z * z)
        half = z / (n + z * z) * math.sqrt(k * (n - k) / n + z * z / 4)
        lo, hi, name = max(0.0, centre - half), min(1.0, centre + half), "Wilson"
    elif method == "clopper-pearson":
        lo = float(stats.beta.ppf(alpha / 2, k, n - k + 1)) if k > 0 else 0.0
        hi = float(stats.beta.ppf(1 - alpha / 2, k + 1, n - k)) if k < n else 1.0
        name = "Clopper-Pearson"
    else:
        raise ValueError(f"rate method must be 'wilson' or 'clopper-pearson', got {method!r}")
    return Estimate(k / n, lo, hi, n, name, unit, level, outcomes, k=k)


def quantile(samples: Sequence[float], q: float, *, unit: str, level: float = 0.95) -> Estimate:
    r"""The ``q``-quantile of independent replicates with its order-statistic interval.

    With :math:`K \sim \mathrm{Binomial}(n, q)` the number of replicates below :math:`\xi_q`,
    :math:`P(X_{(j)} \le \xi_q) = P(K \ge j)`. The lower end is :math:`X_{(l)}` with
    :math:`l` the :math:`\alpha/2` quantile of :math:`K`, the upper end :math:`X_{(u)}` with
    :math:`u - 1` its :math:`1-\alpha/2` quantile, each end missing at most :math:`\alpha/2`;
    an index outside :math:`1..n` gives an infinite end. The point value is ``numpy.quantile``.
    """
    x, level, unit = _samples("samples", samples), _level(level), _unit(unit)
    if isinstance(q, bool) or not isinstance(q, (int, float)) or not 0 < q < 1:
        raise ValueError(f"quantile q must be in (0, 1), got {q!r}")
    n, alpha = x.size, 1 - level
    s = np.sort(x)
    lo_i = int(stats.binom.ppf(alpha / 2, n, q))          # 1-based order statistic
    hi_i = int(stats.binom.ppf(1 - alpha / 2, n, q)) + 1
    lo = float(s[lo_i - 1]) if lo_i >= 1 else -math.inf
    hi = float(s[hi_i - 1]) if hi_i <= n else math.inf
    return Estimate(float(np.quantile(x, q)), lo, hi, n, f"order-statistic (q = {q:g})", unit,
                    level, tuple(x.tolist()))


def rate_difference(k1: int, n1: int, k2: int, n2: int, *, unit: str,
                    level: float = 0.95) -> Estimate:
    r""":math:`\hat p_1 - \hat p_2` for two independent binomial samples, Newcombe's interval.

    With Wilson intervals :math:`[l_i, u_i]` of each proportion, the interval is
    :math:`d - \sqrt{(\hat p_1 - l_1)^2 + (u_2 - \hat p_2)^2}` to
    :math:`d + \sqrt{(u_1 - \hat p_1)^2 + (\hat p_2 - l_2)^2}` (Newcombe 1998, method 10).
    """
    a = rate(k1, n1, unit=unit, level=level)
    b = rate(k2, n2, unit=unit, level=level)
    d = a.value - b.value
    lo = d - math.sqrt((a.value - a.low) ** 2 + (b.high - b.value) ** 2)
    hi = d + math.sqrt((a.high - a.value) ** 2 + (b.value - b.low) ** 2)
    return Estimate(d, lo, hi, min(n1, n2), "Newcombe difference", unit, level,
                    ((float(k1), float(n1)), (float(k2), float(n2))))
