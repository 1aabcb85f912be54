"""The hand-written exact GP equals gpytorch's ExactGP posterior and marginal likelihood."""
import gpytorch
import pytest
import torch

from reprobook.bo.exact_gp import ExactGP, exact_posterior, fit_exact_gp

D = torch.float64


def _data(n=30):
    g = torch.Generator().manual_seed(0)
    X = torch.rand(n, 3, generator=g, dtype=D)
    return X, torch.cos(3 * X).sum(1) + 0.05 * torch.randn(n, generator=g, dtype=D)


class _G(gpytorch.models.ExactGP):
    def __init__(self, X, y, lik):
        super().__init__(X, y, lik)
        self.mean_module = gpytorch.means.ConstantMean()
        self.covar_module = gpytorch.kernels.ScaleKernel(gpytorch.kernels.MaternKernel(nu=2.5, ard_num_dims=3))

    def forward(self, x):
        return gpytorch.distributions.MultivariateNormal(self.mean_module(x), self.covar_module(x))


def test_matches_gpytorch():
    X, y = _data()
    ex = fit_exact_gp(X, y, iters=20)
    lik = gpytorch.likelihoods.GaussianLikelihood().to(D)
    g = _G(X, y, lik).to(D)
    p = ex.prior
    with torch.no_grad():
        lik.noise = p.noise.detach()
        g.mean_module.constant.copy_(p.constant)
        g.covar_module.base_kernel.lengthscale = p.lengthscale.detach()[None]
        g.covar_module.outputscale = p.outputscale.detach()
        mll = gpytorch.mlls.ExactMarginalLogLikelihood(lik, g)
        g.train()
        assert ex.log_marginal().item() == pytest.approx(mll(g(X), y).item(), abs=1e-8)
        g.eval()
        Xs = torch.rand(9, 3, dtype=D)
        with gpytorch.settings.fast_pred_var(False):
            f = g(Xs)
        mu, var = exact_posterior(ex, Xs)
        assert torch.allclose(mu, f.mean, atol=1e-7)
        assert torch.allclose(var, f.variance, atol=1e-7)


def test_fit_improves_evidence_and_grad_in_x():
    X, y = _data()
    start = ExactGP(X, y).log_marginal().item()
    ex = fit_exact_gp(X, y, iters=30)
    assert ex.log_marginal().item() > start
    x = torch.rand(2, 3, dtype=D, requires_grad=True)
    mu, _ = exact_posterior(ex, x, grad=True)
    mu.sum().backward()
    assert x.grad is not None and x.grad.abs().sum() > 0


def test_bad_input():
    X, y = _data()
    with pytest.raises(ValueError, match="y must be"):
        fit_exact_gp(X, y[:3])
    with pytest.raises(ValueError, match="iters"):
        fit_exact_gp(X, y, iters=-2)
