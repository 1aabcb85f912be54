"""Tests of reprobook.render.voxel_field: gradients, an analytic slab, cameras and warping."""
import math

import pytest
import torch

from reprobook.render.voxel_field import (camera_rays, intrinsics, orbit_cameras, render,
                                          render_rays, sample_field, voxel_coords, warp)


def test_sample_field_reproduces_voxels_and_is_linear_between():
    R = 5
    g = torch.rand(1, 4, R, R, R, dtype=torch.float64)
    X = voxel_coords(R, torch.float64)
    vals = sample_field(g, X.reshape(1, -1, 1, 3))[:, :, 0]          # at the voxel centres
    assert torch.allclose(vals, g.reshape(1, 4, -1).transpose(1, 2), atol=1e-12)
    # halfway between two x-neighbours: their mean
    p = (X[2, 3, 1] + X[2, 3, 2]) / 2
    v = sample_field(g, p.reshape(1, 1, 1, 3))[0, 0, 0]
    assert torch.allclose(v, (g[0, :, 2, 3, 1] + g[0, :, 2, 3, 2]) / 2, atol=1e-12)


def test_beyond_one_voxel_outside_the_cube_is_empty():
    g = torch.ones(1, 4, 4, 4, 4)                      # voxel spacing 2/3
    v = sample_field(g, torch.tensor([[[[1.7, 0.0, 0.0], [1.0 + 1 / 3, 0.0, 0.0]]]]))
    assert torch.all(v[0, 0, 0] == 0) and torch.allclose(v[0, 0, 1], torch.full((4,), 0.5))


def test_constant_slab_matches_the_analytic_render():
    # density s on the voxel layers iz in [k0, k1], zero elsewhere; a vertical ray through it sees
    # a trapezoid of density (linear ramps of one voxel at each side), optical depth
    # s * (z_k1 - z_k0 + h), and colour c over a white background
    R, s, k0, k1 = 11, 3.0, 3, 6
    h = 2 / (R - 1)
    c = torch.tensor([0.2, 0.5, 0.9], dtype=torch.float64)
    g = torch.zeros(1, 4, R, R, R, dtype=torch.float64)
    g[0, 0, k0:k1 + 1] = s
    g[0, 1:] = c[:, None, None, None]          # colour everywhere: only the density is a slab
    o = torch.tensor([[[0.1, -0.2, 3.0]]], dtype=torch.float64)
    d = torch.tensor([[[0.0, 0.0, -1.0]]], dtype=torch.float64)
    out = render_rays(g, o, d, n_samples=2000)
    tau = s * ((k1 - k0) * h + h)
    assert out["opacity"].item() == pytest.approx(1 - math.exp(-tau), abs=1e-5)
    expect = c * (1 - math.exp(-tau)) + math.exp(-tau)
    assert torch.allclose(out["rgb"][0, 0], expect, atol=1e-5)
    # a horizontal ray inside the slab crosses the whole cube at constant density
    o2 = torch.tensor([[[-3.0, 0.0, -1 + (k0 + 1.5) * h]]], dtype=torch.float64)
    d2 = torch.tensor([[[1.0, 0.0, 0.0]]], dtype=torch.float64)
    out2 = render_rays(g, o2, d2, n_samples=64)
    assert out2["opacity"].item() == pytest.approx(1 - math.exp(-2 * s), abs=1e-10)
    # expected distance of an opaque wall: where the ray enters it
    g3 = torch.zeros(1, 4, R, R, R, dtype=torch.float64)
    g3[0, 0] = 1e4
    out3 = render_rays(g3, o2, d2, n_samples=4000)
    assert out3["t"].item() == pytest.approx(2.0, abs=1e-3)


def test_gradients_match_finite_differences():
    gen = torch.Generator().manual_seed(0)
    R = 4
    g = (torch.rand(1, 4, R, R, R, generator=gen, dtype=torch.float64) * 2).requires_grad_(True)
    o = torch.tensor([[[2.5, 0.3, 0.2], [0.1, 2.5, -0.3], [-0.2, 0.1, 2.5]]], dtype=torch.float64)
    d = -o / o.norm(dim=-1, keepdim=True) + 0.05
    d = d / d.norm(dim=-1, keepdim=True)
    f = lambda x: torch.cat([v.reshape(-1) for v in render_rays(x, o, d, 7).values()])
    assert torch.autograd.gradcheck(f, (g,), eps=1e-6, atol=1e-6)


