import numpy as np
import pytest
import torch

from reprobook.data.sprite_images import keypoints, render, sample_drags
from reprobook.models.diffusion.ddim import EpsFromDenoiser, ddim_timesteps, linear_alphas_cumprod
from reprobook.models.diffusion.drag import (RandomFeatures, drag_edit, edit_mask, editing_energy, locate,
                                             patch_at, quality_energy, reason_intentions, semantic_energy)
from reprobook.vision.sprite_critics import SmallCNN


def _task(n=4, seed=0):
    p, g = sample_drags(n, 16, np.random.default_rng(seed))
    return p, g, render(p, 16)


def test_patch_at_reads_pixels_and_locate_finds_a_shifted_patch():
    x = torch.arange(2 * 16 * 16, dtype=torch.float32).reshape(2, 1, 16, 16)
    c = torch.tensor([[3.0, 5.0], [10.0, 2.0]])
    assert torch.equal(patch_at(x, c, 0)[:, 0, 0, 0], x[[0, 1], 0, [5, 2], [3, 10]])
    p, g, img = _task()
    h = torch.tensor(keypoints(p)[:, 0], dtype=torch.float32)
    found = locate(img, patch_at(img, torch.round(h), 2))
    assert (found - torch.round(h)).abs().max() <= 1


def test_each_guidance_step_lowers_its_energy():
    p, g, src = _task()
    phi = RandomFeatures(3, 8, seed=0)
    h = torch.tensor(keypoints(p)[:, 0], dtype=torch.float32)
    tgt = torch.tensor(g, dtype=torch.float32)
    ints = reason_intentions(p, g, 16)
    mask = edit_mask(p, ints, 16)
    disc = SmallCNN(3, 1, 8, noise_cond=True)
    ac = linear_alphas_cumprod(1000)
    x0 = src.clone()
    energies = [editing_energy(phi, src, h, tgt, mask),
                semantic_energy(phi, src, torch.tensor(keypoints(p), dtype=torch.float32),
                                torch.tensor(ints[1].keypoints, dtype=torch.float32)),
                quality_energy(disc, ac)]
    for e in energies:
        x = x0.clone().requires_grad_(True)
        val = e(x, x, 500)      # the energy of x (as x_t and as x0_hat)
        gr, = torch.autograd.grad(val.sum(), x)
        after = e(x0 - 1e-2 * gr / gr.flatten(1).norm(dim=1).clamp_min(1e-12)[:, None, None, None], x0 - 1e-2 * gr / gr.flatten(1).norm(dim=1).clamp_min(1e-12)[:, None, None, None], 500)
        assert (after <= val.detach() + 1e-7).all()
    # the editing energy is zero when the target is the handle and nothing outside the mask moved
    assert editing_energy(phi, src, h, h, mask)(src, src, 0).abs().max() < 1e-6


def test_edit_mask_covers_source_and_every_outcome_and_reasoner_is_valid():
    p, g, src = _task(6, 1)
    ints = reason_intentions(p, g, 16)
    assert [i.name for i in ints] == ["translate", "pivot", "spin"] and all(i.valid.all() for i in ints)
    m = edit_mask(p, ints, 16)
    for it in ints:
        kp = np.round(it.keypoints).astype(int)
        assert (m[np.arange(6), kp[:, 0, 1], kp[:, 0, 0]] == 1).all()


def test_drag_edit_without_guidance_is_inversion_plus_sampling():
    p, g, src = _task(2, 2)
    ac = linear_alphas_cumprod(1000)
    eps = EpsFromDenoiser(lambda x, s: src.expand_as(x), ac)   # a point-mass denoiser: exact reconstruction
    out = drag_edit(eps, ac, src, ddim_timesteps(1000, 8, 0.6), [])
    assert torch.allclose(out, src, atol=1e-5)


def test_bad_inputs():
    with pytest.raises(ValueError, match="centres"):
        patch_at(torch.zeros(2, 1, 8, 8), torch.zeros(3, 2))
    with pytest.raises(ValueError, match="odd"):
        locate(torch.zeros(1, 1, 8, 8), torch.zeros(1, 1, 2, 2))
    with pytest.raises(ValueError, match="mask"):
        editing_energy(RandomFeatures(), torch.zeros(1, 3, 8, 8), torch.zeros(1, 2), torch.zeros(1, 2),
                       torch.zeros(2, 8, 8))
