import pytest
import torch
from diffusers import DDIMInverseScheduler, DDIMScheduler

from reprobook.models.diffusion.ddim import (EpsFromDenoiser, ddim_invert, ddim_invert_step, ddim_sample,
                                             ddim_step, ddim_timesteps, linear_alphas_cumprod)


def _sched(cls, n):
    s = cls(num_train_timesteps=1000, beta_start=1e-4, beta_end=0.02, beta_schedule="linear",
            clip_sample=False, set_alpha_to_one=True, timestep_spacing="leading", steps_offset=0)
    s.set_timesteps(n)
    return s


def test_schedule_and_timesteps_match_diffusers():
    s = _sched(DDIMScheduler, 20)
    ac = linear_alphas_cumprod(1000)
    assert torch.allclose(ac.float(), s.alphas_cumprod, atol=1e-6)
    assert ddim_timesteps(1000, 20) == s.timesteps.tolist()
    assert ddim_timesteps(1000, 20, 0.6) == s.timesteps.tolist()[-12:]


@pytest.mark.parametrize("eta", [0.0, 0.7])
def test_ddim_step_matches_diffusers(eta):
    s = _sched(DDIMScheduler, 10)
    ac = s.alphas_cumprod.double()
    g = torch.Generator().manual_seed(0)
    x, eps, z = (torch.randn(2, 3, 4, 4, generator=g, dtype=torch.float64) for _ in range(3))
    for t in s.timesteps.tolist():
        prev = t - 100
        ref = s.step(eps, t, x, eta=eta, variance_noise=z).prev_sample
        ours, _ = ddim_step(x, eps, float(ac[t]), float(ac[prev]) if prev >= 0 else 1.0, eta, z)
        assert torch.allclose(ours, ref, atol=1e-5), t


def test_inversion_step_matches_diffusers():
    s = _sched(DDIMInverseScheduler, 10)
    ac = s.alphas_cumprod.double()
    g = torch.Generator().manual_seed(1)
    x, eps = torch.randn(2, 3, 4, 4, generator=g, dtype=torch.float64), torch.randn(2, 3, 4, 4, generator=g,
                                                                                       dtype=torch.float64)
    for t in s.timesteps.tolist()[1:]:       # from t - 100 to t
        ref = s.step(eps, t, x).prev_sample
        ours = ddim_invert_step(x, eps, float(ac[t - 100]), float(ac[t]))
        assert torch.allclose(ours, ref, atol=1e-6), t


class _Exact:
    """The exact denoiser of a point mass at x* (D = x* at every level): DDIM is then exact."""

    def __init__(self, target):
        self.target = target

    def __call__(self, x, sigma):
        return self.target.expand_as(x)


def test_inversion_then_sampling_returns_the_image_and_guidance_moves_it():
    ac = linear_alphas_cumprod(1000)
    x0 = torch.randn(1, 3, 8, 8, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    eps = EpsFromDenoiser(_Exact(x0), ac)
    ts = ddim_timesteps(1000, 10, 0.6)
    lat = ddim_invert(eps, x0, ts, ac)
    assert torch.allclose(ddim_sample(eps, lat, ts, ac), x0, atol=1e-8)
    # an energy pulling x0_hat towards zero: guided samples shrink, and a zero scale changes nothing
    energy = lambda xt, x0h, t: (x0h ** 2).sum((1, 2, 3))   # noqa: E731
    assert torch.equal(ddim_sample(eps, lat, ts, ac, energies=[(energy, 0.0)]), ddim_sample(eps, lat, ts, ac))
    # a denoiser that depends on x so the energy's gradient flows: D(x, s) = x / (1 + s^2) (Gaussian data)
    eps_g = EpsFromDenoiser(lambda x, s: x / (1 + s[:, None, None, None] ** 2), ac)
    lat_g = ddim_invert(eps_g, x0, ts, ac)
    plain = ddim_sample(eps_g, lat_g, ts, ac)
    guided = ddim_sample(eps_g, lat_g, ts, ac, energies=[(energy, 0.5)])
    assert guided.norm() < plain.norm()


def test_bad_inputs():
    with pytest.raises(ValueError, match="towards the data"):
        ddim_step(torch.zeros(2), torch.zeros(2), 0.9, 0.5)
    with pytest.raises(ValueError, match="needs noise"):
        ddim_step(torch.zeros(2), torch.zeros(2), 0.5, 0.9, eta=1.0)
    with pytest.raises(ValueError, match="descending"):
        ddim_sample(lambda x, t: x, torch.zeros(1, 1), [0, 100], linear_alphas_cumprod(1000))
    with pytest.raises(ValueError, match="strength"):
        ddim_timesteps(1000, 10, 0.0)
