r"""Exact GP reference with the same prior as :mod:`reprobook.bo.svgp` (constant mean, Matérn-5/2
ARD, Gaussian noise, same constraints and start values). Hyperparameters maximise

.. math:: \log p(y) = -\tfrac12 (y - c)^\top \hat K^{-1}(y - c) - \tfrac12\log\det\hat K - \tfrac n2\log 2\pi,
   \qquad \hat K = K_{XX} + \sigma^2 I,

by L-BFGS (strong Wolfe). Posterior (latent, noise excluded), with :math:`\hat K = LL^\top`:
:math:`\mu(x) = c + k_{xX}\hat K^{-1}(y - c)`, :math:`\sigma^2(x) = k_{xx} - \|L^{-1}k_{Xx}\|^2`.
"""
from __future__ import annotations

import math

import torch
from torch import nn

from .svgp import DTYPE, GPPrior, check_data

__all__ = ["ExactGP", "fit_exact_gp", "exact_posterior"]


class ExactGP(nn.Module):
    def __init__(self, X: torch.Tensor, y: torch.Tensor, **hyper):
        super().__init__()
        check_data(X, y)
        self.X, self.y = X.to(DTYPE), y.to(DTYPE)
        self.prior = GPPrior(X.shape[1], **hyper)

    def _chol(self):
        K = self.prior.kernel(self.X, self.X)
        return torch.linalg.cholesky(K + self.prior.noise * torch.eye(K.shape[0], dtype=DTYPE))

    def log_marginal(self) -> torch.Tensor:
        """:math:`\\log p(y)/n`."""
        L = self._chol()
        r = (self.y - self.prior.constant)[:, None]
        a = torch.linalg.solve_triangular(L, r, upper=False)
        n = self.X.shape[0]
        return (-0.5 * (a * a).sum() - torch.log(torch.diagonal(L)).sum()
                - 0.5 * n * math.log(2 * math.pi)) / n

    def predict(self, Xs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        L = self._chol()
        Ks = self.prior.kernel(self.X, Xs)
        A = torch.linalg.solve_triangular(L, Ks, upper=False)
        a = torch.linalg.solve_triangular(L, (self.y - self.prior.constant)[:, None], upper=False)
        mean = self.prior.constant + (A * a).sum(0)
        var = self.prior.kdiag(Xs) - (A * A).sum(0)
        return mean, var.clamp_min(1e-12)


def fit_exact_gp(X: torch.Tensor, y: torch.Tensor, iters: int = 60, **hyper) -> ExactGP:
    """Fit by L-BFGS on :math:`-\\log p(y)/n`; ``hyper`` are the start values (as for the SVGP)."""
    check_data(X, y)
    if not isinstance(iters, int) or iters < 0:
        raise ValueError(f"iters must be an int >= 0, got {iters!r}")
    model = ExactGP(X, y, **hyper)
    if iters:
        opt = torch.optim.LBFGS(list(model.parameters()), lr=1.0, max_iter=iters,
                                line_search_fn="strong_wolfe")

        def closure():
            opt.zero_grad()
            loss = -model.log_marginal()
            loss.backward()
            return loss

        opt.step(closure)
    return model


def exact_posterior(model: ExactGP, X: torch.Tensor, grad: bool = False):
    """Latent posterior mean and variance at ``X``; with ``grad=True`` differentiable in ``X``."""
    with torch.set_grad_enabled(grad):
        return model.predict(X)
