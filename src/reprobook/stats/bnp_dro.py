"""The Dirichlet-process smooth-ambiguity criterion for robust learning (Bariletto & Ho, NeurIPS 2024).

**Criterion.** Data :math:`\\xi_1, \\dots, \\xi_n`, a loss :math:`h(\\theta, \\xi)`, a base measure
:math:`p_0` and a concentration :math:`\\alpha > 0`. The Dirichlet-process posterior is
:math:`\\mathrm{DP}(\\alpha + n, G_n)` with
:math:`G_n = (\\alpha p_0 + \\sum_i \\delta_{\\xi_i}) / (\\alpha + n)`. With the second-order utility
:math:`\\phi_\\beta(t) = \\beta (e^{t/\\beta} - 1)` (convex, increasing; :math:`\\beta = \\infty` is
:math:`\\phi(t) = t`, ambiguity neutrality) the criterion is

.. math:: V_\\beta(\\theta) = \\mathbb E_{P \\sim \\mathrm{DP}(\\alpha+n, G_n)}
          \\big[\\phi_\\beta\\big(\\mathbb E_{\\xi \\sim P}\\, h(\\theta, \\xi)\\big)\\big],

reported on the loss scale as :math:`\\phi_\\beta^{-1}(V_\\beta)`. Smaller :math:`\\beta` penalises
parameters whose risk varies across plausible distributions :math:`P`; to second order,
:math:`\\phi_\\beta^{-1}(V_\\beta) \\approx \\mathbb E_{G_n} h + \\operatorname{Var}_P(\\mathbb E_P h)/(2\\beta)`
with :math:`\\operatorname{Var}_P(\\mathbb E_P h) = \\operatorname{Var}_{G_n}(h)/(\\alpha + n + 1)`.

**Neutral identities.** For :math:`\\beta = \\infty` the posterior mean of :math:`P` is :math:`G_n`, so
:math:`V_\\infty(\\theta) = (\\alpha\\, \\mathbb E_{p_0} h + \\sum_i h(\\theta, \\xi_i)) / (\\alpha + n)`:

* squared loss :math:`h = (y - x^\\top\\theta)^2` with :math:`p_0 = N(0, I)` on :math:`(y, x)`:
  :math:`\\mathbb E_{p_0} h = 1 + \\lVert\\theta\\rVert_2^2`, so the minimiser is **Ridge** with penalty
  :math:`\\alpha`: :math:`(X^\\top X + \\alpha I)^{-1} X^\\top y`;
* absolute loss :math:`h = |y - x^\\top\\theta|` with :math:`p_0` uniform on the :math:`2d` points
  :math:`(0, \\pm c\\, e_j)`: :math:`\\mathbb E_{p_0} h = c \\lVert\\theta\\rVert_1 / d`, so the minimiser
  is the **LAD-LASSO** with penalty :math:`\\alpha c / d` (this base measure is our choice).

**Monte Carlo approximation** (as in the authors' code): ``n_mc`` draws of ``T + 1`` weights and
atoms. Weights: truncated stick-breaking with Beta(1, :math:`\\alpha + n`) sticks (the remainder on
the last atom) or Dirichlet-multinomial, a symmetric Dirichlet with parameter
:math:`(\\alpha + n)/(T + 1)`. Atoms: i.i.d. from :math:`G_n` (a base draw with probability
:math:`\\alpha/(\\alpha+n)`, else a uniformly chosen data point). Then
:math:`\\hat V(\\theta) = \\frac{1}{n_{mc}} \\sum_m \\phi_\\beta(\\sum_j w_{mj} h(\\theta, \\xi_{mj}))`.
The authors multiply the loss by ``scale = 1e-3`` inside :math:`\\phi`; :math:`\\beta` then acts on
the scaled loss, i.e. like :math:`\\beta / \\text{scale}` on the raw loss.

**Optimisers.** :func:`sgd_paper` is the authors' stochastic gradient scheme (one Monte Carlo draw
per step, draws visited without replacement in each pass, step :math:`\\eta_0 / (100 + \\sqrt t)`),
batched over independent problems. :func:`minimize_mc_squared` minimises the same Monte Carlo
criterion to convergence (Newton's method; the criterion is convex for convex losses).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..threads import single_threaded_blas

__all__ = ["phi", "phi_inv", "phi_prime", "MCSample", "draw_mc", "gaussian_base",
           "augment", "mc_losses", "mc_criterion", "minimize_mc_squared", "sgd_paper", "ridge",
           "neutral_criterion_squared", "sigma_points", "weighted_lstsq",
           "neutral_minimizer_squared", "lad_base", "lad_lasso", "neutral_criterion_absolute",
           "weighted_lad", "minimize_neutral_absolute", "dp_risk_variance", "sparse_regression",
           "weighted_risks", "gaussian_base_squared_losses", "truncation_variance_factor",
           "gd_least_squares"]


# ----------------------------------------------------------------------------- utility phi
def _check_beta(beta):
    beta = float(beta)
    if not beta > 0:
        raise ValueError(f"beta must be > 0 (use numpy.inf for ambiguity neutrality), got {beta!r}")
    return beta


def phi(t, beta):
    """:math:`\\beta(e^{t/\\beta} - 1)`; the identity when ``beta`` is infinite."""
    beta = _check_beta(beta)
    t = np.asarray(t, dtype=np.float64)
    return t.copy() if np.isinf(beta) else beta * np.expm1(np.minimum(t / beta, 700.0))


def phi_inv(v, beta):
    """Inverse of :func:`phi`: :math:`\\beta \\log(1 + v/\\beta)`."""
    beta = _check_beta(beta)
    v = np.asarray(v, dtype=np.float64)
    return v.copy() if np.isinf(beta) else beta * np.log1p(v / beta)


def phi_prime(t, beta):
    """Derivative of :func:`phi`: :math:`e^{t/\\beta}` (1 when ``beta`` is infinite)."""
    beta = _check_beta(beta)
    t = np.asarray(t, dtype=np.float64)
    return np.ones_like(t) if np.isinf(beta) else np.exp(np.minimum(t / beta, 700.0))


# ----------------------------------------------------------------------------- Monte Carlo draws
@dataclass
class MCSample:
    """Weights ``w`` (n_mc x K) and atom indices ``idx`` (n_mc x K) of a Monte Carlo approximation
    of the DP posterior. ``idx < n`` points at a data row; ``idx = n + b`` at the b-th base draw
    (``n_base`` of them, drawn by the caller in that order)."""

    w: np.ndarray
    idx: np.ndarray
    n: int
    n_base: int


def _positive_int(name, v):
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
        raise ValueError(f"{name} must be a positive int, got {v!r}")
    return int(v)


def draw_mc(n: int, alpha: float, n_mc: int, T: int, rng: np.random.Generator,
            kind: str = "dirichlet_multinomial") -> MCSample:
    """Draw the weights and atom indices of :math:`n_{mc}` truncated DP-posterior samples."""
    n, n_mc, T = _positive_int("n", n), _positive_int("n_mc", n_mc), _positive_int("T", T)
    if not np.isfinite(alpha) or alpha <= 0:
        raise ValueError(f"alpha (DP concentration) must be a finite number > 0, got {alpha!r}")
    if not isinstance(rng, np.random.Generator):
        raise TypeError("rng must be a numpy Generator (use reprobook.rng(seed, stream))")
    conc = alpha + n
    K = T + 1
    if kind == "stick_breaking":
        v = rng.beta(1.0, conc, size=(n_mc, T))
        # w_j = v_j prod_{l<j} (1 - v_l); the remainder goes to the last atom
        left = np.cumprod(np.concatenate([np.ones((n_mc, 1)), 1.0 - v], axis=1), axis=1)
        w = np.concatenate([v * left[:, :-1], left[:, -1:]], axis=1)
    elif kind == "dirichlet_multinomial":
        g = rng.gamma(conc / K, 1.0, size=(n_mc, K))
        w = g / g.sum(1, keepdims=True)
    else:
        raise ValueError(f"kind must be 'stick_breaking' or 'dirichlet_multinomial', got {kind!r}")
    from_base = rng.random((n_mc, K)) < alpha / conc
    idx = rng.integers(0, n, size=(n_mc, K))
    n_base = int(from_base.sum())
    idx[from_base] = n + np.arange(n_base)
    return MCSample(w=w, idx=idx, n=n, n_base=n_base)


def gaussian_base(n_base: int, dim: int, rng: np.random.Generator) -> np.ndarray:
    """``n_base`` draws of :math:`p_0 = N(0, I_{dim})` over the whole data vector (y, x)."""
    return rng.normal(size=(n_base, dim))


def augment(Z, sample: MCSample, base: np.ndarray) -> np.ndarray:
    """Data rows ``Z`` (n x (1+d), first column y) followed by the sample's base draws."""
    Z = np.asarray(Z, dtype=np.float64)
    if Z.shape[0] != sample.n:
        raise ValueError(f"Z has {Z.shape[0]} rows but the sample was drawn for n = {sample.n}")
    base = np.asarray(base, dtype=np.float64).reshape(-1, Z.shape[1])
    if base.shape[0] != sample.n_base:
        raise ValueError(f"need {sample.n_base} base draws, got {base.shape[0]}")
    return np.concatenate([Z, base], axis=0)


