"""The EDM-preconditioned MLP denoiser: shapes, its initial function, the Tweedie score, errors."""
import pytest
import torch

from reprobook.models.diffusion.denoiser import FourierEmbedding, MLPDenoiser


def test_initial_denoiser_is_the_gaussian_posterior_mean():
    net = MLPDenoiser(4, width=16, depth=2, sigma_data=0.5)
    x = torch.randn(8, 4, generator=torch.Generator().manual_seed(0))
    sig = torch.full((8, 1), 0.7)
    # zero-initialised output layer: D = c_skip x, the posterior mean under N(0, sigma_d^2 I)
    assert torch.allclose(net(x, sig), 0.25 / (0.49 + 0.25) * x, atol=1e-6)
    assert torch.allclose(net.score(x, 0.7), (net(x, 0.7) - x) / 0.49, atol=1e-5)


def test_time_conditioning_changes_the_output_and_sigma_shapes():
    torch.manual_seed(0)
    net = MLPDenoiser(3, width=16, depth=3)
    torch.nn.init.normal_(net.out.weight)
    x = torch.randn(5, 3)
    a, b = net(x, 0.1), net(x, 3.0)
    assert not torch.allclose(a, b)
    assert torch.allclose(net(x, torch.full((5,), 0.1)), a)
    with pytest.raises(ValueError, match="sigma"):
        net(x, torch.ones(4))
    with pytest.raises(ValueError, match="shape"):
        net(torch.zeros(5, 2), 1.0)


def test_bad_construction():
    with pytest.raises(ValueError):
        FourierEmbedding(7)
    with pytest.raises(ValueError):
        MLPDenoiser(3, sigma_data=0.0)
