r"""Coverage and width of confidence-interval methods over many seeded trials.

A *trial* draws one data set and runs every method on it, so methods are compared on the same
data (common random numbers). Trial :math:`i` draws from ``reprobook.rng(seeds[i], *key)``:
the same trial sees the same data however many trials run and however they are chunked, and
``key`` keeps separate experiments independent. Trials are stacked into chunks along a new
leading axis and each method is called once per chunk, so methods that reduce over the last
axis (like :mod:`reprobook.stats.ppi`) are vectorised over trials for free.

The summaries carry their own uncertainty, so a chapter can say *inconclusive*:

* coverage :math:`\hat c = k/T` with Wilson's interval
  :math:`\dfrac{k + z^2/2}{T + z^2} \pm
  \dfrac{z}{T + z^2}\sqrt{\dfrac{k(T-k)}{T} + \dfrac{z^2}{4}}`;
* mean width with the normal interval :math:`\bar w \pm z\,s_w/\sqrt T`;
* a ratio of mean widths :math:`R = \bar a/\bar b` over paired trials with the delta-method
  interval :math:`R \pm z\,\operatorname{sd}(a_i - R b_i)/(\sqrt T\,\bar b)`.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

from ..seeding import rng as _rng

__all__ = ["Trials", "Summary", "run_trials", "stack_trials", "summarize", "wilson_interval",
           "mean_ci", "ratio_of_means_ci"]


def _z(alpha: float) -> float:
    if not isinstance(alpha, (int, float)) or not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha!r}")
    return float(stats.norm.ppf(1 - alpha / 2))


@dataclass(frozen=True)
class Trials:
    """One method's intervals over all trials (arrays of length ``n_trials``)."""

    estimate: np.ndarray
    lower: np.ndarray
    upper: np.ndarray

    @property
    def n_trials(self) -> int:
        return len(self.estimate)

    @property
    def width(self) -> np.ndarray:
        return self.upper - self.lower

    def covers(self, theta: float) -> np.ndarray:
        return (self.lower <= theta) & (theta <= self.upper)


@dataclass(frozen=True)
class Summary:
    """Coverage and mean width of one method, each with a ``1 - alpha`` interval."""

    n_trials: int
    coverage: float
    coverage_ci: tuple[float, float]
    mean_width: float
    width_ci: tuple[float, float]
    bias: float
    bias_ci: tuple[float, float]


def stack_trials(items: Sequence):
    """Stack per-trial data (arrays, or dicts / lists / tuples of them) along a new first axis."""
    if not items:
        raise ValueError("stack_trials needs at least one trial")
    first = items[0]
    if isinstance(first, Mapping):
        return {k: stack_trials([it[k] for it in items]) for k in first}
    if isinstance(first, (list, tuple)):
        return type(first)(stack_trials([it[i] for it in items]) for i in range(len(first)))
    return np.stack([np.asarray(it) for it in items])


def run_trials(draw: Callable[[np.random.Generator], object],
               methods: Mapping[str, Callable[[object], object]], seeds: Sequence[int], *,
               key: Sequence[int] = (), chunk: int = 200) -> dict[str, Trials]:
    """Run every method on the same ``len(seeds)`` trials.

    ``draw(rng)`` returns one trial's data; ``methods[name](batch)`` gets a chunk of trials
    stacked by :func:`stack_trials` and returns an object with ``estimate``, ``lower`` and
    ``upper`` arrays of the chunk's length (e.g. a :class:`reprobook.stats.ppi.Interval`).
    """
    seeds = [int(s) for s in seeds]
    if not seeds:
        raise ValueError("seeds must hold at least one seed (one per trial)")
    if not methods:
        raise ValueError("methods must name at least one method")
    if not isinstance(chunk, int) or chunk < 1:
        raise ValueError(f"chunk must be a positive int, got {chunk!r}")
    key = [int(k) for k in key]
    parts: dict[str, list] = {name: [] for name in methods}
    for start in range(0, len(seeds), chunk):
        block = seeds[start:start + chunk]
        batch = stack_trials([draw(_rng(s, *key)) for s in block])
        for name, method in methods.items():
            out = method(batch)
            got = [np.asarray(getattr(out, a), dtype=np.float64) for a in ("estimate", "lower",
                                                                          "upper")]
            if any(g.shape != (len(block),) for g in got):
                raise ValueError(f"method {name!r} must return one interval per trial: arrays "
                                 f"of shape ({len(block)},), got {[g.shape for g in got]}")
            parts[name].append(got)
    return {name: Trials(*(np.concatenate([p[i] for p in ps]) for i in range(3)))
            for name, ps in parts.items()}


def wilson_interval(successes: int, trials: int, *, alpha: float = 0.05) -> tuple[float, float]:
    """Wilson's score interval for a binomial proportion (good near 0 and 1, unlike Wald's)."""
    if trials < 1 or not 0 <= successes <= trials:
        raise ValueError(f"need 0 <= successes <= trials and trials >= 1, got {successes}/{trials}")
    z = _z(alpha)
    k, t = float(successes), float(trials)
    centre = (k + z * z / 2) / (t + z * z)
    half = z / (t + z * z) * np.sqrt(k * (t - k) / t + z * z / 4)
    return (float(max(0.0, centre - half)), float(min(1.0, centre + half)))


def mean_ci(x, *, alpha: float = 0.05) -> tuple[float, float, float]:
    """Mean of ``x`` and its normal-approximation interval: ``(mean, low, high)``."""
    x = np.asarray(x, dtype=np.float64).ravel()
    if x.size < 2:
        raise ValueError(f"mean_ci needs at least 2 values, got {x.size}")
    m, half = x.mean(), _z(alpha) * x.std(ddof=1) / np.sqrt(x.size)
    return float(m), float(m - half), float(m + half)


def ratio_of_means_ci(a, b, *, alpha: float = 0.05) -> tuple[float, float, float]:
    """:math:`\\bar a / \\bar b` over paired trials and its delta-method interval."""
    a = np.asarray(a, dtype=np.float64).ravel()
    b = np.asarray(b, dtype=np.float64).ravel()
    if a.shape != b.shape or a.size < 2:
        raise ValueError(f"a and b must be paired samples of equal length >= 2, got {a.size} "
                         f"and {b.size}")
    if b.mean() <= 0:
        raise ValueError("the mean of b must be positive for a ratio of means")
    r = a.mean() / b.mean()
    half = _z(alpha) * (a - r * b).std(ddof=1) / (np.sqrt(a.size) * b.mean())
    return float(r), float(r - half), float(r + half)


def summarize(trials: Trials, theta: float, *, alpha: float = 0.05) -> Summary:
    """Coverage of ``theta`` (Wilson), mean width and bias (normal), each with an interval."""
    hits = int(trials.covers(theta).sum())
    w = mean_ci(trials.width, alpha=alpha)
    b = mean_ci(trials.estimate - theta, alpha=alpha)
    return Summary(n_trials=trials.n_trials, coverage=hits / trials.n_trials,
                   coverage_ci=wilson_interval(hits, trials.n_trials, alpha=alpha),
                   mean_width=w[0], width_ci=w[1:], bias=b[0], bias_ci=b[1:])