# ----------------------------------------------------------------------------- criterion
_LOSSES = ("squared", "absolute", "logistic")


def _residual_loss(loss, y, xt):
    if loss == "squared":
        return (y - xt) ** 2
    if loss == "absolute":
        return np.abs(y - xt)
    if loss == "logistic":       # y in {-1, +1}
        return np.logaddexp(0.0, -y * xt)
    raise ValueError(f"loss must be one of {_LOSSES}, got {loss!r}")


def mc_losses(theta, Zaug, sample: MCSample, loss: str = "squared", scale: float = 1.0):
    """Per-draw weighted risks :math:`L_m = \\text{scale} \\sum_j w_{mj} h(\\theta, \\xi_{mj})`."""
    A = Zaug[sample.idx]                                   # n_mc x K x (1+d)
    h = _residual_loss(loss, A[..., 0], A[..., 1:] @ np.asarray(theta, dtype=np.float64))
    return scale * (sample.w * h).sum(1)


def mc_criterion(theta, Zaug, sample: MCSample, beta, loss: str = "squared",
                 scale: float = 1.0) -> float:
    """:math:`\\phi_\\beta^{-1}\\big(\\frac1{n_{mc}}\\sum_m \\phi_\\beta(L_m)\\big)` (loss scale)."""
    return float(phi_inv(phi(mc_losses(theta, Zaug, sample, loss, scale), beta).mean(), beta))


