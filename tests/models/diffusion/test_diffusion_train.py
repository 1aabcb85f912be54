"""Denoising score matching: the exact denoiser minimises the loss, and training lowers it."""
import pytest
import torch

from reprobook.models.diffusion.denoiser import MLPDenoiser
from reprobook.models.diffusion.gmm_score import GaussianMixture
from reprobook.models.diffusion.train import dsm_loss, train_dsm


class Exact(torch.nn.Module):
    def __init__(self, q, shift=0.0):
        super().__init__()
        self.q, self.shift, self.sigma_data = q, shift, 1.0

    def forward(self, x, s):
        return self.q.denoise(x, s) + self.shift


def test_exact_denoiser_beats_a_perturbed_one():
    q = GaussianMixture.ring(4)
    g = torch.Generator().manual_seed(0)
    x0 = q.sample(20000, g)
    sig = torch.exp(torch.randn(20000, 1, generator=g, dtype=torch.float64))
    eps = torch.randn(x0.shape, generator=g, dtype=torch.float64)
    assert float(dsm_loss(Exact(q), x0, sig, eps)) < float(dsm_loss(Exact(q, 0.05), x0, sig, eps))


def test_training_approaches_the_gaussian_denoiser():
    torch.manual_seed(0)
    net = MLPDenoiser(1, width=32, depth=2, sigma_data=0.5)
    g = torch.Generator().manual_seed(1)
    losses = train_dsm(net, lambda n, gen: 0.5 * torch.randn(n, 1, generator=gen), steps=200, batch=64,
                       lr=3e-3, generator=g, sigma_min=0.05, sigma_max=5.0)
    assert sum(losses[-30:]) / 30 < sum(losses[:30]) / 30
    x = torch.linspace(-1, 1, 11)[:, None]
    with torch.no_grad():
        for s in (0.2, 1.0):
            # N(0, 0.25): E[x0 | x] = 0.25 / (0.25 + s^2) x
            assert torch.allclose(net(x, s), 0.25 / (0.25 + s ** 2) * x, atol=0.08)


def test_bad_batch():
    with pytest.raises(ValueError, match="same shape"):
        dsm_loss(MLPDenoiser(2), torch.zeros(3, 2), torch.ones(3, 1), torch.zeros(3, 1))
