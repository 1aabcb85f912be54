r"""Heavy-tailed self-regularisation: the spectrum of a weight matrix and the exponent of its tail.

**The empirical spectral density (ESD).** For a weight matrix :math:`W \in \mathbb R^{m\times n}` the
ESD is the set of eigenvalues of :math:`W^\top W` (equivalently :math:`W W^\top`, up to zeros), i.e.
the squared singular values :math:`\lambda_i = \sigma_i(W)^2`, :math:`\min(m, n)` of them. Heavy-tailed
self-regularisation (HT-SR; Martin & Mahoney) observes that training turns the Marchenko-Pastur bulk
of a random matrix into a distribution whose upper tail is close to a power law,
:math:`p(\lambda) \propto \lambda^{-\alpha}` for :math:`\lambda \ge x_{\min}`, and that a *smaller*
:math:`\alpha` (a heavier tail) goes with a better-trained layer.

**The fit** (:func:`fit_alpha`). For a candidate :math:`x_{\min} = \lambda_{(i)}` (ascending order,
:math:`n = N - i` eigenvalues at or above it) the continuous maximum-likelihood (Hill) estimate is

.. math::

   \hat\alpha_i = 1 + \frac{n}{\sum_{j \ge i} \ln \lambda_{(j)} - n \ln \lambda_{(i)}},

and its Kolmogorov-Smirnov distance to the tail is
:math:`D_i = \max_{j \ge i} \big|1 - (\lambda_{(j)}/\lambda_{(i)})^{1-\hat\alpha_i} - (j - i)/n\big|`
(the empirical CDF counted from 0, as in the AlphaPruning code). Clauset, Shalizi & Newman choose the
candidate with the smallest :math:`D`; which candidates are tried is the ``xmin`` rule:

* ``"peak"`` (AlphaPruning's ``xmin_peak``, its default): histogram :math:`\log_{10}\lambda` into
  ``bins`` bins, take the left edge :math:`x_p` of the fullest bin, and try only candidates in
  :math:`[0.95\,x_p, 1.5\,x_p]`. The official code compares the eigenvalues with
  :math:`\log_{10}(0.95\,x_p)` instead of :math:`0.95\,x_p`; since that is below every eigenvalue
  whenever :math:`x_p < 1.05`, its lower bound is usually void and every eigenvalue up to
  :math:`1.5\,x_p` is a candidate. ``lower="repo"`` (default) replicates that, ``lower="stated"``
  applies the bound as written;
* ``"all"``: every eigenvalue but the largest is a candidate (Clauset et al.);
* ``"mid"`` (AlphaPruning's ``xmin_mid``): :math:`x_{\min}` is the median eigenvalue, no search;
* ``"min"``: :math:`x_{\min}` is the smallest eigenvalue, i.e. the whole spectrum is fitted as if it
  were a power law. This is a deliberately broken fit (no tail selection) for controls.

**Planted spectra** (:func:`planted_spectrum`, :func:`planted_matrix`) have a known exponent: a
fraction of the eigenvalues is drawn from the Pareto law with density :math:`(a-1)\lambda^{-a}` on
:math:`[1, \infty)` (by inversion, :math:`\lambda = U^{-1/(a-1)}`), the rest from a log-uniform bulk
on :math:`[10^{-d}, 1)`, so the tail starts exactly at :math:`x_{\min} = 1`.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["PowerLawFit", "XMIN_RULES", "esd", "fit_alpha", "fit_alpha_powerlaw", "planted_spectrum",
           "planted_matrix"]

XMIN_RULES = ("peak", "all", "mid", "min")


@dataclass(frozen=True)
class PowerLawFit:
    """One power-law fit of a spectrum's tail: the exponent, where the tail starts, its KS distance
    and how many eigenvalues it holds (out of ``n``)."""

    alpha: float
    xmin: float
    ks: float
    n_tail: int
    n: int


def esd(W, precision: str = "float64") -> np.ndarray:
    r"""The eigenvalues of :math:`W^\top W` (squared singular values of ``W``), ascending, as float64.

    ``W``: a 2-D array or torch tensor (any device; copied to the CPU). ``precision``: the SVD's
    dtype, ``"float64"`` or ``"float32"`` (what the AlphaPruning code uses; about twice as fast).
    """
    import torch

    if precision not in ("float64", "float32"):
        raise ValueError(f"precision must be 'float64' or 'float32', got {precision!r}")
    # torch's SVD honours torch.set_num_threads (NumPy's BLAS may oversubscribe a busy machine)
    W = torch.as_tensor(W).detach().to("cpu", getattr(torch, precision))
    if W.ndim != 2 or min(W.shape) < 2:
        raise ValueError(f"the ESD needs a 2-D matrix with both sides >= 2, got shape {tuple(W.shape)}")
    if not bool(torch.isfinite(W).all()):
        raise ValueError("the weight matrix has non-finite entries")
    return np.sort(torch.linalg.svdvals(W).double().numpy() ** 2)


def _candidates(lam: np.ndarray, xmin: str, bins: int, lower: str) -> np.ndarray:
    """Indices i (into the ascending spectrum) of the x_min candidates of one rule."""
    N = len(lam)
    if xmin == "min":
        return np.array([0])
    if xmin == "mid":
        return np.array([N // 2])
    if xmin == "all":
        return np.arange(N - 1)
    # "peak": the fullest bin of the log10 histogram
    logs = np.log10(lam)
    counts, edges = np.histogram(logs, bins=bins, range=(logs.min(), logs.max()))
    x_peak = 10.0 ** edges[int(np.argmax(counts))]
    lo = np.log10(0.95 * x_peak) if lower == "repo" else 0.95 * x_peak
    idx = np.arange(N - 1)
    return idx[(lam[:-1] >= lo) & (lam[:-1] <= 1.5 * x_peak)]


def fit_alpha(eigs, xmin: str = "peak", *, bins: int = 100, lower: str = "repo",
              min_tail: int = 2) -> PowerLawFit:
    """Fit the power-law tail of a spectrum (see the module docstring for the rules).

    ``eigs``: 1-D positive eigenvalues (any order). ``xmin``: one of :data:`XMIN_RULES`.
    ``lower``: ``"repo"`` or ``"stated"`` (only for ``"peak"``). Candidates whose tail holds fewer
    than ``min_tail`` eigenvalues, or whose estimate is not above 1, are skipped (the code this
    follows gives them D = 1). Raises ``ValueError`` when no candidate is left.
    """
    if xmin not in XMIN_RULES:
        raise ValueError(f"unknown xmin rule {xmin!r}; use one of {', '.join(XMIN_RULES)}")
    if lower not in ("repo", "stated"):
        raise ValueError(f"lower must be 'repo' or 'stated', got {lower!r}")
    if isinstance(bins, bool) or not isinstance(bins, (int, np.integer)) or bins < 2:
        raise ValueError(f"bins must be an int >= 2, got {bins!r}")
    lam = np.sort(np.asarray(eigs, dtype=np.float64).ravel())
    if len(lam) < 3:
        raise ValueError(f"a tail fit needs at least 3 eigenvalues, got {len(lam)}")
    if not np.all(np.isfinite(lam)) or lam[0] <= 0:
        raise ValueError("eigenvalues must be positive and finite (drop the zeros of a rank-deficient "
                         "matrix before fitting)")
    N = len(lam)
    log_lam = np.log(lam)
    tail_log_sum = np.cumsum(log_lam[::-1])[::-1]          # sum_{j >= i} ln lambda_j
    best = None
    for i in _candidates(lam, xmin, int(bins), lower):
        n = N - i
        if n < min_tail:
            continue
        denom = tail_log_sum[i] - n * log_lam[i]
        if not denom > 0:
            continue
        a = 1.0 + n / denom
        cdf = 1.0 - (lam[i:] / lam[i]) ** (1.0 - a)
        d = float(np.max(np.abs(cdf - np.arange(n) / n)))
        if best is None or d < best.ks:                   # first minimum wins, as argmin does
            best = PowerLawFit(alpha=float(a), xmin=float(lam[i]), ks=d, n_tail=int(n), n=N)
    if best is None:
        raise ValueError(f"no x_min candidate of rule {xmin!r} leaves a fittable tail")
    return best


def fit_alpha_powerlaw(eigs, alpha_max: float = 20.0) -> PowerLawFit:
    """The same fit by the ``powerlaw`` package (Alstott et al.): continuous maximum likelihood with
    x_min chosen by the KS distance over all candidates. Its default range for alpha is (1, 3]; we
    widen it to (1, ``alpha_max``) so that light tails are not clipped at 3."""
    try:
        import powerlaw
    except ImportError as e:  # pragma: no cover - optional cross-check
        raise RuntimeError("the cross-check needs the `powerlaw` package (pip install powerlaw)") from e
    lam = np.sort(np.asarray(eigs, dtype=np.float64).ravel())
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = powerlaw.Fit(lam, verbose=False, parameter_ranges={"alpha": (1.0, float(alpha_max))})
    n_tail = int(np.sum(lam >= fit.xmin))
    return PowerLawFit(alpha=float(fit.alpha), xmin=float(fit.xmin), ks=float(fit.D),
                       n_tail=n_tail, n=len(lam))


def planted_spectrum(n: int, a: float, rng: np.random.Generator, *, tail_fraction: float = 0.5,
                     bulk_decades: float = 1.0) -> np.ndarray:
    """``n`` eigenvalues, ascending: ``round(tail_fraction * n)`` from the Pareto density
    ``(a - 1) x^-a`` on [1, inf), the rest log-uniform on [10^-bulk_decades, 1)."""
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 3:
        raise ValueError(f"n must be an int >= 3, got {n!r}")
    if not a > 1:
        raise ValueError(f"the density exponent a must be > 1 (normalisable), got {a!r}")
    if not 0 < tail_fraction <= 1:
        raise ValueError(f"tail_fraction must be in (0, 1], got {tail_fraction!r}")
    if not bulk_decades > 0:
        raise ValueError(f"bulk_decades must be positive, got {bulk_decades!r}")
    n_tail = max(2, int(round(tail_fraction * n)))
    tail = (1.0 - rng.random(n_tail)) ** (-1.0 / (a - 1.0))      # U in (0, 1]
    bulk = 10.0 ** (-bulk_decades * (1.0 - rng.random(n - n_tail)))
    return np.sort(np.concatenate([bulk, np.minimum(tail, 1e300)]))


def planted_matrix(rows: int, cols: int, a: float, rng: np.random.Generator, **kw) -> np.ndarray:
    r"""A ``rows x cols`` matrix :math:`W = U \operatorname{diag}(\sqrt\lambda) V^\top` whose ESD is
    a :func:`planted_spectrum` (``min(rows, cols)`` eigenvalues, keyword options passed on), with
    Haar-random orthonormal :math:`U, V` (QR of Gaussian matrices, signs fixed)."""
    for name, v in (("rows", rows), ("cols", cols)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 3:
            raise ValueError(f"{name} must be an int >= 3, got {v!r}")
    k = min(rows, cols)
    lam = planted_spectrum(k, a, rng, **kw)

    def haar(m):
        q, r = np.linalg.qr(rng.standard_normal((m, k)))
        return q * np.sign(np.diag(r))

    return (haar(rows) * np.sqrt(lam)) @ haar(cols).T
