r"""Computation-aware Gaussian processes (CaGP) with block-sparse actions, after Wenger et al. (2024).

Model: :math:`f \sim \mathcal{GP}(0, k)`, :math:`y = f(X) + \varepsilon`, :math:`\varepsilon \sim
\mathcal N(0, \sigma^2 I)`, with an ARD squared-exponential kernel
:math:`k(x, x') = s^2 \exp(-\tfrac12 \sum_d (x_d - x'_d)^2 / \ell_d^2)`. Write
:math:`\hat K = K_{XX} + \sigma^2 I`.

**Exact GP.** :math:`\mu_*(x) = k(x,X)\hat K^{-1} y`,
:math:`k_*(x,x) = k(x,x) - k(x,X)\hat K^{-1}k(X,x)`, log evidence
:math:`\log p(y) = \log\mathcal N(y; 0, \hat K)`.

**CaGP.** Instead of solving with :math:`\hat K`, the data are observed only through
:math:`i` *actions* :math:`S\in\mathbb R^{n\times i}` (projections :math:`S^\top y`). With
:math:`G = S^\top\hat K S` (an :math:`i\times i` matrix) and :math:`C = S G^{-1} S^\top`,

.. math::
    \mu_i(x) = k(x,X)\,C\,y,\qquad k_i(x,x') = k(x,x') - k(x,X)\,C\,k(X,x').

This is the exact posterior given :math:`S^\top y`. Since :math:`\hat K^{1/2} C \hat K^{1/2}` is the
orthogonal projector onto the range of :math:`\hat K^{1/2}S`, :math:`C \preceq \hat K^{-1}`, so

.. math::
    k_i(x,x) = \underbrace{k_*(x,x)}_{\text{mathematical}}
      + \underbrace{k(x,X)(\hat K^{-1} - C)k(X,x)}_{\text{computational}\ \ge 0} \;\ge\; k_*(x,x),

with equality for :math:`S = I` (or any invertible :math:`S`).

**Training loss.** The paper selects hyperparameters (and the action entries) by maximising an
ELBO whose variational family is the CaGP posterior :math:`q(f_X) = \mathcal N(m, \Sigma)`,
:math:`m = K S v`, :math:`v = G^{-1}S^\top y`, :math:`\Sigma = K - K S G^{-1} S^\top K`:

.. math::
    \mathrm{ELBO} = \mathbb E_q[\log p(y\mid f_X)] - \mathrm{KL}(q\,\|\,p),\quad
    \mathbb E_q[\log p(y\mid f)] = -\tfrac n2\log(2\pi\sigma^2)
        - \tfrac{1}{2\sigma^2}\big(\|y-m\|^2 + \operatorname{tr}\Sigma\big),

.. math::
    \mathrm{KL} = \tfrac12\big[v^\top S^\top K S v - \operatorname{tr}(G^{-1}S^\top K S)
        + \log\det G - i\log\sigma^2 - \log\det(S^\top S)\big].

(The KL follows from the Gaussian KL formula: :math:`\operatorname{tr}(K^{-1}\Sigma) = n -
\operatorname{tr}(G^{-1}S^\top K S)` and :math:`\det\Sigma/\det K = \det(I - G^{-1}S^\top K S) =
\sigma^{2i}\det(S^\top S)/\det G`, so :math:`K^{-1}` never appears.) Because
:math:`\log p(y) = \mathrm{ELBO} + \mathrm{KL}(q\,\|\,p(f_X\mid y)) \ge \mathrm{ELBO}`, the training
loss :math:`\mathcal L = -\mathrm{ELBO}` is an **upper bound on the negative log evidence**,
:math:`\mathcal L \ge -\log p(y)`, tight when :math:`q` is the exact posterior (:math:`S = I`).

**Actions (CaGP-Opt).** :class:`BlockSparseActions`: the data are split into :math:`i` blocks of
about :math:`k = n/i` points and column :math:`j` of :math:`S` is non-zero only on block :math:`j`;
its entries are learned with the hyperparameters. :math:`S^\top S` is diagonal and
:math:`k(x, X) S` costs :math:`O(n)` per test point (linear in :math:`n`); forming
:math:`K S` for training touches every kernel entry once (:math:`n^2` evaluations), never storing
the :math:`n\times n` matrix (memory :math:`O(n i)`).

Everything is float64 torch; zero prior mean (standardise ``y`` first).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from .training import train_until_converged

__all__ = ["Hyper", "rbf", "BlockSparseActions", "kernel_actions", "exact_posterior",
           "exact_log_evidence", "cagp_posterior", "cagp_elbo", "fit_exact", "fit_exact_lbfgs", "fit_cagp",
           "gaussian_nll", "PLANTED_BUGS"]

DTYPE = torch.float64
#: Deliberate errors a chapter can switch on to check that its claims can fail:
#: ``"gram_without_noise"`` builds :math:`G = S^\top K S` (posterior and loss), ``"elbo_without_kl"``
#: drops the KL term from the training loss (the posterior is unaffected).
PLANTED_BUGS = (None, "gram_without_noise", "elbo_without_kl")


@dataclass
class Hyper:
    """Kernel hyperparameters, stored as logs so that unconstrained optimisation keeps them > 0."""

    log_lengthscale: torch.Tensor  # (d,)
    log_outputscale: torch.Tensor  # ()  log s^2
    log_noise: torch.Tensor        # ()  log sigma^2

    @classmethod
    def init(cls, d: int, lengthscale: float = 0.3, outputscale: float = 1.0, noise: float = 0.1,
             requires_grad: bool = False) -> "Hyper":
        if not isinstance(d, int) or d < 1:
            raise ValueError(f"d must be a positive int, got {d!r}")
        h = cls(torch.full((d,), math.log(lengthscale), dtype=DTYPE),
                torch.tensor(math.log(outputscale), dtype=DTYPE),
                torch.tensor(math.log(noise), dtype=DTYPE))
        if requires_grad:
            for t in h.params():
                t.requires_grad_(True)
        return h

    def params(self) -> list[torch.Tensor]:
        return [self.log_lengthscale, self.log_outputscale, self.log_noise]

    @property
    def noise(self) -> torch.Tensor:
        return self.log_noise.exp()

    def detach(self) -> "Hyper":
        return Hyper(*(t.detach().clone() for t in self.params()))


def _check_xy(X: torch.Tensor, y: torch.Tensor | None = None, name: str = "X") -> None:
    if not isinstance(X, torch.Tensor) or X.dim() != 2:
        raise ValueError(f"{name} must be a 2-D tensor (n, d), got "
                         f"{tuple(X.shape) if isinstance(X, torch.Tensor) else type(X).__name__}")
    if y is not None and (y.dim() != 1 or y.shape[0] != X.shape[0]):
        raise ValueError(f"y must be 1-D with len(y) == {name}.shape[0] = {X.shape[0]}, "
                         f"got shape {tuple(y.shape)}")


def rbf(A: torch.Tensor, B: torch.Tensor, hyp: Hyper) -> torch.Tensor:
    """ARD squared-exponential kernel matrix k(A, B), shape (len(A), len(B))."""
    _check_xy(A, name="A"), _check_xy(B, name="B")
    if A.shape[1] != B.shape[1] or A.shape[1] != hyp.log_lengthscale.shape[0]:
        raise ValueError(f"dimension mismatch: A has d={A.shape[1]}, B has d={B.shape[1]}, "
                         f"lengthscale has d={hyp.log_lengthscale.shape[0]}")
    ell = hyp.log_lengthscale.exp()
    a, b = A / ell, B / ell
    # the squared distance as |a|^2 + |b|^2 - 2 a.b: a matmul (counted by FLOP counters)
    d2 = (a * a).sum(-1)[:, None] + (b * b).sum(-1)[None, :] - 2.0 * a @ b.T
    return hyp.log_outputscale.exp() * torch.exp(-0.5 * d2.clamp_min(0.0))


class BlockSparseActions:
    r"""CaGP-Opt actions: :math:`i` columns, column :math:`j` supported on block :math:`j` of the data.

    The data (in the given ``order``) are cut into :math:`i` contiguous blocks of equal size
    :math:`k = n/i` (so ``n`` must be a multiple of ``n_actions``); ``values`` (shape ``(i, k)``)
    holds the learnable non-zero entries, initialised at random with unit-norm rows.
    """

    def __init__(self, n: int, n_actions: int, generator: torch.Generator | None = None,
                 order: torch.Tensor | None = None):
        if not isinstance(n_actions, int) or not 1 <= n_actions <= n:
            raise ValueError(f"n_actions must be an int in [1, n={n}], got {n_actions!r}")
        if n % n_actions:
            raise ValueError(f"n_actions={n_actions} must divide n={n} (equal blocks)")
        order = torch.arange(n) if order is None else order
        if order.shape != (n,):
            raise ValueError(f"order must be a permutation of range(n={n}), got shape "
                             f"{tuple(order.shape)}")
        self.n, self.i, self.k = n, n_actions, n // n_actions
        self.index = order.reshape(n_actions, self.k)          # block j = rows index[j]
        v = torch.randn(n_actions, self.k, generator=generator, dtype=DTYPE)
        self.values = (v / v.norm(dim=1, keepdim=True)).requires_grad_(True)

    def params(self) -> list[torch.Tensor]:
        return [self.values]

    def dense(self) -> torch.Tensor:
        """The n × i matrix S (for tests and small problems)."""
        S = torch.zeros(self.n, self.i, dtype=DTYPE)
        cols = torch.arange(self.i)[:, None].expand(self.i, self.k)
        return S.index_put((self.index.reshape(-1), cols.reshape(-1)), self.values.reshape(-1))

    def gram_diag(self) -> torch.Tensor:
        """S^T S, which is diagonal: the squared norm of each block's values."""
        return (self.values * self.values).sum(1)

    def apply_t(self, M: torch.Tensor) -> torch.Tensor:
        """S^T M for M of shape (n,) or (n, p): O(n p)."""
        Mb = M[self.index]                                      # (i, k) or (i, k, p)
        return (self.values * Mb).sum(1) if M.dim() == 1 else torch.einsum("ik,ikp->ip",
                                                                             self.values, Mb)