@single_threaded_blas()
def minimize_mc_squared(Zaug, sample: MCSample, beta, scale: float = 1.0, theta0=None,
                        tol: float = 1e-12, max_iter: int = 100) -> np.ndarray:
    r"""Minimise the Monte Carlo criterion for the squared loss to convergence (damped Newton).

    With residuals :math:`r_{mj} = y_{mj} - x_{mj}^\top\theta` and
    :math:`L_m = s \sum_j w_{mj} r_{mj}^2`, we minimise the certainty equivalent
    :math:`\phi_\beta^{-1}(\frac1M\sum_m \phi_\beta(L_m)) = \beta \log \frac1M \sum_m e^{L_m/\beta}`,
    an increasing function of the criterion (so the same minimiser) that stays well scaled when
    :math:`L_m/\beta` is large, where Newton on :math:`\frac1M\sum_m\phi(L_m)` itself crawls. With
    :math:`\pi = \mathrm{softmax}(L/\beta)`, :math:`\nabla L_m = -2s\sum_j w_{mj} r_{mj} x_{mj}` and
    :math:`\bar g = \sum_m \pi_m \nabla L_m`, the gradient is :math:`\bar g` and the Hessian
    :math:`\sum_m \pi_m\, 2s \sum_j w_{mj} x_{mj} x_{mj}^\top + \frac1\beta(\sum_m \pi_m \nabla L_m
    \nabla L_m^\top - \bar g \bar g^\top)`. The problem is convex (a log-sum-exp of convex
    functions). Stops when the Newton decrement falls below ``tol`` (relative). With
    :math:`\beta = \infty` it is one weighted least-squares solve.
    """
    beta = _check_beta(beta)
    A = Zaug[sample.idx]
    y, X = A[..., 0], A[..., 1:]                           # M x K, M x K x d
    M, K, d = X.shape
    w = sample.w
    Xf = X.reshape(M * K, d)
    if np.isinf(beta):
        wf = w.reshape(-1)
        return np.linalg.solve(Xf.T @ (wf[:, None] * Xf), Xf.T @ (wf * y.reshape(-1)))
    theta = np.zeros(d) if theta0 is None else np.asarray(theta0, dtype=np.float64).copy()
    gram = np.einsum("mk,mkd,mke->mde", w, X, X, optimize=True)   # per-draw sum_j w x x^T, once

    def f(th):
        r = y - X @ th
        L = scale * (w * r * r).sum(1)
        z = L / beta
        zmax = z.max()
        return beta * (zmax + np.log(np.mean(np.exp(z - zmax)))), L, r

    val, L, r = f(theta)
    for _ in range(max_iter):
        z = L / beta
        pi = np.exp(z - z.max())
        pi /= pi.sum()
        gL = -2 * scale * np.einsum("mk,mkd->md", w * r, X)    # gradient of each L_m
        grad = pi @ gL
        H = 2 * scale * np.tensordot(pi, gram, axes=1) \
            + ((gL * pi[:, None]).T @ gL - np.outer(grad, grad)) / beta
        step = np.linalg.solve(H, grad)
        if 0.5 * float(grad @ step) <= tol * abs(val):
            break                                           # Newton decrement: converged
        t = 1.0
        while True:                                         # backtracking keeps it monotone
            new = theta - t * step
            nv, nL, nr = f(new)
            if nv <= val or t < 1e-10:
                break
            t *= 0.5
        if nv > val:                                        # no descent left at this precision
            break
        theta, val, L, r = new, nv, nL, nr
    return theta


