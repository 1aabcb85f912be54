r"""Inducing-point baselines from gpytorch, set up to match :mod:`reprobook.gp.cagp`.

* **SGPR** (Titsias 2009): collapsed bound
  :math:`\log\mathcal N(y; 0, Q_{XX} + \sigma^2 I) - \tfrac{1}{2\sigma^2}\operatorname{tr}(K_{XX} - Q_{XX})`,
  :math:`Q_{XX} = K_{XZ}K_{ZZ}^{-1}K_{ZX}` (gpytorch ``InducingPointKernel`` + exact MLL).
* **SVGP** (Hensman et al. 2013): whitened variational :math:`q(u) = \mathcal N(m, LL^\top)` at
  learned inducing inputs :math:`Z`, trained on the uncollapsed ELBO (full batch here, so that the
  optimiser budget equals the other methods').

Both use the same ARD-RBF kernel, zero mean, :math:`m` inducing points initialised on an even
subset of the training inputs, the same start hyperparameters as CaGP and the same Adam steps.
Predictions return the latent mean and variance (add the noise for the predictive).
"""
from __future__ import annotations

import gpytorch
import torch

__all__ = ["fit_sgpr", "fit_svgp", "svgp_objective"]


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
             outputscale: float = 1.0, noise: float = 0.1):
    """Train SGPR; returns ``predict(Xs) -> (mean, latent var, noise)``."""
    _check(X, y)
    lik = gpytorch.likelihoods.GaussianLikelihood().double()
    lik.noise = torch.tensor(noise, dtype=torch.float64)
    model = _SGPR(X, y, lik, _inducing_init(X, n_inducing), lengthscale, outputscale).double()
    model.train(), lik.train()
    mll = gpytorch.mlls.ExactMarginalLogLikelihood(lik, model)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    for _ in range(steps):
        opt.zero_grad()
        loss = -mll(model(X), y)
        loss.backward()
        opt.step()
    model.eval(), lik.eval()

    def predict(Xs):
        with torch.no_grad(), gpytorch.settings.fast_pred_var(False):
            f = model(Xs)
            return f.mean, f.variance, lik.noise.item()
    return predict


class _SVGP(gpytorch.models.ApproximateGP):
    def __init__(self, Z, lengthscale, outputscale):
        dist = gpytorch.variational.CholeskyVariationalDistribution(Z.shape[0])
        strat = gpytorch.variational.VariationalStrategy(self, Z, dist, learn_inducing_locations=True)
        super().__init__(strat)
        self.mean = gpytorch.means.ZeroMean()
        self.cov = _init_kernel(Z.shape[1], lengthscale, outputscale)

    def forward(self, x):
        return gpytorch.distributions.MultivariateNormal(self.mean(x), self.cov(x))


def svgp_objective(X, y, n_inducing: int, lengthscale: float = 0.3, outputscale: float = 1.0,
                   noise: float = 0.1):
    """An untrained SVGP set up as in :func:`fit_svgp`; returns ``(loss, params, model, lik)``.

    ``loss()`` is the full-batch negative ELBO (per datum, as gpytorch's ``VariationalELBO``) and
    ``params`` what Adam trains. Useful on its own to count the cost of one training step.
    """
    _check(X, y)
    lik = gpytorch.likelihoods.GaussianLikelihood().double()
    lik.noise = torch.tensor(noise, dtype=torch.float64)
    model = _SVGP(_inducing_init(X, n_inducing), lengthscale, outputscale).double()
    model.train(), lik.train()
    elbo = gpytorch.mlls.VariationalELBO(lik, model, num_data=X.shape[0])
    params = list(model.parameters()) + list(lik.parameters())
    return (lambda: -elbo(model(X), y)), params, model, lik


def fit_svgp(X, y, n_inducing: int, steps: int = 100, lr: float = 0.05, lengthscale: float = 0.3,
             outputscale: float = 1.0, noise: float = 0.1):
    """Train SVGP (full-batch ELBO); returns ``predict(Xs) -> (mean, latent var, noise)``."""
    loss_fn, params, model, lik = svgp_objective(X, y, n_inducing, lengthscale, outputscale, noise)
    opt = torch.optim.Adam(params, lr=lr)
    for _ in range(steps):
        opt.zero_grad()
        loss = loss_fn()
        loss.backward()
        opt.step()
    model.eval(), lik.eval()

    def predict(Xs):
        with torch.no_grad():
            f = model(Xs)
            return f.mean, f.variance, lik.noise.item()
    return predict
