r"""Inducing-point baselines from gpytorch, set up to match :mod:`reprobook.gp.cagp`.

* **SGPR** (Titsias 2009): collapsed bound
  :math:`\log\mathcal N(y; 0, Q_{XX} + \sigma^2 I) - \tfrac{1}{2\sigma^2}\operatorname{tr}(K_{XX} - Q_{XX})`,
  :math:`Q_{XX} = K_{XZ}K_{ZZ}^{-1}K_{ZX}` (gpytorch ``InducingPointKernel`` + exact MLL).
* **SVGP** (Hensman et al. 2013): whitened variational :math:`q(u) = \mathcal N(m, LL^\top)` at
  learned inducing inputs :math:`Z`, trained on the uncollapsed ELBO (full batch here, so that the
  optimiser budget equals the other methods').

Both use the same ARD-RBF kernel, zero mean, :math:`m` inducing points initialised on an even
subset of the training inputs, the same start hyperparameters as CaGP and the same Adam steps.
Predictions return the latent mean and variance (add the noise for the predictive); the returned
``predict`` also carries ``predict.hyper``: the learned ``lengthscale`` (d,), ``outputscale`` and
``noise``, and ``predict.steps``: the optimiser steps taken.

**Training to convergence.** With ``tol`` set, training stops once the loss has not improved on
its best value by more than ``tol`` (absolute, per datum) for ``patience`` steps, or after
``steps`` steps (:func:`train_until_converged`, shared with :mod:`reprobook.gp.cagp`).
**Natural gradients** (``fit_svgp(natural_gradients=True)``, Salimbeni et al. 2018): the
variational distribution is parameterised by its natural parameters and updated by gpytorch's
``NGD`` (step ``ngd_lr``; with a Gaussian likelihood and the full batch, a step of 1 jumps to the
optimal :math:`q(u)` for the current hyperparameters), while Adam trains the kernel, noise and
inducing inputs.
"""
from __future__ import annotations

import gpytorch
import torch

from .training import train_until_converged

__all__ = ["fit_sgpr", "fit_svgp", "svgp_objective", "train_until_converged"]


def _init_kernel(d: int, lengthscale: float, outputscale: float):
    k = gpytorch.kernels.ScaleKernel(gpytorch.kernels.RBFKernel(ard_num_dims=d))
    k.base_kernel.lengthscale = torch.full((1, d), lengthscale, dtype=torch.float64)
    k.outputscale = torch.tensor(outputscale, dtype=torch.float64)
    return k.double()


def _inducing_init(X: torch.Tensor, m: int) -> torch.Tensor:
    if not isinstance(m, int) or not 1 <= m <= X.shape[0]:
        raise ValueError(f"n_inducing must be an int in [1, n={X.shape[0]}], got {m!r}")
    order = torch.argsort(X[:, 0])
    idx = order[torch.linspace(0, X.shape[0] - 1, m).round().long()]
    return X[idx].clone()


def _hyper(kernel, lik) -> dict:
    return dict(lengthscale=kernel.base_kernel.lengthscale.detach().reshape(-1).clone(),
                outputscale=kernel.outputscale.item(), noise=lik.noise.item())


def _check(X, y):
    if X.dim() != 2 or y.dim() != 1 or y.shape[0] != X.shape[0]:
        raise ValueError(f"X must be (n, d) and y (n,), got {tuple(X.shape)} and {tuple(y.shape)}")


class _SGPR(gpytorch.models.ExactGP):
    def __init__(self, X, y, lik, Z, lengthscale, outputscale):
        super().__init__(X, y, lik)
        self.mean = gpytorch.means.ZeroMean()
        self.cov = gpytorch.kernels.InducingPointKernel(
            _init_kernel(X.shape[1], lengthscale, outputscale), inducing_points=Z, likelihood=lik)

    def forward(self, x):
        return gpytorch.distributions.MultivariateNormal(self.mean(x), self.cov(x))


