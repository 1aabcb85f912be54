r"""The Gauss–Newton matrix of a deep linear network in closed form, and bounds on its condition number.

**The network.** :math:`f(x) = A_L\cdots A_1 x` with :math:`A_l\in\mathbb R^{m_l\times m_{l-1}}`,
:math:`m_0 = d` inputs and :math:`m_L = K` outputs. Each :math:`A_l` is an affine function of its
parameter matrix with derivative :math:`c_l`: :math:`A_l = W_l` (a plain layer, :math:`c_l = 1`) or
:math:`A_l = I + \beta W_l` (a residual layer, :math:`c_l = \beta`). Write
:math:`P_l = A_{l-1}\cdots A_1` (:math:`m_{l-1}\times d`) and :math:`S_l = A_L\cdots A_{l+1}`
(:math:`K\times m_l`), empty products being identities.

**The Jacobian.** With column-major :math:`\operatorname{vec}`, :math:`\operatorname{vec}(ABC) =
(C^\top\otimes A)\operatorname{vec}(B)`, so

.. math:: J_i = \frac{\partial f(x_i)}{\partial\theta} = (x_i^\top\otimes I_K)\,F, \qquad
          F = \big[\,c_1 P_1^\top\otimes S_1,\;\dots,\;c_L P_L^\top\otimes S_L\,\big]\in\mathbb R^{dK\times p}.

**The GN matrix** of the squared error is therefore

.. math:: G = \frac1n\sum_i J_i^\top J_i = F^\top(\Sigma\otimes I_K)F, \qquad
          \Sigma = \frac1n\sum_i x_i x_i^\top ,

with :math:`\Sigma` the **uncentred** second moment of the inputs (not their covariance: with
inputs of nonzero mean the two differ, and only the second moment is right). :math:`G` is
:math:`p\times p` but has rank at most :math:`dK`; its nonzero eigenvalues are those of the
:math:`dK\times dK` matrix

.. math:: M = (\Sigma^{1/2}\otimes I_K)\,FF^\top\,(\Sigma^{1/2}\otimes I_K), \qquad
          FF^\top = \sum_{l=1}^L c_l^2\,(P_l^\top P_l)\otimes(S_l S_l^\top),

which is cheap however wide the network. :func:`linear_gn_eigenvalues` computes them from a
square root of :math:`M` rather than from :math:`M` itself: with the triangular factors
:math:`P_l^\top P_l = R_l^\top R_l` and :math:`S_lS_l^\top = T_lT_l^\top` (QR decompositions),
:math:`M = BB^\top` with :math:`B = (\Sigma^{1/2}\otimes I_K)[c_lR_l^\top\otimes T_l]_l`, and the
eigenvalues are the squared singular values of :math:`B` (:func:`gn_factor`). Singular values are
accurate to about :math:`10^{-16}` of the largest, so eigenvalues are resolved down to about
:math:`10^{-30}\lambda_{\max}`; an eigenvalue solver on :math:`M` stops near :math:`10^{-16}\lambda_{\max}`,
which deep square networks reach.

**Bounds** (:func:`linear_gn_bounds`). :math:`\lambda_{\max}(M)\le\lambda_{\max}(\Sigma)\lambda_{\max}(FF^\top)`
and :math:`\lambda_{\min}(M)\ge\lambda_{\min}(\Sigma)\lambda_{\min}(FF^\top)`, so
:math:`\kappa(G)\le\kappa(\Sigma)\,\kappa(FF^\top)` (``bound_ff``). Weyl's inequalities on the sum of
positive semi-definite Kronecker terms, whose extreme eigenvalues are products of the factors', give

.. math:: \kappa(G)\;\le\;\kappa(\Sigma)\,\frac{\sum_l s^{\max}_l}{\sum_l s^{\min}_l}
          = \kappa(\Sigma)\sum_l\gamma_l\,\kappa_l\;\le\;\kappa(\Sigma)\max_l\kappa_l ,

with :math:`s^{\max}_l = c_l^2\lambda_{\max}(P_l^\top P_l)\lambda_{\max}(S_lS_l^\top)`,
:math:`s^{\min}_l = c_l^2\lambda_{\min}(P_l^\top P_l)\lambda_{\min}(S_lS_l^\top)` (of the
:math:`d\times d` and :math:`K\times K` Grams: zero when a layer is narrower than :math:`d` or
:math:`K`), :math:`\kappa_l = s^{\max}_l/s^{\min}_l` and weights :math:`\gamma_l\propto s^{\min}_l`.
The middle form (``bound_cvx``) is a *convex combination* of the layers' condition numbers, the
right one (``bound_loose``) their maximum. Bounding each partial product by its factors,
:math:`\kappa_l\le\prod_{j\ne l}\kappa(A_j)^2`, gives the still looser ``bound_layers``
:math:`=\kappa(\Sigma)\max_l\prod_{j\ne l}\kappa(A_j)^2` (valid when every partial product keeps
full rank on the side its Gram is taken, as in networks whose hidden widths are all at least
:math:`\max(d, K)` and constant). The derivation is ours, written to match the structure
Zhao, Singh & Lucchi (NeurIPS 2024) describe (Weyl's inequalities, a convex combination of condition
numbers); their constants may be written differently.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..linalg.spectrum import condition_number, numerical_rank

__all__ = ["second_moment", "check_chain", "prefixes_suffixes", "jacobian_factor", "ff_matrix",
           "gn_core", "gn_factor", "linear_gn_matrix", "linear_gn_eigenvalues", "LinearGNBounds",
           "linear_gn_bounds", "CLOSED_FORM_RTOL"]

#: An eigenvalue of the closed form below this fraction of the largest counts as zero. The
#: eigenvalues are squared singular values accurate to ~1e-16 of the largest singular value, so
#: true zeros land near 1e-32 and nonzero eigenvalues are resolved far above 1e-24.
CLOSED_FORM_RTOL = 1e-24


def second_moment(x: np.ndarray) -> np.ndarray:
    """:math:`\\Sigma = \\tfrac1n X^\\top X`, the uncentred second moment of the rows of ``x``."""
    x = np.asarray(x, dtype=np.float64)
    if x.ndim != 2 or x.shape[0] == 0:
        raise ValueError(f"x must have shape (n, d) with n >= 1, got {x.shape}")
    return x.T @ x / x.shape[0]


def check_chain(mats, scales=None) -> tuple[list[np.ndarray], np.ndarray]:
    """The matrices :math:`A_1,\\dots,A_L` as float64 arrays with chained shapes, and the scales."""
    if isinstance(mats, np.ndarray) or not hasattr(mats, "__len__") or len(mats) == 0:
        raise TypeError("mats must be a non-empty list of 2-d arrays A_1, ..., A_L (input first)")
    out = []
    for i, a in enumerate(mats):
        if hasattr(a, "detach"):
            a = a.detach().cpu().numpy()
        a = np.asarray(a, dtype=np.float64)
        if a.ndim != 2:
            raise ValueError(f"A_{i + 1} must be a 2-d matrix, got shape {a.shape}")
        if not np.all(np.isfinite(a)):
            raise ValueError(f"A_{i + 1} has non-finite entries (a diverged training run?)")
        if out and a.shape[1] != out[-1].shape[0]:
            raise ValueError(f"A_{i + 1} has {a.shape[1]} columns but A_{i} has {out[-1].shape[0]} "
                             "rows: the shapes do not chain")
        out.append(a)
    c = np.ones(len(out)) if scales is None else np.asarray(scales, dtype=np.float64)
    if c.shape != (len(out),):
        raise ValueError(f"scales must have one entry per layer ({len(out)}), got shape {c.shape}")
    return out, c


def _check_sigma(sigma, d: int) -> np.ndarray:
    s = np.asarray(sigma, dtype=np.float64)
    if s.shape != (d, d):
        raise ValueError(f"sigma must be the ({d}, {d}) second moment of the inputs, got {s.shape}")
    if not np.allclose(s, s.T, rtol=1e-10, atol=1e-12 * max(1.0, np.abs(s).max())):
        raise ValueError("sigma must be symmetric")
    return (s + s.T) / 2


def prefixes_suffixes(mats) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """:math:`P_l = A_{l-1}\\cdots A_1` and :math:`S_l = A_L\\cdots A_{l+1}` for every layer l."""
    mats, _ = check_chain(mats)
    d, k = mats[0].shape[1], mats[-1].shape[0]
    pre, p = [], np.eye(d)
    for a in mats:
        pre.append(p)
        p = a @ p
    suf, s = [], np.eye(k)
    for a in reversed(mats):
        suf.append(s)
        s = s @ a
    return pre, suf[::-1]


def jacobian_factor(mats, scales=None) -> np.ndarray:
    """:math:`F = [c_l P_l^\\top\\otimes S_l]_l` (dK × p), columns in column-major vec order of each
    :math:`W_l`: :math:`J_i = (x_i^\\top\\otimes I_K) F`."""
    mats, c = check_chain(mats, scales)
    pre, suf = prefixes_suffixes(mats)
    return np.concatenate([cl * np.kron(p.T, s) for cl, p, s in zip(c, pre, suf)], axis=1)


def ff_matrix(mats, scales=None) -> np.ndarray:
    """:math:`FF^\\top = \\sum_l c_l^2 (P_l^\\top P_l)\\otimes(S_lS_l^\\top)` (dK × dK), never forming F."""
    mats, c = check_chain(mats, scales)
    pre, suf = prefixes_suffixes(mats)
    return sum(cl ** 2 * np.kron(p.T @ p, s @ s.T) for cl, p, s in zip(c, pre, suf))


def _sqrt_psd(s: np.ndarray) -> np.ndarray:
    w, v = np.linalg.eigh(s)
    return (v * np.sqrt(np.clip(w, 0, None))) @ v.T


def gn_core(mats, sigma, scales=None) -> np.ndarray:
    """:math:`M = (\\Sigma^{1/2}\\otimes I_K)FF^\\top(\\Sigma^{1/2}\\otimes I_K)`: the dK × dK matrix
    whose eigenvalues are the nonzero eigenvalues of the GN matrix (and zeros if it is singular)."""
    mats, c = check_chain(mats, scales)
    d, k = mats[0].shape[1], mats[-1].shape[0]
    root = np.kron(_sqrt_psd(_check_sigma(sigma, d)), np.eye(k))
    m = root @ ff_matrix(mats, c) @ root
    return (m + m.T) / 2


def _triangular(a: np.ndarray, side: str) -> np.ndarray:
    """R with :math:`R^\\top R = a^\\top a` (``side="cols"``), or T with :math:`TT^\\top = aa^\\top`
    (``side="rows"``), from a reduced QR decomposition (R has min(rows, cols) rows)."""
    if side == "cols":
        return np.linalg.qr(a, mode="r")
    return np.linalg.qr(a.T, mode="r").T


def gn_factor(mats, sigma=None, scales=None) -> np.ndarray:
    """:math:`B = (\\Sigma^{1/2}\\otimes I_K)[c_l R_l^\\top\\otimes T_l]_l` with :math:`BB^\\top = M`
    (:func:`gn_core`); without ``sigma``, :math:`BB^\\top = FF^\\top`."""
    mats, c = check_chain(mats, scales)
    d, k = mats[0].shape[1], mats[-1].shape[0]
    pre, suf = prefixes_suffixes(mats)
    b = np.concatenate([cl * np.kron(_triangular(p, "cols").T, _triangular(s, "rows"))
                        for cl, p, s in zip(c, pre, suf)], axis=1)
    if sigma is not None:
        b = np.kron(_sqrt_psd(_check_sigma(sigma, d)), np.eye(k)) @ b
    return b


def _squared_singular_values(b: np.ndarray) -> np.ndarray:
    sv = np.linalg.svd(b, compute_uv=False)
    out = np.zeros(b.shape[0])
    out[:sv.size] = sv ** 2
    return out          # decreasing; zeros where B has fewer columns than rows


def linear_gn_matrix(mats, sigma, scales=None) -> np.ndarray:
    """The full p × p GN matrix :math:`F^\\top(\\Sigma\\otimes I_K)F` (small networks only)."""
    mats, c = check_chain(mats, scales)
    d, k = mats[0].shape[1], mats[-1].shape[0]
    f = jacobian_factor(mats, c)
    return f.T @ np.kron(_check_sigma(sigma, d), np.eye(k)) @ f


#: Below this ratio of smallest to largest eigenvalue, an eigenvalue solver on the formed matrix
#: is no longer accurate to ~1e-8 (its absolute error is ~1e-16 of the largest eigenvalue), and
#: the spectrum is recomputed from the square-root factor.
_EIGH_SAFE = 1e-8


def _spectrum(mats, sigma, scales) -> np.ndarray:
    """Eigenvalues of :math:`M` (or of :math:`FF^\\top` when ``sigma`` is None), decreasing: an
    eigenvalue solver on the formed dK × dK matrix when it is well conditioned (fast), else
    squared singular values of the square-root factor (accurate to ~1e-30 of the largest)."""
    m = gn_core(mats, sigma, scales) if sigma is not None else ff_matrix(mats, scales)
    ev = np.linalg.eigvalsh((m + m.T) / 2)[::-1]
    if ev[-1] > _EIGH_SAFE * ev[0]:
        return ev
    return _squared_singular_values(gn_factor(mats, sigma, scales))


def linear_gn_eigenvalues(mats, sigma, scales=None) -> np.ndarray:
    """The dK eigenvalues of :func:`gn_core`, in decreasing order: the GN matrix's nonzero
    spectrum (plus zeros where it has rank below dK). Well-conditioned cases use an eigenvalue
    solver on :func:`gn_core`; ill-conditioned ones the singular values of :func:`gn_factor`."""
    mats, c = check_chain(mats, scales)
    return _spectrum(mats, _check_sigma(sigma, mats[0].shape[1]), c)


@dataclass(frozen=True)
class LinearGNBounds:
    """The exact condition number of a deep linear network's GN matrix and the bounds on it."""

    kappa: float                # lambda_max / smallest nonzero eigenvalue of G
    rank: int                   # numerical rank of G (dK when every term can be full rank)
    kappa_sigma: float          # kappa of the inputs' second moment
    kappa_ff: float             # kappa of FF^T (inf if singular)
    s_max: np.ndarray           # per layer: c_l^2 lambda_max(P^T P) lambda_max(S S^T)
    s_min: np.ndarray           # per layer: c_l^2 lambda_min(P^T P) lambda_min(S S^T)
    bound_ff: float             # kappa(Sigma) kappa(FF^T)
    bound_cvx: float            # kappa(Sigma) sum s_max / sum s_min  (the convex combination)
    bound_loose: float          # kappa(Sigma) max_l s_max / s_min    (the max form)
    bound_layers: float         # kappa(Sigma) max_l prod_{j != l} kappa(A_j)^2 (nan unless asked)

    @property
    def layer_kappas(self) -> np.ndarray:
        """:math:`\\kappa_l = s^{\\max}_l/s^{\\min}_l` (inf where :math:`s^{\\min}_l = 0`)."""
        with np.errstate(divide="ignore"):
            return np.where(self.s_min > 0, self.s_max / np.where(self.s_min > 0, self.s_min, 1.0),
                            np.inf)

    @property
    def weights(self) -> np.ndarray:
        """:math:`\\gamma_l = s^{\\min}_l/\\sum_j s^{\\min}_j`, the convex-combination weights."""
        total = self.s_min.sum()
        return self.s_min / total if total > 0 else np.full_like(self.s_min, np.nan)