@single_threaded_blas()
def sgd_paper(Zaugs, samples, beta, *, n_steps: int, step0: float, scale: float = 1e-3,
              rng: np.random.Generator, theta0=None, snapshots=()):
    """The authors' SGD for the squared loss, run on ``P`` independent problems in parallel.

    Problem ``p`` has augmented data ``Zaugs[p]`` and Monte Carlo sample ``samples[p]`` (all with
    the same ``n_mc``, ``K`` and dimension). Each pass visits every draw once in random order; the
    step is :math:`\\theta \\leftarrow \\theta - \\eta_t \\phi'(L_m) \\nabla L_m` with
    :math:`\\eta_t = \\text{step0} / (100 + \\sqrt t)`, for ``ceil(n_steps / n_mc)`` passes, as in the
    reference code. ``rng`` is one Generator for all problems, or a list of one per problem: then
    each problem's visiting order depends only on its own stream, so a problem gets the same run
    whatever it is batched with. Returns the final parameters (P x d) and, if ``snapshots`` lists
    step counts, also a dict {step: parameters after that many steps}.
    """
    beta = _check_beta(beta)
    P = len(Zaugs)
    if P == 0 or len(samples) != P:
        raise ValueError("Zaugs and samples must be non-empty lists of the same length")
    M, K = samples[0].w.shape
    d = Zaugs[0].shape[1] - 1
    rows = max(z.shape[0] for z in Zaugs)
    Z = np.zeros((P, rows, d + 1))
    for p, z in enumerate(Zaugs):
        Z[p, :z.shape[0]] = z
    W = np.stack([s.w for s in samples])                    # P x M x K
    I = np.stack([s.idx for s in samples])                  # P x M x K
    if isinstance(rng, (list, tuple)):
        if len(rng) != P or not all(isinstance(g, np.random.Generator) for g in rng):
            raise ValueError(f"rng must be a numpy Generator or a list of {P} of them (one per problem)")
    elif not isinstance(rng, np.random.Generator):
        raise TypeError("rng must be a numpy Generator or a list of them (use reprobook.rng)")
    theta = np.zeros((P, d)) if theta0 is None else np.array(theta0, dtype=np.float64)
    n_passes = int(np.ceil(n_steps / M))
    pr = np.arange(P)[:, None]
    snaps, want = {}, set(int(x) for x in snapshots)
    it = 1
    for _ in range(n_passes):
        if isinstance(rng, (list, tuple)):                  # one permutation per problem
            order = np.stack([np.argsort(g.random(M)) for g in rng])
        else:
            order = np.argsort(rng.random((P, M)), axis=1)
        for j in range(M):
            m = order[:, j]
            A = Z[pr, I[np.arange(P), m]]                   # P x K x (1+d)
            w = W[np.arange(P), m]                          # P x K
            r = A[..., 0] - np.einsum("pkd,pd->pk", A[..., 1:], theta)
            L = scale * (w * r * r).sum(1)
            g = -2 * scale * np.einsum("pk,pkd->pd", w * r, A[..., 1:])
            eta = step0 / (100.0 + np.sqrt(it))
            theta -= eta * phi_prime(L, beta)[:, None] * g
            if it in want:
                snaps[it] = theta.copy()
            it += 1
    return (theta, snaps) if want else theta


