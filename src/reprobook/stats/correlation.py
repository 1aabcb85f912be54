r"""Correlation coefficients, and the rearrangement correlation of Ai (NeurIPS 2024).

Every coefficient here works on the last axis, so a batch of samples ``x[b, i], y[b, i]`` is one
call. Covariances use the :math:`1/n` normalisation throughout; it cancels in every ratio.

**The inequality chain.** For samples :math:`x, y \in \mathbb R^n` with means :math:`\bar x, \bar y`,
write :math:`x^\uparrow` for :math:`x` sorted ascending and :math:`y^\downarrow` for :math:`y` sorted
descending, and :math:`s_{a,b} = \frac1n \sum_i (a_i - \bar a)(b_i - \bar b)`. The rearrangement
inequality (a sum of products is largest when both sequences are sorted the same way and smallest
when sorted oppositely) gives

.. math::

   s_{x^\uparrow, y^\downarrow} \;\le\; s_{x,y} \;\le\; s_{x^\uparrow, y^\uparrow},

and Cauchy–Schwarz bounds both ends by :math:`s_x s_y`, so
:math:`|s_{x,y}| \le |s_{x^\uparrow, y^\updownarrow}| \le s_x s_y`, where :math:`y^\updownarrow`
is :math:`y^\uparrow` when :math:`s_{x,y} \ge 0` and :math:`y^\downarrow` otherwise.

**The coefficients.** Pearson's :math:`r = s_{x,y} / (s_x s_y)` scales the covariance by the
Cauchy–Schwarz bound; the rearrangement correlation scales it by the tighter bound,

.. math::

   r^\#(x, y) = \frac{s_{x,y}}{|s_{x^\uparrow, y^\updownarrow}|} .

Hence :math:`|r| \le |r^\#| \le 1`; :math:`r^\# = \pm 1` exactly when :math:`y` is a monotone
(co- or anti-sorted) rearrangement of :math:`x`'s order, i.e. for any strictly monotone relation;
and :math:`r^\# = r` whenever :math:`y^\uparrow` is an affine function of :math:`x^\uparrow` with a
positive slope (the two samples have the same shape), which includes every linear relation and,
on ranks without ties, makes :math:`r^\#` equal to Spearman's :math:`\rho`.

A constant sample has no correlation: every coefficient returns ``nan`` for it.
"""
from __future__ import annotations

import numpy as np
from scipy import stats

__all__ = [
    "covariance", "rearrangement_bound", "cauchy_schwarz_bound", "recor", "pearson",
    "spearman", "kendall", "chatterjee_xi", "distance_correlation", "COEFFICIENTS",
    "RECENT_MEASURES",
]


def _pair(x, y, name_x: str = "x", name_y: str = "y") -> tuple[np.ndarray, np.ndarray]:
    """Check and convert a pair of samples (same shape, at least 2 observations, finite)."""
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if x.ndim == 0 or y.ndim == 0:
        raise ValueError(f"{name_x} and {name_y} must be arrays of observations, not scalars")
    if x.shape != y.shape:
        raise ValueError(f"{name_x} and {name_y} must have the same shape, got {x.shape} and "
                         f"{y.shape}")
    if x.shape[-1] < 2:
        raise ValueError(f"{name_x} and {name_y} need at least 2 observations on the last axis, "
                         f"got {x.shape[-1]}")
    for name, a in ((name_x, x), (name_y, y)):
        if not np.all(np.isfinite(a)):
            raise ValueError(f"{name} contains non-finite values (nan or inf)")
    return x, y


def covariance(x, y) -> np.ndarray:
    """Sample covariance :math:`s_{x,y}` with the :math:`1/n` normalisation, on the last axis."""
    x, y = _pair(x, y)
    return _cov(x, y)


