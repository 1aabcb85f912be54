"""Distillation losses: closed-form gradients on Gaussians, SIM's identity against finite
differences, the naive estimator fails it, and a data-free run moves the generator."""
import pytest
import torch

from reprobook.models.diffusion.denoiser import MLPDenoiser
from reprobook.models.diffusion.distill import (DistillConfig, OneStepGenerator, distill,
                                                generator_loss)
from reprobook.models.diffusion.gmm_score import DiagonalGaussian, GaussianMixture
from reprobook.models.diffusion.gradient_check import (finite_difference_gradient, relative_error,
                                                       surrogate_gradient)

N = 100000


def _gaussian_grad(kind, theta, sigma, seed=0):
    """Gradient of the surrogate for p = N(theta, I), q = N(0, I), fake = exact frozen score."""
    g = torch.Generator().manual_seed(seed)
    q = GaussianMixture([[0.0, 0.0]], 1.0)
    th = theta.clone().requires_grad_(True)
    frozen = DiagonalGaussian(theta.clone(), torch.zeros(2, dtype=torch.float64))
    z = torch.randn(N, 2, generator=g, dtype=torch.float64)
    eps = torch.randn(N, 2, generator=g, dtype=torch.float64)
    sig = torch.full((N, 1), sigma, dtype=torch.float64)
    loss = generator_loss(kind, th + z, sig, eps, lambda x, s: x + s ** 2 * frozen.score(x, s), q.denoise)
    return torch.autograd.grad(loss, th)[0]


@pytest.mark.parametrize("sigma", [0.5, 2.0])
def test_squared_distance_gradient_matches_closed_form(sigma):
    # d = 1/2 |sigma^2 (s_p - s_q)|^2 = 1/2 sigma^4 |theta|^2 / (1 + sigma^2)^2
    theta = torch.tensor([0.7, -0.4], dtype=torch.float64)
    expect = sigma ** 4 * theta / (1 + sigma ** 2) ** 2
    assert torch.allclose(_gaussian_grad("sid", theta, sigma), expect, atol=0.02 * sigma ** 2)


def test_diff_instruct_gradient_is_the_kl_gradient():
    # KL(N(theta, (1+s^2) I) || N(0, (1+s^2) I)) has gradient theta / (1 + s^2); DI weighs by s^2
    theta, sigma = torch.tensor([0.7, -0.4], dtype=torch.float64), 1.0
    got = _gaussian_grad("diff-instruct", theta, sigma)
    assert torch.allclose(got, sigma ** 2 * theta / (1 + sigma ** 2), atol=1e-10)


def test_sim_identity_against_finite_differences_and_naive_estimator_fails():
    q = GaussianMixture.ring()
    th = torch.tensor([0.3, -0.2, -0.5, 0.1], dtype=torch.float64)
    fd = finite_difference_gradient(th, q, 1.0, 20000, torch.Generator().manual_seed(1))
    sim = surrogate_gradient(th, q, 1.0, 20000, torch.Generator().manual_seed(1))
    naive = surrogate_gradient(th, q, 1.0, 20000, torch.Generator().manual_seed(1), estimator="pathwise")
    assert relative_error(sim, fd) < 0.05
    assert relative_error(naive, fd) > 0.3


def test_distill_is_data_free_and_moves_the_generator():
    torch.manual_seed(0)
    q = GaussianMixture.ring(dtype=torch.float32)
    gen = OneStepGenerator(MLPDenoiser(2, width=16, depth=2, sigma_data=1.4))
    before = [p.detach().clone() for p in gen.parameters()]
    fake = MLPDenoiser(2, width=16, depth=2, sigma_data=1.4)
    seen = []
    losses = distill("sim", gen, fake, q.denoise, DistillConfig(iterations=3, batch=16, warmup=2),
                     torch.Generator().manual_seed(0), callback=seen.append)
    assert seen == [0, 1, 2, 3] and len(losses) == 3
    assert any(not torch.equal(a, b) for a, b in zip(before, gen.parameters()))
    assert all(p.requires_grad for p in fake.parameters())


def test_bad_kind_and_shapes():
    q = GaussianMixture.ring()
    with pytest.raises(ValueError, match="unknown distillation loss"):
        generator_loss("dmd2", torch.zeros(2, 2), torch.ones(2, 1), torch.zeros(2, 2), q.denoise,
                       q.denoise)
    with pytest.raises(ValueError, match="sigma"):
        generator_loss("sim", torch.zeros(2, 2), torch.ones(2), torch.zeros(2, 2), q.denoise, q.denoise)
    with pytest.raises(ValueError, match="theta0"):
        surrogate_gradient(torch.zeros(3, dtype=torch.float64), q, 1.0, 10, torch.Generator())
