"""EI and log-EI against botorch, Gauss-Hermite against closed forms and Monte Carlo, the optimiser."""
import math

import pytest
import torch
from botorch.acquisition.analytic import ExpectedImprovement, LogExpectedImprovement

from reprobook.bo.acquisition import (expected_improvement, expected_log_utility_ei,
                                      gauss_hermite_expectation, log_expected_improvement,
                                      log_softplus_utility, optimize_acquisition)

D = torch.float64


class _Gauss(torch.nn.Module):
    """A minimal botorch model whose posterior at each point is N(mean, sd^2) given in a table."""

    def __init__(self, mean, sd):
        super().__init__()
        self.mean, self.sd = mean, sd
        self.num_outputs = 1

    def posterior(self, X, **kw):
        from botorch.posteriors.gpytorch import GPyTorchPosterior
        from gpytorch.distributions import MultivariateNormal
        i = X[..., 0, 0].long()
        m, s = self.mean[i], self.sd[i]
        return GPyTorchPosterior(MultivariateNormal(m[..., None], torch.diag_embed(s[..., None] ** 2)))


def test_ei_and_log_ei_match_botorch():
    g = torch.Generator().manual_seed(0)
    mean = torch.randn(200, generator=g, dtype=D) * 3
    sd = torch.rand(200, generator=g, dtype=D) + 0.05
    best = 1.3
    X = torch.arange(200, dtype=D)[:, None, None]
    ref = ExpectedImprovement(_Gauss(mean, sd), best_f=best)(X)
    ref_log = LogExpectedImprovement(_Gauss(mean, sd), best_f=best)(X)
    z = (mean - best) / sd
    ok = z > -5   # botorch's plain EI cancels further out; its log-EI is the reference there
    assert torch.allclose(expected_improvement(mean, sd, best)[ok], ref[ok], rtol=1e-6, atol=1e-12)
    assert torch.allclose(log_expected_improvement(mean, sd, best), ref_log, rtol=1e-5, atol=1e-6)


def test_log_ei_tail_finite_and_consistent():
    z = torch.linspace(-40, 5, 400, dtype=D)
    lei = log_expected_improvement(z, torch.ones_like(z), 0.0)
    assert torch.isfinite(lei).all()
    ok = z > -4     # the direct formula cancels catastrophically further out
    assert torch.allclose(lei[ok], expected_improvement(z, torch.ones_like(z), 0.0)[ok].log(), rtol=1e-7)
    assert (lei.diff() > 0).all()                              # EI increases with the mean


def test_gauss_hermite_closed_forms_and_mc():
    mean, var = torch.tensor([0.3, -1.0], dtype=D), torch.tensor([0.5, 2.0], dtype=D)
    # E[f^2] = mu^2 + s^2, E[exp f] = exp(mu + s^2/2)
    assert torch.allclose(gauss_hermite_expectation(lambda f: f ** 2, mean, var), mean ** 2 + var)
    assert torch.allclose(gauss_hermite_expectation(torch.exp, mean, var, 30), torch.exp(mean + var / 2))
    # expected log softplus utility against Monte Carlo (1e6 draws, 4 s.e.)
    g = torch.Generator().manual_seed(1)
    f = mean[:, None] + var.sqrt()[:, None] * torch.randn(2, 10 ** 6, generator=g, dtype=D)
    mc = log_softplus_utility(f, 0.2)
    se = mc.std(1) / 1e3
    gh = expected_log_utility_ei(mean, var, 0.2)
    assert ((gh - mc.mean(1)).abs() < 4 * se).all()


def test_log_softplus_utility_stable():
    f = torch.tensor([-1000.0, -40.0, 0.0, 50.0], dtype=D)
    v = log_softplus_utility(f, 0.0)
    assert torch.isfinite(v).all()
    assert v[0] == -1000.0 and v[2] == pytest.approx(math.log(math.log(2.0)))
    assert v[3] == pytest.approx(math.log(50.0), rel=1e-12)


def test_optimizer_finds_box_maximum_and_respects_bounds():
    target = torch.tensor([0.3, 0.8], dtype=D)
    acq = lambda X: -((X - target) ** 2).sum(-1)          # noqa: E731
    x, v = optimize_acquisition(acq, 2, steps=80, lr=0.02, seed=0)
    assert torch.allclose(x, target, atol=2e-3) and v <= 0
    lo, hi = torch.tensor([0.5, 0.0], dtype=D), torch.tensor([0.9, 0.6], dtype=D)
    x, _ = optimize_acquisition(acq, 2, lower=lo, upper=hi, steps=80, seed=0)
    assert (x >= lo).all() and (x <= hi).all()
    assert torch.allclose(x, torch.tensor([0.5, 0.6], dtype=D), atol=2e-3)


def test_bad_input():
    one = torch.ones(3, dtype=D)
    with pytest.raises(ValueError, match="sigma"):
        expected_improvement(one, 0 * one, 0.0)
    with pytest.raises(ValueError, match="n_points"):
        gauss_hermite_expectation(torch.exp, one, one, n_points=0)
    with pytest.raises(ValueError, match="var"):
        gauss_hermite_expectation(torch.exp, one, -one)
    with pytest.raises(ValueError, match="dim"):
        optimize_acquisition(lambda X: X.sum(-1), 0)
    with pytest.raises(ValueError, match="n_restarts"):
        optimize_acquisition(lambda X: X.sum(-1), 2, n_restarts=0)
    with pytest.raises(ValueError, match="lower and upper"):
        optimize_acquisition(lambda X: X.sum(-1), 2, lower=torch.ones(2, dtype=D), upper=torch.zeros(2, dtype=D))
