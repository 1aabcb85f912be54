"""Tests of reprobook.vision.inpaint_distill: the scene, the masks, the inpainter, distillation."""
import numpy as np
import pytest
import torch

from reprobook.render.voxel_field import intrinsics, orbit_cameras, render
from reprobook.vision.inpaint_distill import (ViewInpainter, bubble_mask, dilate, distill,
                                              inconsistency, region_psnr, silhouette,
                                              textured_scene)

R, H, S = 10, 12, 12


@pytest.fixture(scope="module")
def setup():
    sc = textured_scene(R, np.random.default_rng(0))
    K = intrinsics(H, H, 40.0)
    c2w = orbit_cameras([20, 45, 70], 3.2, 25.0, (0.0, 0.0, -0.35))
    free = bubble_mask(R, *sc["box"], 2 / (R - 1))
    mask = dilate(silhouette(sc["cube"][0] > 0, c2w, K, H, H, S), 1)
    foot = dilate(silhouette(free, c2w, K, H, H, S, threshold=0.01), 1) | mask
    ims = {k: render(sc[k], c2w, K, H, H, S) for k in ("original", "background")}
    return sc, K, c2w, free, mask, foot, ims


def test_scene_differs_only_where_the_objects_are(setup):
    sc, *_ = setup
    cube, sph = sc["cube"][0] > 0, sc["sphere"][0] > 0
    assert cube.any() and sph.any() and not (sph & ~cube).any()        # the sphere fits in the cube
    diff = (sc["original"] != sc["background"]).any(0)
    assert torch.equal(diff, cube)
    other = textured_scene(R, np.random.default_rng(1))
    assert not torch.equal(other["original"], sc["original"])          # replicates differ


def test_bubble_contains_the_object(setup):
    sc, _, _, free, *_ = setup
    assert not ((sc["cube"][0] > 0) & ~free).any()
    assert free.sum() < free.numel() / 4


def test_inpainter_keeps_the_view_outside_the_mask_and_varies_per_call(setup):
    _, _, _, _, mask, _, ims = setup
    gen = torch.Generator().manual_seed(0)
    inp = ViewInpainter(ims["background"]["rgb"], ims["original"]["rgb"], mask, 0.15, 0.05, 2, gen)
    a, b = inp(torch.arange(3), gen), inp(torch.arange(3), gen)
    out = ~mask.expand_as(a)
    assert torch.equal(a[out], ims["original"]["rgb"][out])
    assert not torch.equal(a, b)
    exact = ViewInpainter(ims["background"]["rgb"], ims["original"]["rgb"], mask, 0.0, 0.0, 0, gen)
    assert torch.equal(exact(torch.arange(3), gen)[~out], ims["background"]["rgb"].clamp(0, 1)[~out])
    with pytest.raises(ValueError, match="mask must be"):
        ViewInpainter(ims["background"]["rgb"], ims["original"]["rgb"], mask[:2], 0.1, 0.1, 1, gen)


def test_gradient_reaches_bubble_voxels_only_and_frozen_voxels_are_bit_identical(setup):
    sc, K, c2w, free, mask, foot, ims = setup
    gen = torch.Generator().manual_seed(0)
    inp = ViewInpainter(ims["background"]["rgb"], ims["original"]["rgb"], mask, 0.15, 0.05, 2, gen)
    for mode, base in (("erase", sc["original"]), ("replace", sc["background"])):
        out = distill(base, free, inp, c2w, K, H, H, S, foot, steps=3, lr=0.2, views_per_step=2,
                      gen=gen, mode=mode)
        assert torch.equal(out["grid"][:, ~free], base[:, ~free])
        assert not torch.equal(out["grid"][:, free], base[:, free])
    pv = distill(sc["original"], free, inp, c2w, K, H, H, S, foot, steps=2, lr=0.2,
                 views_per_step=1, gen=gen, per_view=True)
    assert pv["grid"].shape == (3,) + tuple(sc["original"].shape)
    assert torch.equal(pv["grid"][:, :, ~free], sc["original"][None, :, ~free].expand(3, -1, -1))
    # the gradient of a render with respect to the whole grid is zero off the bubble's reach
    g = sc["original"].clone().requires_grad_(True)
    img = render(torch.where(free, g, sc["original"]), c2w, K, H, H, S)["rgb"]
    (img * mask).sum().backward()
    assert g.grad[:, ~free].abs().max() == 0 and g.grad[:, free].abs().max() > 0


def test_erase_distillation_fits_the_background(setup):
    sc, K, c2w, free, mask, foot, ims = setup
    gen = torch.Generator().manual_seed(0)
    inp = ViewInpainter(ims["background"]["rgb"], ims["original"]["rgb"], mask, 0.0, 0.0, 0, gen)
    out = distill(sc["original"], free, inp, c2w, K, H, H, S, foot, steps=40, lr=0.2,
                  views_per_step=3, gen=gen)
    assert out["loss"][-1] < 0.2 * out["loss"][0]
    img = render(out["grid"], c2w, K, H, H, S)["rgb"]
    assert region_psnr(img, ims["background"]["rgb"], mask) > \
        region_psnr(ims["original"]["rgb"], ims["background"]["rgb"], mask) + 5


def test_inconsistency_is_small_for_renders_and_large_for_independent_noise(setup):
    _, K, c2w, _, mask, _, ims = setup
    bg = ims["background"]
    pairs = [(0, 1), (1, 2)]
    base = inconsistency(bg["rgb"], bg["depth"], c2w, K, mask, pairs)
    noisy = bg["rgb"] + 0.2 * torch.randn(bg["rgb"].shape, generator=torch.Generator().manual_seed(0))
    assert base < 0.06
    assert inconsistency(noisy, bg["depth"], c2w, K, mask, pairs) > base + 0.1


def test_region_psnr_and_errors():
    x = torch.zeros(1, 3, 4, 4)
    m = torch.ones(1, 1, 4, 4, dtype=torch.bool)
    assert region_psnr(x + 0.1, x, m) == pytest.approx(20.0)
    with pytest.raises(ValueError, match="empty region"):
        region_psnr(x, x, ~m)
    with pytest.raises(ValueError, match="unknown mode"):
        distill(torch.zeros(4, 4, 4, 4), torch.zeros(4, 4, 4, dtype=torch.bool), None,
                orbit_cameras([0], 3.0, 0.0), intrinsics(4, 4, 40.0), 4, 4, 4,
                torch.ones(1, 1, 4, 4, dtype=torch.bool), 1, 0.1, 1, torch.Generator(), mode="paint")
