import math

import pytest
import torch

from reprobook.render.ray_cast import random_room, random_walk, render_equirect, render_pinhole
from reprobook.vision.equirect import (PairSet, correspondences, heading_search, ncc,
                                       perspective_from_equirect, relative_pose, select_pairs, wrap)


@pytest.fixture(scope="module")
def scene():
    room = random_room(torch.Generator().manual_seed(0))
    pos, _ = random_walk(room, 2, torch.Generator().manual_seed(1))
    return room, pos


def _psnr(a, b):
    return float(10 * torch.log10(1 / ((a - b) ** 2).mean()))


POSES = [(0.0, 0.0), (math.pi, 0.0), (-2.9, 0.25), (1.3, -0.4), (2.2, 0.5)]   # two cross the seam


def test_resampled_equirect_equals_direct_pinhole_render(scene):
    room, pos = scene
    low, _ = render_equirect(room, pos[0], 48)
    high, _ = render_equirect(room, pos[0], 128)
    errs_low, errs_high = [], []
    for yaw, pitch in POSES:
        direct, _ = render_pinhole(room, pos[0], yaw, pitch, 24, math.pi / 2, ss=3)
        errs_high.append(_psnr(perspective_from_equirect(high, yaw, pitch, math.pi / 2, 24, ss=2), direct))
        errs_low.append(_psnr(perspective_from_equirect(low, yaw, pitch, math.pi / 2, 24, ss=2), direct))
    assert min(errs_high) > 30.0, errs_high
    # interpolation error: shrinks as the panorama gets finer
    assert sum(errs_high) / 5 > sum(errs_low) / 5 + 2.0, (errs_low, errs_high)


def test_seam_wraps_around(scene):
    room, pos = scene
    pano, _ = render_equirect(room, pos[0], 64)
    a = perspective_from_equirect(pano, math.pi, 0.0, math.pi / 2, 16)
    b = perspective_from_equirect(pano.roll(64, dims=-1), 0.0, 0.0, math.pi / 2, 16)
    assert torch.allclose(a, b, atol=1e-5)          # rolling the pano half a turn = turning 180°
    with pytest.raises(ValueError, match="2 x height"):
        perspective_from_equirect(torch.zeros(3, 8, 8), 0.0)
    with pytest.raises(ValueError, match="mode"):
        perspective_from_equirect(pano, 0.0, mode="bicubic")


def test_correspondences_identity_and_half_turn_overlap(scene):
    room, pos = scene
    S, fov = 16, math.pi / 2
    _, da = render_pinhole(room, pos[0], 0.4, 0.0, S, fov)
    row, col, ok = correspondences(da, pos[0], 0.4, 0.0, pos[0], 0.4, 0.0, da, fov)
    ii, jj = torch.meshgrid(torch.arange(S) + 0.5, torch.arange(S) + 0.5, indexing="ij")
    assert bool(ok.all()) and torch.allclose(row, ii, atol=1e-3) and torch.allclose(col, jj, atol=1e-3)
    # turning right by half the field of view about the camera centre keeps (only) A's right half
    _, db = render_pinhole(room, pos[0], 0.4 + fov / 2, 0.0, S, fov)
    _, _, ok = correspondences(da, pos[0], 0.4, 0.0, pos[0], 0.4 + fov / 2, 0.0, db, fov)
    assert bool(ok[4:12, S // 2:].all()) and not bool(ok[:, :S // 2].any())   # corners leave the frame


def test_correspondences_detect_occlusion():
    from reprobook.render.ray_cast import Room
    tex = torch.rand(6, 3, 4, 4, generator=torch.Generator().manual_seed(0))
    box = torch.tensor([[[-0.3, 0.0, 1.0], [0.3, 3.0, 1.4]]])       # a pillar between the cameras' views
    room = Room(4.0, 3.0, 4.0, tex, box, torch.ones(1, 3))
    a, b = torch.tensor([1.5, 1.5, 0.0]), torch.tensor([-1.5, 1.5, 0.0])
    S = 16
    _, da = render_pinhole(room, a, -0.5, 0.0, S, math.pi / 2)
    _, db = render_pinhole(room, b, 0.5, 0.0, S, math.pi / 2)
    _, _, with_b = correspondences(da, a, -0.5, 0.0, b, 0.5, 0.0, db)
    _, _, no_test = correspondences(da, a, -0.5, 0.0, b, 0.5, 0.0, torch.full_like(db, 1e9), tol=1e12)
    assert int(no_test.sum()) > int(with_b.sum())                    # some matches are occluded


def test_heading_search_recovers_a_pure_rotation(scene):
    room, pos = scene
    pano, _ = render_equirect(room, pos[0], 48)
    turned = pano.roll(-24, dims=-1)          # a quarter turn (96 columns = 360°): content at yaw y moves to y - 90°
    best, scores, yaws = heading_search(pano, 0.3, turned, n_yaws=72, size=16)
    assert abs(float(wrap(torch.tensor(best - (0.3 - math.pi / 2))))) <= math.radians(5.01)
    assert scores.shape == (72,) and float(scores.max()) > 0.95
    assert float(ncc(pano[None], pano[None])) == pytest.approx(1.0, abs=1e-5)


def test_relative_pose():
    z = relative_pose(torch.zeros(3), 0.3, 0.0, torch.zeros(3), 0.3, 0.0)
    assert torch.allclose(z, torch.tensor([0.0, 1, 0, 0, 0, 0]), atol=1e-6)
    # facing +x and stepping 2 m along +x: straight ahead in A's frame
    z = relative_pose(torch.zeros(3), math.pi / 2, 0.0, torch.tensor([2.0, 0, 0]), math.pi / 2 + 0.5, 0.0)
    assert torch.allclose(z, torch.tensor([math.sin(0.5), math.cos(0.5), 0, 0, 0, 2.0]), atol=1e-5)


def test_select_pairs_stratifies_by_turn_and_filters_overlap():
    g = torch.Generator().manual_seed(0)
    n = 400
    turn = torch.cat([torch.full((300,), 0.1), torch.full((60,), 0.5), torch.full((40,), 1.2)])
    ov = torch.ones(n)
    ov[:10] = 0.0
    ps = PairSet(torch.zeros(n, 3, 2, 2), torch.zeros(n, 3, 2, 2), torch.zeros(n, 6), turn, ov,
                 torch.ones(n, dtype=torch.long))
    sel = select_pairs(ps, 120, g, min_overlap=0.2, bins=[0.0, 0.3, 1.0, 2.0])
    counts = torch.bincount(torch.bucketize(sel.turn, torch.tensor([0.3, 1.0]), right=True))
    assert counts.tolist() == [40, 40, 40]
    assert bool((sel.overlap >= 0.2).all())
    sel = select_pairs(ps, 200, g, bins=[0.0, 0.3, 1.0, 2.0])      # small bins are exhausted first
    counts = torch.bincount(torch.bucketize(sel.turn, torch.tensor([0.3, 1.0]), right=True))
    assert counts.tolist() == [100, 60, 40]
    with pytest.raises(ValueError, match="overlap"):
        select_pairs(ps, 395, g)