def fit_sgpr(X, y, n_inducing: int, steps: int = 100, lr: float = 0.05, lengthscale: float = 0.3,
             outputscale: float = 1.0, noise: float = 0.1, tol: float | None = None, patience: int = 20):
    """Train SGPR; returns ``predict(Xs) -> (mean, latent var, noise)`` (with ``.hyper``, ``.steps``)."""
    _check(X, y)
    lik = gpytorch.likelihoods.GaussianLikelihood().double()
    lik.noise = torch.tensor(noise, dtype=torch.float64)
    model = _SGPR(X, y, lik, _inducing_init(X, n_inducing), lengthscale, outputscale).double()
    model.train(), lik.train()
    mll = gpytorch.mlls.ExactMarginalLogLikelihood(lik, model)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    taken = train_until_converged(lambda: -mll(model(X), y), [opt], steps, tol, patience)
    model.eval(), lik.eval()

    def predict(Xs):
        with torch.no_grad(), gpytorch.settings.fast_pred_var(False):
            f = model(Xs)
            return f.mean, f.variance, lik.noise.item()
    predict.hyper, predict.steps = _hyper(model.cov.base_kernel, lik), taken
    return predict


class _SVGP(gpytorch.models.ApproximateGP):
    def __init__(self, Z, lengthscale, outputscale, natural: bool = False):
        family = (gpytorch.variational.NaturalVariationalDistribution if natural
                  else gpytorch.variational.CholeskyVariationalDistribution)
        dist = family(Z.shape[0])
        strat = gpytorch.variational.VariationalStrategy(self, Z, dist, learn_inducing_locations=True)
        super().__init__(strat)
        self.mean = gpytorch.means.ZeroMean()
        self.cov = _init_kernel(Z.shape[1], lengthscale, outputscale)

    def forward(self, x):
        return gpytorch.distributions.MultivariateNormal(self.mean(x), self.cov(x))


def svgp_objective(X, y, n_inducing: int, lengthscale: float = 0.3, outputscale: float = 1.0,
                   noise: float = 0.1, natural_gradients: bool = False):
    """An untrained SVGP set up as in :func:`fit_svgp`; returns ``(loss, params, model, lik)``.

    ``loss()`` is the full-batch negative ELBO (per datum, as gpytorch's ``VariationalELBO``) and
    ``params`` what Adam trains (with ``natural_gradients``, the variational parameters are left
    out: NGD trains them). Useful on its own to count the cost of one training step.
    """
    _check(X, y)
    lik = gpytorch.likelihoods.GaussianLikelihood().double()
    lik.noise = torch.tensor(noise, dtype=torch.float64)
    model = _SVGP(_inducing_init(X, n_inducing), lengthscale, outputscale, natural_gradients).double()
    model.train(), lik.train()
    elbo = gpytorch.mlls.VariationalELBO(lik, model, num_data=X.shape[0])
    if natural_gradients:
        params = list(model.hyperparameters()) + list(lik.parameters())
    else:
        params = list(model.parameters()) + list(lik.parameters())
    return (lambda: -elbo(model(X), y)), params, model, lik


def fit_svgp(X, y, n_inducing: int, steps: int = 100, lr: float = 0.05, lengthscale: float = 0.3,
             outputscale: float = 1.0, noise: float = 0.1, natural_gradients: bool = False,
             ngd_lr: float = 1.0, tol: float | None = None, patience: int = 20):
    """Train SVGP (full-batch ELBO); returns ``predict(Xs) -> (mean, latent var, noise)`` (with
    ``.hyper``, ``.steps``). ``natural_gradients``: NGD (step ``ngd_lr``) for q(u), Adam for the rest."""
    if not 0 < ngd_lr <= 1:
        raise ValueError(f"ngd_lr must be in (0, 1], got {ngd_lr!r}")
    loss_fn, params, model, lik = svgp_objective(X, y, n_inducing, lengthscale, outputscale, noise,
                                                 natural_gradients)
    opts = [torch.optim.Adam(params, lr=lr)]
    if natural_gradients:
        opts.append(gpytorch.optim.NGD(model.variational_parameters(), num_data=X.shape[0], lr=ngd_lr))
    taken = train_until_converged(loss_fn, opts, steps, tol, patience)
    model.eval(), lik.eval()

    def predict(Xs):
        with torch.no_grad():
            f = model(Xs)
            return f.mean, f.variance, lik.noise.item()
    predict.hyper, predict.steps = _hyper(model.cov, lik), taken
    return predict