# ----------------------------------------------------------------------------- neutral identities
@single_threaded_blas()
def ridge(X, y, alpha: float) -> np.ndarray:
    """:math:`(X^\\top X + \\alpha I)^{-1} X^\\top y`."""
    X, y = np.asarray(X, dtype=np.float64), np.asarray(y, dtype=np.float64)
    return np.linalg.solve(X.T @ X + alpha * np.eye(X.shape[1]), X.T @ y)


def neutral_criterion_squared(theta, X, y, alpha: float) -> float:
    """Exact :math:`V_\\infty` for the squared loss and :math:`p_0 = N(0, I)` (closed form)."""
    theta = np.asarray(theta, dtype=np.float64)
    n = len(y)
    return float((alpha * (1 + theta @ theta) + np.sum((y - X @ theta) ** 2)) / (alpha + n))


def sigma_points(dim: int, radius: float | None = None) -> np.ndarray:
    """The ``2 dim`` points :math:`\\pm r e_k` (rows) that, with equal weights, represent
    :math:`N(0, I_{dim})`: with :math:`r = \\sqrt{dim}` (the default) they match its moments up to
    order three, so the expectation of any quadratic is exact."""
    dim = _positive_int("dim", dim)
    r = np.sqrt(dim) if radius is None else float(radius)
    return r * np.concatenate([np.eye(dim), -np.eye(dim)])


def weighted_lstsq(Z, weights) -> np.ndarray:
    """Minimise :math:`\\sum_i \\omega_i (z_{i0} - z_{i,1:}^\\top\\theta)^2` over rows ``Z``
    (first column the response) by a QR-based least-squares solve of the rows scaled by
    :math:`\\sqrt{\\omega_i}`."""
    Z, w = np.asarray(Z, dtype=np.float64), np.asarray(weights, dtype=np.float64)
    if w.shape != (Z.shape[0],) or np.any(w < 0):
        raise ValueError(f"weights must be {Z.shape[0]} non-negative numbers, got shape {w.shape}")
    sw = np.sqrt(w)[:, None]
    sol, *_ = np.linalg.lstsq(sw * Z[:, 1:], sw[:, 0] * Z[:, 0], rcond=None)
    return sol


def neutral_minimizer_squared(X, y, alpha: float) -> np.ndarray:
    """Minimise :math:`V_\\infty` *without* the closed form: represent :math:`p_0 = N(0, I_D)` by
    its :func:`sigma_points` (weight :math:`\\alpha/(2D)` each, the data weight 1) and solve the
    weighted least-squares problem on data plus sigma points (:func:`weighted_lstsq`)."""
    X, y = np.asarray(X, dtype=np.float64), np.asarray(y, dtype=np.float64)
    n, d = X.shape
    D = d + 1
    Z = np.concatenate([np.column_stack([y, X]), sigma_points(D)])   # rows (y, x)
    return weighted_lstsq(Z, np.concatenate([np.ones(n), np.full(2 * D, alpha / (2 * D))]))


def lad_base(d: int, c: float = 1.0) -> np.ndarray:
    """The 2d support points (y = 0, x = +-c e_j) of the LAD-LASSO base measure, as (y, x) rows."""
    x = c * np.concatenate([np.eye(d), -np.eye(d)])
    return np.column_stack([np.zeros(2 * d), x])


def neutral_criterion_absolute(theta, X, y, alpha: float, c: float = 1.0) -> float:
    """:math:`V_\\infty` for the absolute loss, with :math:`\\mathbb E_{p_0}` computed *by summing over
    the base measure's support* (no closed form used)."""
    theta = np.asarray(theta, dtype=np.float64)
    base = lad_base(X.shape[1], c)
    e_p0 = np.mean(np.abs(base[:, 0] - base[:, 1:] @ theta))
    return float((alpha * e_p0 + np.sum(np.abs(y - X @ theta))) / (alpha + len(y)))