def _block_kernel_actions(A, Xb, values, log_lengthscale, log_outputscale):
    """k(A, X) S for block-sparse S given the blocked inputs ``Xb`` (i, k, d): shape (len(A), i)."""
    ell = log_lengthscale.exp()
    a, b = A / ell, Xb / ell
    d2 = ((a * a).sum(-1)[None, :, None] + (b * b).sum(-1)[:, None, :]
          - 2.0 * torch.matmul(a[None], b.transpose(1, 2)))      # (i, m, k)
    Kb = log_outputscale.exp() * torch.exp(-0.5 * d2.clamp_min(0.0))
    return torch.matmul(Kb, values[:, :, None])[..., 0].T        # (m, i)


def kernel_actions(A: torch.Tensor, X: torch.Tensor, S, hyp: Hyper, chunk: int | None = None) -> torch.Tensor:
    """k(A, X) @ S, shape (len(A), i); block-sparse S needs k(A, block j) for each block j only.

    For block-sparse S this costs len(A)·n kernel evaluations (O(n) per row of A). By default
    the rows of A are processed as one batch for speed, which holds an (i, len(A), k) kernel
    tensor, and autograd keeps it for the backward pass: O(len(A)·n) memory. With ``chunk``, the
    rows go ``chunk`` at a time and each chunk is recomputed in the backward pass
    (``torch.utils.checkpoint``), so no kernel block outlives its chunk: O(chunk·n) working
    memory and O(len(A)·i) kept, at the price of a second kernel evaluation.
    """
    if chunk is not None and (not isinstance(chunk, int) or chunk < 1):
        raise ValueError(f"chunk must be None or a positive int, got {chunk!r}")
    if isinstance(S, BlockSparseActions):
        if S.n != X.shape[0]:
            raise ValueError(f"actions were built for n={S.n} points, X has {X.shape[0]}")
        _check_xy(A, name="A")
        Xb = X[S.index]                                         # (i, k, d)
        args = (S.values, hyp.log_lengthscale, hyp.log_outputscale)
        if chunk is None:
            return _block_kernel_actions(A, Xb, *args)
        from torch.utils.checkpoint import checkpoint
        return torch.cat([checkpoint(_block_kernel_actions, A[r:r + chunk], Xb, *args, use_reentrant=False)
                          for r in range(0, A.shape[0], chunk)])
    if not isinstance(S, torch.Tensor) or S.dim() != 2 or S.shape[0] != X.shape[0]:
        raise ValueError(f"S must be an (n, i) tensor with n = X.shape[0] = {X.shape[0]} or "
                         f"BlockSparseActions, got "
                         f"{tuple(S.shape) if isinstance(S, torch.Tensor) else type(S).__name__}")
    return rbf(A, X, hyp) @ S


