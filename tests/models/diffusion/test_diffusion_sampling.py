"""PF-ODE samplers with the exact mixture score recover the mixture; one step is the denoiser."""
import pytest
import torch

from reprobook.models.diffusion.gmm_score import GaussianMixture
from reprobook.models.diffusion.sampling import n_evaluations, pf_ode_sample, sample_teacher
from reprobook.models.diffusion.schedules import karras_sigmas


@pytest.mark.parametrize("method,steps", [("heun", 12), ("euler", 40)])
def test_exact_score_sampler_recovers_the_moments(method, steps):
    q = GaussianMixture([[-2.0, 0.0], [1.0, 1.5]], [0.4, 0.6], [0.4, 0.6])
    s = sample_teacher(q.denoise, 4000, 2, steps, torch.Generator().manual_seed(0), sigma_max=20.0,
                       method=method, dtype=torch.float64)
    # Monte-Carlo standard errors: about 0.025 for the means, 0.05 for the covariances
    assert torch.allclose(s.mean(0), q.mean(), atol=0.1)
    assert torch.allclose(torch.cov(s.T), q.covariance(), atol=0.25)


def test_one_step_is_the_denoiser_and_evaluation_count():
    q = GaussianMixture.ring()
    calls = []

    def d(x, s):
        calls.append(1)
        return q.denoise(x, s)

    x = 10 * torch.randn(5, 2, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    out = pf_ode_sample(d, x, karras_sigmas(1, 0.002, 10.0), "heun")
    assert torch.allclose(out, q.denoise(x, 10.0)) and len(calls) == 1
    calls.clear()
    pf_ode_sample(d, x, karras_sigmas(6, 0.002, 10.0), "heun")
    assert len(calls) == n_evaluations(6, "heun") == 11


def test_bad_grid_and_method():
    q = GaussianMixture.ring()
    x = torch.zeros(2, 2, dtype=torch.float64)
    with pytest.raises(ValueError, match="ending in 0"):
        pf_ode_sample(q.denoise, x, torch.tensor([2.0, 1.0]))
    with pytest.raises(ValueError, match="unknown method"):
        pf_ode_sample(q.denoise, x, karras_sigmas(2), "rk4")