def lad_lasso(theta, X, y, lam: float) -> float:
    """The LAD-LASSO objective :math:`\\sum_i |y_i - x_i^\\top\\theta| + \\lambda\\lVert\\theta\\rVert_1`."""
    theta = np.asarray(theta, dtype=np.float64)
    return float(np.sum(np.abs(y - X @ theta)) + lam * np.abs(theta).sum())


def dp_risk_variance(h_data, h_base_mean: float, h_base_sq_mean: float, alpha: float) -> float:
    """:math:`\\operatorname{Var}_{P}(\\mathbb E_P h) = \\operatorname{Var}_{G_n}(h) / (\\alpha+n+1)`
    under :math:`P \\sim \\mathrm{DP}(\\alpha + n, G_n)`, from the losses at the data and the first
    two moments of the loss under :math:`p_0`."""
    h = np.asarray(h_data, dtype=np.float64)
    n = h.size
    m1 = (alpha * h_base_mean + h.sum()) / (alpha + n)
    m2 = (alpha * h_base_sq_mean + (h * h).sum()) / (alpha + n)
    return float((m2 - m1 ** 2) / (alpha + n + 1))


def weighted_risks(h_data, sample: MCSample, h_base) -> np.ndarray:
    """Per-draw risks :math:`\\sum_j w_{mj} h_{mj}` from the losses at the data (``h_data``, n of
    them) and at the sample's base draws (``h_base``, ``sample.n_base`` of them, in draw order).

    Only the losses are needed, so a deep truncation costs no (n_mc x K x dim) array of atoms."""
    h_data = np.asarray(h_data, dtype=np.float64).reshape(-1)
    h_base = np.asarray(h_base, dtype=np.float64).reshape(-1)
    if h_data.size != sample.n:
        raise ValueError(f"need {sample.n} losses at the data, got {h_data.size}")
    if h_base.size != sample.n_base:
        raise ValueError(f"need {sample.n_base} losses at the base draws, got {h_base.size}")
    return (sample.w * np.concatenate([h_data, h_base])[sample.idx]).sum(1)


def gaussian_base_squared_losses(theta, n_base: int, rng: np.random.Generator):
    """Squared losses :math:`(y - x^\\top\\theta)^2` at ``n_base`` draws of :math:`p_0 = N(0, I)` on
    (y, x), drawn exactly without the atoms: :math:`y - x^\\top\\theta \\sim N(0, s)` with
    :math:`s = 1 + \\lVert\\theta\\rVert^2`, so the loss is :math:`s z^2`, :math:`z \\sim N(0, 1)`.
    Returns ``(losses, mean, second_moment)`` with the exact moments :math:`s` and :math:`3 s^2`."""
    theta = np.asarray(theta, dtype=np.float64)
    s = 1.0 + float(theta @ theta)
    n_base = int(n_base)
    if n_base < 0:
        raise ValueError(f"n_base must be >= 0, got {n_base}")
    return s * rng.standard_normal(n_base) ** 2, s, 3.0 * s * s


def truncation_variance_factor(alpha: float, n: int, T: int, kind: str) -> float:
    """:math:`\\operatorname{Var}(\\sum_j w_j h_j) / \\operatorname{Var}_P(\\mathbb E_P h)`: how much a
    truncated approximation with ``T + 1`` atoms drawn i.i.d. from :math:`G_n` inflates the
    variance of the risk over the exact DP posterior (concentration :math:`c = \\alpha + n`).

    With i.i.d. atoms the variance is :math:`\\operatorname{Var}_{G_n}(h)\\,\\mathbb E\\sum_j w_j^2`,
    against :math:`\\operatorname{Var}_{G_n}(h)/(c+1)` for the DP, so the factor is
    :math:`(c+1)\\,\\mathbb E\\sum_j w_j^2`:

    * Dirichlet-multinomial, :math:`w \\sim \\mathrm{Dir}(c/K, \\dots)` with :math:`K = T+1`:
      :math:`\\mathbb E\\sum w_j^2 = (c/K + 1)/(c + 1)`, factor :math:`1 + c/K`;
    * stick-breaking with ``T`` Beta(1, c) sticks and the remainder on the last atom: with
      :math:`\\rho = c/(c+2)`, :math:`\\mathbb E\\sum w_j^2 = (1 - \\rho^T)/(c+1) + \\rho^T`.
    """
    n, T = _positive_int("n", n), _positive_int("T", T)
    if not np.isfinite(alpha) or alpha <= 0:
        raise ValueError(f"alpha must be a finite number > 0, got {alpha!r}")
    c = alpha + n
    if kind == "dirichlet_multinomial":
        return 1.0 + c / (T + 1)
    if kind == "stick_breaking":
        rho_T = (c / (c + 2.0)) ** T
        return (1.0 - rho_T) + (c + 1.0) * rho_T
    raise ValueError(f"kind must be 'stick_breaking' or 'dirichlet_multinomial', got {kind!r}")