def _sts(S) -> torch.Tensor:
    if isinstance(S, BlockSparseActions):
        return torch.diag(S.gram_diag())
    return S.T @ S


def _apply_st(S, r: torch.Tensor) -> torch.Tensor:
    """S^T r for r of shape (n,) or (n, p)."""
    if isinstance(S, BlockSparseActions):
        return S.apply_t(r)
    return S.T @ r


def exact_posterior(X, y, Xs, hyp: Hyper):
    """Exact GP latent posterior mean and variance at Xs (Cholesky of K̂)."""
    _check_xy(X, y), _check_xy(Xs, name="Xs")
    Kh = rbf(X, X, hyp) + hyp.noise * torch.eye(X.shape[0], dtype=DTYPE)
    L = torch.linalg.cholesky(Kh)
    Ksx = rbf(Xs, X, hyp)
    alpha = torch.cholesky_solve(y[:, None], L)[:, 0]
    W = torch.linalg.solve_triangular(L, Ksx.T, upper=False)
    var = hyp.log_outputscale.exp() - (W * W).sum(0)
    return Ksx @ alpha, var


def exact_log_evidence(X, y, hyp: Hyper) -> torch.Tensor:
    """log N(y; 0, K + σ² I)."""
    _check_xy(X, y)
    n = X.shape[0]
    L = torch.linalg.cholesky(rbf(X, X, hyp) + hyp.noise * torch.eye(n, dtype=DTYPE))
    a = torch.linalg.solve_triangular(L, y[:, None], upper=False)[:, 0]
    return -0.5 * (a @ a) - torch.log(torch.diagonal(L)).sum() - 0.5 * n * math.log(2 * math.pi)


