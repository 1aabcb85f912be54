"""Classifier-free guidance: endpoints, and DDIM with exact Gaussian noise predictions lands on the
tilted Gaussian's mean m_u + w (m_c - m_u)."""
import pytest
import torch

from reprobook.models.diffusion.ddim import ddim_sample, ddim_timesteps, linear_alphas_cumprod
from reprobook.models.diffusion.guidance import classifier_free

AB = linear_alphas_cumprod(1000)
V = 0.04                     # data variance of both Gaussians


def gaussian_eps(mean):
    """Exact E[eps | x_t] for data N(mean, V I) on the VP chain."""
    def eps(x, t):
        ab = float(AB[t]) if t >= 0 else 1.0
        return (1 - ab) ** 0.5 * (x - ab ** 0.5 * mean) / (ab * V + 1 - ab)
    return eps


M_U, M_C = torch.tensor([0.0, 0.0]), torch.tensor([0.5, -0.3])


def test_scale_one_is_conditional_and_zero_is_unconditional():
    x = torch.randn(5, 2, generator=torch.Generator().manual_seed(0))
    ec, eu = gaussian_eps(M_C), gaussian_eps(M_U)
    assert torch.allclose(classifier_free(ec, eu, 1.0)(x, 500), ec(x, 500))
    assert torch.allclose(classifier_free(ec, eu, 0.0)(x, 500), eu(x, 500))


@pytest.mark.parametrize("w", [0.0, 1.0, 2.5])
def test_guided_ddim_samples_the_tilted_gaussian(w):
    g = torch.Generator().manual_seed(1)
    ts = ddim_timesteps(1000, 50)
    x = torch.randn(4000, 2, generator=g)
    out = ddim_sample(classifier_free(gaussian_eps(M_C), gaussian_eps(M_U), w), x, ts, AB)
    want = M_U + w * (M_C - M_U)
    assert torch.allclose(out.mean(0), want, atol=0.02)
    # equal covariances: guidance moves the mean, not the spread (the spread is the plain conditional
    # sampler's on the same latents; 50 DDIM steps shrink a narrow Gaussian's a little at any w)
    plain = ddim_sample(gaussian_eps(M_C), x, ts, AB)
    assert torch.allclose(out.std(0), plain.std(0), atol=1e-4)
    assert torch.allclose(out - out.mean(0), plain - plain.mean(0), atol=1e-4)


def test_a_wrong_guidance_scale_or_shape_is_named():
    ec = gaussian_eps(M_C)
    with pytest.raises(ValueError, match="finite"):
        classifier_free(ec, ec, float("nan"))
    with pytest.raises(TypeError, match="callables"):
        classifier_free(ec, None, 1.0)
    bad = classifier_free(lambda x, t: torch.zeros(3), ec, 2.0)
    with pytest.raises(ValueError, match="shaped like x_t"):
        bad(torch.zeros(5, 2), 10)