@single_threaded_blas()
def gd_least_squares(Xs, ys, *, n_steps: int, step0: float, scale: float = 1e-3, snapshots=()):
    """Early-stopped least squares with the authors' schedule: full-batch gradient descent on the
    empirical mean squared loss, :math:`\\theta \\leftarrow \\theta + \\varepsilon_t X^\\top (y - X\\theta)`
    with :math:`\\varepsilon_t = \\eta_t\\,\\text{scale}\\,2/n` and
    :math:`\\eta_t = \\text{step0}/(100 + \\sqrt t)`, from :math:`\\theta = 0`, on several problems.

    This is the expected step of :func:`sgd_paper` with the Dirichlet process, the Monte Carlo and
    the aversion removed (:math:`\\mathbb E \\sum_j w_j \\nabla h_j = \\nabla \\mathbb E_{G_n} h`, and
    :math:`G_n` is the empirical distribution when :math:`\\alpha \\to 0`), so the two differ only
    by what the criterion adds. Computed exactly in the eigenbasis of :math:`X^\\top X` (eigenvalues
    :math:`\\lambda_k`): with :math:`\\theta^+` the minimum-norm least-squares solution, the
    iterate is :math:`\\sum_k [1 - \\prod_{\\tau \\le t}(1 - \\varepsilon_\\tau\\lambda_k)]\\, v_k
    v_k^\\top\\theta^+`. Returns the final parameters (P x d) and, if ``snapshots`` lists step
    counts, also a dict {step: parameters after that many steps}.
    """
    n_steps = _positive_int("n_steps", n_steps)
    if len(Xs) == 0 or len(Xs) != len(ys):
        raise ValueError("Xs and ys must be non-empty lists of the same length")
    want = sorted(set(int(s) for s in snapshots))
    if any(s < 1 or s > n_steps for s in want):
        raise ValueError(f"snapshots must be step counts in [1, n_steps={n_steps}], got {want}")
    d = np.asarray(Xs[0]).shape[1]
    t = np.arange(1, n_steps + 1)
    eta = step0 / (100.0 + np.sqrt(t)) * scale * 2.0
    stops = want + [n_steps]
    at = np.asarray(stops) - 1
    out = np.zeros((len(stops), len(Xs), d))
    spectra = []
    for p, (x, y) in enumerate(zip(Xs, ys)):
        x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64).reshape(-1)
        if x.ndim != 2 or x.shape[1] != d or y.size != x.shape[0]:
            raise ValueError(f"problem {p}: X must be (n, {d}) and y of length n")
        _, sv, Vt = np.linalg.svd(x, full_matrices=False)
        keep = sv > sv.max() * 1e-12
        sv, Vt = sv[keep], Vt[keep]
        spectra.append((sv ** 2 / x.shape[0], Vt, (Vt @ (x.T @ y)) / sv ** 2))  # lambda, basis, theta+
    x_max = float(eta.max() * max(lam.max() for lam, _, _ in spectra))
    if x_max < 0.5:
        # sum_tau log(1 - eta_tau lam) = -sum_m lam^m / m * sum_tau eta_tau^m: power sums of the shared
        # schedule, once, then a small matrix product per problem
        n_terms = int(np.ceil(np.log(1e-18) / np.log(max(x_max, 1e-300)))) + 1
        m = np.arange(1, n_terms + 1)
        powsum = np.cumsum(eta[:, None] ** m, axis=0)[at]                      # [stops, m]
    for p, (lam, Vt, z_plus) in enumerate(spectra):
        if x_max < 0.5:
            prod = np.exp(-powsum @ (lam[None, :] ** m[:, None] / m[:, None]))
        else:
            fac = 1.0 - eta[:, None] * lam[None, :]               # [t, k]
            with np.errstate(divide="ignore"):                    # a factor of exactly 0 is fine
                prod = np.exp(np.cumsum(np.log(np.abs(fac)), axis=0)[at])
            negative = fac < 0                                    # only with a step past 1/lambda
            if negative.any():
                prod *= np.where(np.cumsum(negative, axis=0)[at] % 2 == 1, -1.0, 1.0)
        out[:, p] = ((1.0 - prod) * z_plus) @ Vt
    final = out[-1]
    return (final, {s: out[i] for i, s in enumerate(want)}) if want else final