def _gram(X, S, hyp, planted_bug, chunk=None):
    if planted_bug not in PLANTED_BUGS:
        raise ValueError(f"planted_bug must be one of {PLANTED_BUGS}, got {planted_bug!r}")
    KS = kernel_actions(X, X, S, hyp, chunk=chunk)          # (n, i)
    StKS = _apply_st(S, KS)
    StKS = 0.5 * (StKS + StKS.T)
    if planted_bug == "gram_without_noise":
        # the bug: no noise term; a relative jitter keeps the Cholesky alive, as buggy code would
        G = StKS + 1e-8 * torch.diagonal(StKS).mean() * torch.eye(StKS.shape[0], dtype=DTYPE)
    else:
        G = StKS + hyp.noise * _sts(S)
    return KS, StKS, torch.linalg.cholesky(G)


def cagp_posterior(X, y, Xs, hyp: Hyper, S, planted_bug: str | None = None):
    r"""CaGP latent posterior mean and *combined* variance at Xs.

    ``planted_bug="gram_without_noise"`` builds :math:`G = S^\top K S` (the noise forgotten), which
    removes the guarantee :math:`C \preceq \hat K^{-1}`: the computational uncertainty can turn
    negative. It exists only so the chapter can show that its checks fail on a wrong method.
    """
    _check_xy(X, y), _check_xy(Xs, name="Xs")
    if Xs.shape[1] != X.shape[1]:
        raise ValueError(f"Xs has d={Xs.shape[1]} but X has d={X.shape[1]}")
    _, _, L = _gram(X, S, hyp, planted_bug)
    v = torch.cholesky_solve(_apply_st(S, y)[:, None], L)[:, 0]   # G^{-1} S^T y
    KsS = kernel_actions(Xs, X, S, hyp)                          # k(Xs, X) S
    W = torch.linalg.solve_triangular(L, KsS.T, upper=False)
    var = hyp.log_outputscale.exp() - (W * W).sum(0)
    return KsS @ v, var


