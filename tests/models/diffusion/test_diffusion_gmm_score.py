"""Exact mixture and Gaussian scores against autograd of their log-densities; moments; errors."""
import pytest
import torch

from reprobook.models.diffusion.gmm_score import DiagonalGaussian, GaussianMixture


@pytest.mark.parametrize("sigma", [0.0, 0.05, 0.7, 5.0])
def test_mixture_score_is_the_gradient_of_the_log_density(sigma):
    g = torch.Generator().manual_seed(0)
    q = GaussianMixture.random(4, 3, g, std=0.3)
    x = (2 * torch.randn(50, 3, generator=g, dtype=torch.float64)).requires_grad_(True)
    (grad,) = torch.autograd.grad(q.log_prob(x, sigma).sum(), x)
    assert torch.allclose(grad, q.score(x, sigma), atol=1e-10)


def test_per_sample_sigma_and_denoiser_limits():
    q = GaussianMixture.ring()
    x = torch.randn(6, 2, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    sig = torch.tensor([0.1, 0.3, 1.0, 2.0, 5.0, 9.0], dtype=torch.float64)
    rows = torch.stack([q.score(x[i:i + 1], float(sig[i]))[0] for i in range(6)])
    assert torch.allclose(q.score(x, sig), rows) and torch.allclose(q.score(x, sig[:, None]), rows)
    # a huge noise level denoises every point to the mixture's mean
    assert torch.allclose(q.denoise(x, 1e4), q.mean().expand(6, 2), atol=1e-3)


def test_mixture_sampling_moments():
    q = GaussianMixture([[0.0, 0.0], [3.0, 1.0]], [0.5, 1.0], [0.3, 0.7])
    s = q.sample(100000, torch.Generator().manual_seed(2))
    assert torch.allclose(s.mean(0), q.mean(), atol=0.03)
    assert torch.allclose(torch.cov(s.T), q.covariance(), atol=0.05)


def test_diagonal_gaussian_score_and_reparametrisation():
    m = torch.tensor([0.5, -1.0], dtype=torch.float64)
    ell = torch.tensor([-0.3, 0.2], dtype=torch.float64)
    p = DiagonalGaussian(m, ell)
    x = torch.randn(20, 2, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    x.requires_grad_(True)
    (grad,) = torch.autograd.grad(p.log_prob(x, 0.4).sum(), x)
    assert torch.allclose(grad, p.score(x, 0.4), atol=1e-12)
    z = torch.randn(50000, 2, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    assert torch.allclose(p.rsample(z).std(0), torch.exp(ell), atol=0.02)


def test_bad_inputs():
    with pytest.raises(ValueError, match="means"):
        GaussianMixture([0.0, 1.0], 0.1)
    with pytest.raises(ValueError, match="weights"):
        GaussianMixture([[0.0], [1.0]], 0.1, [0.5, 0.6])
    with pytest.raises(ValueError, match="shape"):
        GaussianMixture.ring().score(torch.zeros(3, 3, dtype=torch.float64))
    with pytest.raises(ValueError, match="log_std"):
        DiagonalGaussian(torch.zeros(2), torch.zeros(3))