def weighted_lad(Z, weights) -> np.ndarray:
    """Minimise :math:`\\sum_i \\omega_i |z_{i0} - z_{i,1:}^\\top\\theta|` over rows ``Z`` (first
    column the response) by linear programming (HiGHS): minimise :math:`\\sum_i \\omega_i u_i`
    subject to :math:`-u \\le y - Z\\theta \\le u`."""
    from scipy.optimize import linprog

    Z, w = np.asarray(Z, dtype=np.float64), np.asarray(weights, dtype=np.float64)
    if w.shape != (Z.shape[0],) or np.any(w < 0):
        raise ValueError(f"weights must be {Z.shape[0]} non-negative numbers, got shape {w.shape}")
    zy, Zx = Z[:, 0], Z[:, 1:]
    N, d = Zx.shape
    cost = np.concatenate([np.zeros(d), w])
    eye = np.eye(N)
    A_ub = np.block([[-Zx, -eye], [Zx, -eye]])      # y - Z th <= u  and  Z th - y <= u
    b_ub = np.concatenate([-zy, zy])
    bounds = [(None, None)] * d + [(0, None)] * N
    res = linprog(cost, A_ub=A_ub, b_ub=b_ub, bounds=bounds, method="highs")
    if not res.success:  # pragma: no cover
        raise RuntimeError(f"linear program failed: {res.message}")
    return res.x[:d]


def minimize_neutral_absolute(X, y, alpha: float, c: float = 1.0) -> np.ndarray:
    """Minimise :math:`V_\\infty` for the absolute loss as a *weighted least-absolute-deviations*
    problem (:func:`weighted_lad`) over the data (weight 1) and the base measure's support points
    (weight :math:`\\alpha/(2d)` each), with no explicit penalty."""
    X, y = np.asarray(X, dtype=np.float64), np.asarray(y, dtype=np.float64)
    n, d = X.shape
    Z = np.concatenate([np.column_stack([y, X]), lad_base(d, c)])
    return weighted_lad(Z, np.concatenate([np.ones(n), np.full(2 * d, alpha / (2 * d))]))


def sparse_regression(n: int, n_test: int, d: int, n_active: int, rho: float, noise_sd: float,
                      rng: np.random.Generator):
    """The authors' simulated regression: :math:`x \\sim N(0, \\Sigma)` with equicorrelation
    :math:`\\Sigma = \\rho \\mathbf 1 \\mathbf 1^\\top + (1-\\rho) I`, the first ``n_active``
    coefficients equal to 1 and the rest 0, :math:`y = x^\\top\\theta^* + N(0, \\sigma^2)`.
    Returns ``(X_train, y_train, X_test, y_test, theta_star)``."""
    for name, v in (("n", n), ("n_test", n_test), ("d", d)):
        _positive_int(name, v)
    if not 0 <= n_active <= d:
        raise ValueError(f"n_active must be in [0, d={d}], got {n_active}")
    if not -1.0 / max(d - 1, 1) < rho < 1.0:
        raise ValueError(f"rho must make the correlation matrix positive definite, got {rho}")
    cov = rho * np.ones((d, d)) + (1 - rho) * np.eye(d)
    Lc = np.linalg.cholesky(cov)
    theta = np.concatenate([np.ones(n_active), np.zeros(d - n_active)])
    X = rng.normal(size=(n + n_test, d)) @ Lc.T
    y = X @ theta + rng.normal(0.0, noise_sd, n + n_test)
    return X[:n], y[:n], X[n:], y[n:], theta