def test_cameras_look_at_the_target_and_depth_is_along_the_axis():
    c2w = orbit_cameras([0.0, 90.0], radius=3.0, elevation_deg=30.0, dtype=torch.float64)
    K = intrinsics(9, 9, 50.0, torch.float64)
    o, d, cos = camera_rays(c2w, K, 9, 9)
    centre = d[:, 4, 4]
    assert torch.allclose(centre, -c2w[:, :3, 3] / 3.0, atol=1e-12)      # through the origin
    assert torch.allclose(cos[:, 4, 4], torch.ones(2, dtype=torch.float64))
    assert torch.allclose(c2w[:, :3, 3].norm(dim=-1), torch.full((2,), 3.0, dtype=torch.float64))
    # an opaque cube: the centre pixel's z-depth is the distance to where the density starts to
    # rise, one voxel (0.1) outside the face at 0.5
    g = torch.zeros(4, 21, 21, 21, dtype=torch.float64)
    g[0, 5:16, 5:16, 5:16] = 1e4
    c = orbit_cameras([0.0], radius=3.0, elevation_deg=0.0, dtype=torch.float64)
    out = render(g, c, K, 9, 9, n_samples=3000)
    assert out["depth"][0, 0, 4, 4].item() == pytest.approx(3.0 - 0.6, abs=0.01)


def test_warp_is_identity_for_the_same_camera_and_agrees_with_kornia():
    kornia = pytest.importorskip("kornia")
    gen = torch.Generator().manual_seed(1)
    H = W = 12
    K = intrinsics(H, W, 45.0, torch.float64)
    c2w = orbit_cameras([10.0, 25.0], 3.0, 20.0, dtype=torch.float64)
    img = torch.rand(2, 3, H, W, generator=gen, dtype=torch.float64)
    depth = 2.5 + 0.3 * torch.rand(2, 1, H, W, generator=gen, dtype=torch.float64)
    same, ok = warp(img, depth, c2w, c2w, K, depth_src=depth)
    assert ok.all() and torch.allclose(same, img, atol=1e-10)
    # kornia's warp_frame_depth puts pixel centres at integer coordinates: shift the principal point
    out, ok = warp(img[:1], depth[1:], c2w[:1], c2w[1:], K)
    Kk = K.clone()
    Kk[0, 2] -= 0.5
    Kk[1, 2] -= 0.5
    src_T_dst = torch.linalg.inv(c2w[:1]) @ c2w[1:]
    ref = kornia.geometry.depth.warp_frame_depth(img[:1], depth[1:], src_T_dst, Kk[None])
    inner = ok.clone()
    inner[..., :1, :] = inner[..., -1:, :] = inner[..., :, :1] = inner[..., :, -1:] = False
    sel = inner.expand_as(out)
    assert sel.sum() > 20
    assert torch.allclose(out[sel], ref[sel], atol=1e-6)


def test_occluded_points_are_not_covisible():
    H = W = 8
    K = intrinsics(H, W, 45.0, torch.float64)
    c2w = orbit_cameras([0.0, 20.0], 3.0, 0.0, dtype=torch.float64)
    img = torch.rand(1, 3, H, W, dtype=torch.float64)
    d = torch.full((1, 1, H, W), 3.0, dtype=torch.float64)
    _, ok_far = warp(img, d, c2w[:1], c2w[1:], K, depth_src=d * 0.5)   # source sees something nearer
    assert not ok_far.any()


def test_bad_shapes_raise():
    with pytest.raises(ValueError, match="grid must be"):
        render_rays(torch.zeros(1, 3, 4, 4, 4), torch.zeros(1, 2, 3), torch.ones(1, 2, 3), 4)
    with pytest.raises(ValueError, match="fov_deg"):
        intrinsics(4, 4, 190.0)
    with pytest.raises(ValueError, match="batch of 2 fields"):
        render(torch.zeros(2, 4, 4, 4, 4), orbit_cameras([0, 1, 2], 3.0, 0.0), intrinsics(4, 4, 40.0),
               4, 4, 4)