def _cov(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    xc = x - x.mean(axis=-1, keepdims=True)
    yc = y - y.mean(axis=-1, keepdims=True)
    return (xc * yc).mean(axis=-1)


def _sorted_bounds(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:math:`s_{x^\\uparrow, y^\\uparrow}` (the largest covariance over rearrangements) and
    :math:`s_{x^\\uparrow, y^\\downarrow}` (the smallest)."""
    xs = np.sort(x, axis=-1)
    ys = np.sort(y, axis=-1)
    up = _cov(xs, ys)
    down = _cov(xs, ys[..., ::-1])
    return up, down


def rearrangement_bound(x, y) -> np.ndarray:
    r"""The bound :math:`|s_{x^\uparrow, y^\updownarrow}|` on :math:`|s_{x,y}|`, on the last axis."""
    x, y = _pair(x, y)
    up, down = _sorted_bounds(x, y)
    return np.where(_cov(x, y) >= 0, up, np.abs(down))


def cauchy_schwarz_bound(x, y) -> np.ndarray:
    """The Cauchy–Schwarz bound :math:`s_x s_y` on :math:`|s_{x,y}|` (population SDs, 1/n)."""
    x, y = _pair(x, y)
    return x.std(axis=-1) * y.std(axis=-1)


def _ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    # A zero bound means a constant sample: the coefficient is undefined, not 0.
    num, den = np.broadcast_arrays(num, den)
    out = np.full(num.shape, np.nan)
    ok = den > 0
    np.divide(num, den, out=out, where=ok)
    return out if out.ndim else float(out)


def recor(x, y) -> np.ndarray | float:
    r"""Rearrangement correlation :math:`r^\# = s_{x,y} / |s_{x^\uparrow, y^\updownarrow}|`.

    Works on the last axis (a batch of samples at once). Returns ``nan`` for a constant sample.
    """
    x, y = _pair(x, y)
    s = _cov(x, y)
    up, down = _sorted_bounds(x, y)
    return _ratio(s, np.where(s >= 0, up, np.abs(down)))


def pearson(x, y) -> np.ndarray | float:
    """Pearson's :math:`r = s_{x,y} / (s_x s_y)`, on the last axis (``nan`` for a constant)."""
    x, y = _pair(x, y)
    return _ratio(_cov(x, y), x.std(axis=-1) * y.std(axis=-1))


def spearman(x, y) -> np.ndarray | float:
    """Spearman's :math:`\\rho`: Pearson's r of the (average-tie) ranks, on the last axis.

    Equal to :func:`scipy.stats.spearmanr` (a unit test checks it); written batched because scipy's
    2-D form computes a full correlation matrix.
    """
    x, y = _pair(x, y)
    return pearson(stats.rankdata(x, axis=-1), stats.rankdata(y, axis=-1))


def kendall(x, y) -> np.ndarray | float:
    """Kendall's :math:`\\tau_b` from :func:`scipy.stats.kendalltau`, looped over a batch."""
    x, y = _pair(x, y)
    if x.ndim == 1:
        return float(stats.kendalltau(x, y).statistic)
    flat_x, flat_y = x.reshape(-1, x.shape[-1]), y.reshape(-1, y.shape[-1])
    out = np.array([stats.kendalltau(a, b).statistic for a, b in zip(flat_x, flat_y)])
    return out.reshape(x.shape[:-1])


def chatterjee_xi(x, y) -> np.ndarray | float:
    r"""Chatterjee's rank coefficient :math:`\xi_n(x, y)` (2021), on the last axis.

    Sort the pairs by :math:`x` and let :math:`r_i = \#\{j: y_j \le y_{(i)}\}`,
    :math:`l_i = \#\{j: y_j \ge y_{(i)}\}`; then
    :math:`\xi = 1 - n\sum_i |r_{i+1} - r_i| \,/\, (2 \sum_i l_i (n - l_i))`.
    Ties in :math:`x` are broken by position (the sample is assumed continuous in :math:`x`).
    It estimates a measure in [0, 1] that is 1 iff :math:`y` is a function of :math:`x`.
    """
    x, y = _pair(x, y)
    n = x.shape[-1]
    order = np.argsort(x, axis=-1, kind="stable")
    ys = np.take_along_axis(y, order, axis=-1)
    r = stats.rankdata(ys, method="max", axis=-1)          # #{j: y_j <= y_i}
    l = n + 1 - stats.rankdata(ys, method="min", axis=-1)  # #{j: y_j >= y_i}
    num = n * np.abs(np.diff(r, axis=-1)).sum(axis=-1)
    den = 2.0 * (l * (n - l)).sum(axis=-1)
    return _ratio(den - num, den)


def distance_correlation(x, y, chunk: int = 16) -> np.ndarray | float:
    r"""Distance correlation :math:`\mathrm{dCor}_n(x, y)` of Székely, Rizzo and Bakirov (2007).

    The V-statistic form. With :math:`a_{ij} = |x_i - x_j|`, row means :math:`a_{i\cdot}` and
    grand mean :math:`a_{\cdot\cdot}` (likewise :math:`b` for :math:`y`), the squared distance
    covariance of the double-centred matrices is
    :math:`\mathcal V^2(x, y) = \overline{ab} - 2\,\overline{a_{i\cdot} b_{i\cdot}} + a_{\cdot\cdot} b_{\cdot\cdot}`,
    and :math:`\mathrm{dCor} = \sqrt{\mathcal V^2(x,y) / \sqrt{\mathcal V^2(x,x)\,\mathcal V^2(y,y)}}`.
    O(n^2) memory per sample, so a batch is processed ``chunk`` samples at a time.
    """
    x, y = _pair(x, y)
    if not isinstance(chunk, int) or chunk < 1:
        raise ValueError(f"chunk must be a positive int, got {chunk!r}")
    shape = x.shape[:-1]
    fx, fy = x.reshape(-1, x.shape[-1]), y.reshape(-1, y.shape[-1])
    out = np.empty(fx.shape[0])

    def v2(a, b, ar, br):
        # the three terms of the double-centred inner product, without forming centred matrices
        return ((a * b).mean(axis=(1, 2)) - 2 * (ar * br).mean(axis=1)
                + ar.mean(axis=1) * br.mean(axis=1))

    for i in range(0, fx.shape[0], chunk):
        xa, ya = fx[i:i + chunk], fy[i:i + chunk]
        a = np.abs(xa[:, :, None] - xa[:, None, :])
        b = np.abs(ya[:, :, None] - ya[:, None, :])
        ar, br = a.mean(axis=2), b.mean(axis=2)
        vxy, vxx, vyy = v2(a, b, ar, br), v2(a, a, ar, ar), v2(b, b, br, br)
        den = np.sqrt(np.clip(vxx, 0, None) * np.clip(vyy, 0, None))
        with np.errstate(invalid="ignore", divide="ignore"):
            out[i:i + chunk] = np.where(den > 0, np.sqrt(np.clip(vxy, 0, None) / den), np.nan)
    out = out.reshape(shape)
    return out if out.ndim else float(out)


#: The coefficients the chapter compares, in display order (method first).
COEFFICIENTS = {"r#": recor, "Pearson r": pearson, "Spearman ρ": spearman, "Kendall τ": kendall}

#: Two recent dependence measures the paper also compares with (both in [0, 1]).
RECENT_MEASURES = {"dCor": distance_correlation, "Chatterjee ξ": chatterjee_xi}