def _gram_extremes(a: np.ndarray, side: str) -> tuple[float, float]:
    """Largest and smallest eigenvalue of the Gram :math:`a^\\top a` (``side="cols"``) or
    :math:`aa^\\top` (``side="rows"``), from the singular values of ``a``: exact zero when ``a`` has
    fewer rows (columns) than the Gram's size, and accurate far below the float64 resolution of the
    Gram itself (a tiny :math:`\\sigma_{\\min}^2` is resolved where :math:`\\lambda_{\\min}` of the formed
    Gram would be rounding noise)."""
    sv = np.linalg.svd(a, compute_uv=False)
    size = a.shape[1] if side == "cols" else a.shape[0]
    top = float(sv[0]) ** 2 if sv.size else 0.0
    low = float(sv[-1]) ** 2 if sv.size == size else 0.0
    return top, low


def _kappa_rect(a: np.ndarray) -> float:
    """:math:`\\sigma_{\\max}/\\sigma_{\\min}` over the min(rows, cols) singular values of a matrix."""
    sv = np.linalg.svd(a, compute_uv=False)
    return float(sv[0] / sv[-1]) if sv[-1] > 0 else np.inf


def linear_gn_bounds(mats, sigma, scales=None, *, rtol: float = CLOSED_FORM_RTOL,
                     layerwise: bool = False) -> LinearGNBounds:
    """:math:`\\kappa(G)` from the closed form, and the bounds ``bound_ff <= bound_cvx <= bound_loose``.

    An eigenvalue of G below ``rtol`` times the largest counts as zero
    (:mod:`reprobook.linalg.spectrum`; the default :data:`CLOSED_FORM_RTOL` suits the accuracy of
    :func:`linear_gn_eigenvalues`). The Grams' extreme eigenvalues in :math:`s^{\\min}_l`,
    :math:`s^{\\max}_l` come from singular values (exactly zero when a layer is too narrow).
    ``layerwise=True`` also computes ``bound_layers`` (one SVD per layer; NaN otherwise).
    """
    mats, c = check_chain(mats, scales)
    d = mats[0].shape[1]
    sig = _check_sigma(sigma, d)
    ev = linear_gn_eigenvalues(mats, sig, c)
    pre, suf = prefixes_suffixes(mats)
    s_max, s_min = [], []
    for cl, p, s in zip(c, pre, suf):
        pmax, pmin = _gram_extremes(p, "cols")     # P^T P, d x d
        smax, smin = _gram_extremes(s, "rows")     # S S^T, K x K
        s_max.append(cl ** 2 * pmax * smax)
        s_min.append(cl ** 2 * pmin * smin)
    s_max, s_min = np.array(s_max), np.array(s_min)
    sig_ev = np.linalg.eigvalsh(sig)
    # Sigma comes from data: an eigenvalue solver resolves it to ~1e-16 of the largest
    k_sigma = float(sig_ev[-1] / sig_ev[0]) if sig_ev[0] > 1e-12 * sig_ev[-1] else np.inf
    ff_ev = _spectrum(mats, None, c)
    k_ff = float(ff_ev[0] / ff_ev[-1]) if ff_ev[-1] > rtol * ff_ev[0] else np.inf
    layers = np.nan
    if layerwise:
        layer_k = np.array([_kappa_rect(a) for a in mats])
        layers = k_sigma * max(float(np.prod(np.delete(layer_k, l)) ** 2) for l in range(len(mats)))
    cvx = k_sigma * s_max.sum() / s_min.sum() if s_min.sum() > 0 else np.inf
    loose = k_sigma * float(np.max(s_max / s_min)) if np.all(s_min > 0) else np.inf
    return LinearGNBounds(kappa=condition_number(ev, rtol), rank=numerical_rank(ev, rtol),
                          kappa_sigma=k_sigma, kappa_ff=k_ff, s_max=s_max, s_min=s_min,
                          bound_ff=k_sigma * k_ff, bound_cvx=float(cvx), bound_loose=float(loose),
                          bound_layers=layers)
