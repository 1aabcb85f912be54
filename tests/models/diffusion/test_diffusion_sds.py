"""Score distillation: on an analytic Gaussian prior the SDS gradient has the closed-form mean and
points from the prior's mean to x, so descent through a renderer raises the prior density."""
import pytest
import torch

from reprobook.models.diffusion.sds import gaussian_denoiser, sds_residual, sds_surrogate


def test_residual_mean_matches_closed_form():
    g = torch.Generator().manual_seed(0)
    mu, std, sig = torch.tensor([1.0, -2.0, 0.5]), 0.7, 1.3
    D = gaussian_denoiser(mu, std)
    x = torch.tensor([[0.0, 0.0, 0.0]], dtype=torch.float64).expand(20000, 3)
    eps = torch.randn(x.shape, generator=g, dtype=torch.float64)
    r = sds_residual(D, x, sig, eps, weighting="unit").mean(0)
    expected = sig * (x[0] - mu.double()) / (std ** 2 + sig ** 2)
    assert torch.allclose(r, expected, atol=0.02)


def test_descent_through_a_renderer_raises_density():
    """x = A theta (a linear 'renderer'); Gaussian prior on x; SDS descent on theta climbs log p."""
    g = torch.Generator().manual_seed(1)
    A = torch.randn(6, 2, generator=g, dtype=torch.float64)
    mu = A @ torch.tensor([0.5, -1.0], dtype=torch.float64)
    D = gaussian_denoiser(mu, 0.5)
    theta = torch.tensor([3.0, 2.0], dtype=torch.float64, requires_grad=True)

    def logp(t):
        return float(-((A @ t - mu) ** 2).sum())
    start = logp(theta.detach())
    opt = torch.optim.SGD([theta], lr=0.02)
    for _ in range(200):
        loss = sds_surrogate(D, (A @ theta)[None], g, sigma_min=0.1, sigma_max=2.0)
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert logp(theta.detach()) > start + 0.9 * abs(start)
    target = torch.tensor([0.5, -1.0], dtype=torch.float64)
    assert (theta.detach() - target).norm() < 0.2 * (torch.tensor([3.0, 2.0]) - target).norm()


def test_surrogate_gradient_is_jacobian_transpose_times_residual():
    g1, g2 = torch.Generator().manual_seed(3), torch.Generator().manual_seed(3)
    D = gaussian_denoiser(torch.zeros(4), 1.0)
    theta = torch.randn(2, 4, dtype=torch.float64, requires_grad=True)
    x = 2.0 * theta
    sds_surrogate(D, x, g1, sigma_min=0.5, sigma_max=0.5).backward()
    from reprobook.models.diffusion.schedules import log_uniform_sigmas
    s = log_uniform_sigmas(2, 0.5, 0.5, g2, torch.float64)
    eps = torch.randn(x.shape, generator=g2, dtype=torch.float64)
    r = sds_residual(D, x.detach(), s.reshape(-1), eps)
    assert torch.allclose(theta.grad, 2.0 * r)


def test_bad_input_is_refused():
    D = gaussian_denoiser(torch.zeros(3), 1.0)
    x = torch.zeros(2, 3)
    with pytest.raises(ValueError, match="weighting"):
        sds_residual(D, x, 1.0, torch.zeros(2, 3), weighting="snr")
    with pytest.raises(ValueError, match="eps"):
        sds_residual(D, x, 1.0, torch.zeros(2, 4))
    with pytest.raises(ValueError, match="positive"):
        sds_residual(D, x, 0.0, torch.zeros(2, 3))
    with pytest.raises(ValueError, match="n_noise"):
        sds_surrogate(D, x, torch.Generator(), sigma_min=0.1, sigma_max=1.0, n_noise=0)
    with pytest.raises(ValueError, match="std"):
        gaussian_denoiser(torch.zeros(3), 0.0)