def cagp_elbo(X, y, hyp: Hyper, S, planted_bug: str | None = None, chunk: int | None = None) -> torch.Tensor:
    """The CaGP ELBO (see module docstring); ``-cagp_elbo`` is the training loss, ≥ -log p(y).

    ``planted_bug`` (see :data:`PLANTED_BUGS`) breaks the loss on purpose, so that a chapter can
    show its bound check fails on a wrong method: ``"elbo_without_kl"`` returns the expected
    log-likelihood alone, ``"gram_without_noise"`` forgets the noise in :math:`G`. ``chunk``: see
    :func:`kernel_actions` (the same value, O(n i) memory kept for the backward pass).
    """
    _check_xy(X, y)
    n = X.shape[0]
    KS, StKS, L = _gram(X, S, hyp, planted_bug, chunk)
    i = StKS.shape[0]
    s2 = hyp.noise
    v = torch.cholesky_solve(_apply_st(S, y)[:, None], L)[:, 0]
    m = KS @ v
    W = torch.linalg.solve_triangular(L, KS.T, upper=False)          # (i, n)
    tr_sigma = n * hyp.log_outputscale.exp() - (W * W).sum()
    exp_ll = -0.5 * n * torch.log(2 * math.pi * s2) - ((y - m) ** 2).sum().add(tr_sigma) / (2 * s2)
    logdet_G = 2 * torch.log(torch.diagonal(L)).sum()
    logdet_sts = torch.linalg.slogdet(_sts(S))[1]
    tr_GinvStKS = torch.diagonal(torch.cholesky_solve(StKS, L)).sum()
    kl = 0.5 * (v @ StKS @ v - tr_GinvStKS + logdet_G - i * torch.log(s2) - logdet_sts)
    if planted_bug == "elbo_without_kl":
        return exp_ll
    return exp_ll - kl


def gaussian_nll(y, mean, var) -> torch.Tensor:
    """Mean negative log predictive density of y under N(mean, var) (var includes the noise)."""
    return 0.5 * (torch.log(2 * math.pi * var) + (y - mean) ** 2 / var).mean()


def _adam(params, loss_fn, steps: int, lr: float, tol=None, patience: int = 20) -> int:
    return train_until_converged(loss_fn, [torch.optim.Adam(params, lr=lr)], steps, tol, patience)


def fit_exact(X, y, steps: int = 100, lr: float = 0.05, hyp: Hyper | None = None,
              tol: float | None = None, patience: int = 20) -> Hyper:
    """Type-II maximum likelihood: Adam on -log p(y)/n (``tol``, ``patience``: see
    :func:`reprobook.gp.training.train_until_converged`)."""
    _check_xy(X, y)
    hyp = hyp.detach() if hyp is not None else Hyper.init(X.shape[1])
    for t in hyp.params():
        t.requires_grad_(True)
    _adam(hyp.params(), lambda: -exact_log_evidence(X, y, hyp) / X.shape[0], steps, lr, tol, patience)
    return hyp.detach()


def fit_exact_lbfgs(X, y, max_iter: int = 60, hyp: Hyper | None = None) -> Hyper:
    """Type-II maximum likelihood to convergence: L-BFGS (strong Wolfe line search) on -log p(y)/n.

    The reference fit of a benchmark: each function evaluation is one O(n^3) Cholesky, and
    L-BFGS reaches the optimum in far fewer of them than Adam.
    """
    _check_xy(X, y)
    if not isinstance(max_iter, int) or max_iter < 1:
        raise ValueError(f"max_iter must be a positive int, got {max_iter!r}")
    hyp = hyp.detach() if hyp is not None else Hyper.init(X.shape[1])
    for t in hyp.params():
        t.requires_grad_(True)
    opt = torch.optim.LBFGS(hyp.params(), lr=1.0, max_iter=max_iter, line_search_fn="strong_wolfe",
                            tolerance_grad=1e-6, tolerance_change=1e-10)

    def closure():
        opt.zero_grad()
        loss = -exact_log_evidence(X, y, hyp) / X.shape[0]
        loss.backward()
        return loss
    opt.step(closure)
    return hyp.detach()


def fit_cagp(X, y, n_actions: int, steps: int = 100, lr: float = 0.05, seed: int = 0,
             hyp: Hyper | None = None, tol: float | None = None, patience: int = 20,
             order: torch.Tensor | None = None):
    """CaGP-Opt: Adam on -ELBO/n over hyperparameters and block-sparse action entries jointly.

    The blocks follow ``order`` (default: the order of ``X[:, 0]``, contiguous in the first
    coordinate), the action values are random at start. Returns ``(hyper, actions)``.
    """
    _check_xy(X, y)
    g = torch.Generator().manual_seed(int(seed))
    order = torch.argsort(X[:, 0]) if order is None else order
    S = BlockSparseActions(X.shape[0], n_actions, generator=g, order=order)
    hyp = hyp.detach() if hyp is not None else Hyper.init(X.shape[1])
    for t in hyp.params():
        t.requires_grad_(True)
    _adam(hyp.params() + S.params(), lambda: -cagp_elbo(X, y, hyp, S) / X.shape[0], steps, lr, tol, patience)
    S.values.requires_grad_(False)
    return hyp.detach(), S
