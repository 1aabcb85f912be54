"""Schedules: VP identities and derivatives against autograd, the EDM grid, the diffusers anchor."""
import pytest
import torch

from reprobook.models.diffusion.schedules import (VESchedule, VPSchedule, karras_sigmas,
                                                  log_uniform_sigmas)


def test_vp_is_variance_preserving_and_derivatives_match_autograd():
    s = VPSchedule()
    t = torch.linspace(0.01, 1.0, 17, dtype=torch.float64, requires_grad=True)
    assert torch.allclose(s.alpha(t) ** 2 + s.sigma(t) ** 2, torch.ones_like(t))
    (da,) = torch.autograd.grad(s.alpha(t).sum(), t)
    (ds,) = torch.autograd.grad(s.sigma(t).sum(), t)
    assert torch.allclose(da, s.d_alpha(t), atol=1e-10)
    assert torch.allclose(ds, s.d_sigma(t), atol=1e-8)
    assert torch.all(torch.diff(s.ve_sigma(t.detach())) > 0)


def test_ve_schedule():
    s = VESchedule()
    t = torch.tensor([0.5, 2.0], dtype=torch.float64)
    assert torch.equal(s.sigma(t), t) and torch.equal(s.alpha(t), torch.ones(2, dtype=torch.float64))
    assert torch.equal(s.d_sigma(t), torch.ones(2, dtype=torch.float64))


def test_karras_grid():
    g = karras_sigmas(18, 0.002, 80.0, 7.0)
    assert len(g) == 19 and g[-1] == 0
    assert abs(float(g[0]) - 80.0) < 1e-9 and abs(float(g[-2]) - 0.002) < 1e-12
    assert torch.all(torch.diff(g) < 0)
    assert torch.equal(karras_sigmas(1, 0.002, 10.0), torch.tensor([10.0, 0.0], dtype=torch.float64))
    with pytest.raises(ValueError, match="n_steps"):
        karras_sigmas(0)
    with pytest.raises(ValueError, match="sigma_min"):
        karras_sigmas(4, 1.0, 0.5)


def test_log_uniform_sigmas_range_and_log_mean():
    s = log_uniform_sigmas(20000, 0.01, 10.0, torch.Generator().manual_seed(0), torch.float64)
    assert s.shape == (20000, 1) and s.min() >= 0.01 and s.max() <= 10.0
    assert abs(float(torch.log(s).mean()) - 0.5 * (torch.log(torch.tensor(0.01)) + torch.log(
        torch.tensor(10.0)))) < 0.05
    with pytest.raises(ValueError):
        log_uniform_sigmas(3, 0.0, 1.0, torch.Generator())


@pytest.mark.anchor
def test_karras_grid_against_diffusers_anchor():
    diffusers = pytest.importorskip("diffusers")
    sched = diffusers.EulerDiscreteScheduler(use_karras_sigmas=True)
    ours = karras_sigmas(10, 0.002, 80.0, 7.0)[:-1]
    theirs = torch.as_tensor(sched._convert_to_karras(torch.tensor([80.0, 0.002]), 10), dtype=torch.float64)
    assert torch.allclose(ours, theirs, rtol=1e-5)
