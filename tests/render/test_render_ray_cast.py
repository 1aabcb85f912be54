import math

import pytest
import torch

from reprobook.render.ray_cast import (Room, cast, direction_to_equirect, equirect_directions,
                                       equirect_to_direction, pinhole_directions, project_pinhole,
                                       random_room, random_walk, render_equirect, render_pinhole,
                                       rotation)


def flat_room(boxes=None, colors=None):
    """A 8 x 3 x 6 m room whose six faces are constant colours (face f has colour f/10, f/10, 1)."""
    tex = torch.stack([torch.tensor([f / 10, f / 10, 1.0]).view(3, 1, 1).expand(3, 4, 4) for f in range(6)])
    b = torch.zeros(0, 2, 3) if boxes is None else torch.as_tensor(boxes, dtype=torch.float32)
    c = torch.zeros(0, 3) if colors is None else torch.as_tensor(colors, dtype=torch.float32)
    return Room(4.0, 3.0, 3.0, tex, b, c)


def test_rotation_is_orthonormal_and_forward_matches_convention():
    yaw, pitch = torch.tensor([0.3, -2.0, 1.1]), torch.tensor([0.2, -0.4, 0.0])
    R = rotation(yaw, pitch)
    eye = torch.eye(3).expand(3, 3, 3)
    assert torch.allclose(R.transpose(-1, -2) @ R, eye, atol=1e-6)
    fwd = torch.stack([torch.cos(pitch) * torch.sin(yaw), torch.sin(pitch), torch.cos(pitch) * torch.cos(yaw)], -1)
    assert torch.allclose(R[..., :, 2], fwd, atol=1e-6)


def test_known_points_project_where_the_pinhole_model_says():
    S, fov = 32, math.pi / 2
    c = torch.tensor([0.5, 1.5, -0.2])
    # straight ahead -> image centre; at the edge of the field of view -> the image border
    for yaw, pitch in [(0.0, 0.0), (0.7, 0.2), (-2.5, -0.3)]:
        R = rotation(yaw, pitch)
        ahead = c + 2.0 * R[:, 2]
        edge = c + 2.0 * (R[:, 2] + math.tan(fov / 2) * R[:, 0])     # right border, middle row
        up = c + 2.0 * (R[:, 2] + 0.5 * math.tan(fov / 2) * R[:, 1])  # a quarter of the height up
        r, col, z = project_pinhole(torch.stack([ahead, edge, up]), c, yaw, pitch, S, fov)
        assert torch.allclose(z, torch.full((3,), 2.0), atol=1e-5)
        assert torch.allclose(torch.stack([r, col], 1),
                              torch.tensor([[16.0, 16.0], [16.0, 32.0], [8.0, 16.0]]), atol=1e-4)


def test_cast_hit_points_reproject_to_their_pixel_centres():
    room = random_room(torch.Generator().manual_seed(3))
    pos, _ = random_walk(room, 1, torch.Generator().manual_seed(4))
    S, fov, yaw, pitch = 16, math.radians(80), 0.9, -0.1
    _, depth = render_pinhole(room, pos[0], yaw, pitch, S, fov)
    d = pinhole_directions(S, fov)[:, :, 0] @ rotation(yaw, pitch).T
    P = pos[0] + depth[..., None] * d
    r, col, _ = project_pinhole(P, pos[0], yaw, pitch, S, fov)
    ii, jj = torch.meshgrid(torch.arange(S) + 0.5, torch.arange(S) + 0.5, indexing="ij")
    assert torch.allclose(r, ii, atol=1e-3) and torch.allclose(col, jj, atol=1e-3)


def test_equirect_direction_round_trip_and_anchors():
    g = torch.Generator().manual_seed(0)
    d = torch.randn(500, 3, generator=g)
    d = d / d.norm(dim=1, keepdim=True)
    u, v = direction_to_equirect(d, 64)
    assert torch.allclose(equirect_to_direction(u, v, 64), d, atol=1e-5)
    # pixel centres survive the round trip
    dirs = equirect_directions(32)[:, :, 0]
    u, v = direction_to_equirect(dirs, 32)
    jj, ii = torch.meshgrid(torch.arange(64) + 0.5, torch.arange(32) + 0.5, indexing="xy")
    assert torch.allclose(v, ii, atol=1e-3)
    assert torch.allclose(u, jj, atol=1e-3)
    # +z is the panorama's centre, +x a quarter turn right, straight up the top row
    u, v = direction_to_equirect(torch.tensor([[0.0, 0, 1], [1.0, 0, 0], [0.0, 1, 0]]), 32)
    assert torch.allclose(u[:2], torch.tensor([32.0, 48.0]), atol=1e-4)
    assert torch.allclose(v, torch.tensor([16.0, 16.0, 0.0]), atol=1e-4)


def test_depth_and_colour_of_walls_and_boxes():
    room = flat_room()
    c = torch.tensor([0.0, 1.5, 0.0])
    rgb, depth = cast(room, c, torch.tensor([[0.0, 0, 1], [-1.0, 0, 0], [0.0, -1, 0]]))
    assert torch.allclose(depth, torch.tensor([3.0, 4.0, 1.5]), atol=1e-5)
    assert torch.allclose(rgb[:, 0], torch.tensor([0.5, 0.0, 0.2]), atol=1e-5)   # faces 5, 0, 2
    boxed = flat_room([[[-0.5, 0.0, 1.0], [0.5, 2.0, 2.0]]], [[1.0, 0.0, 0.0]])
    rgb, depth = cast(boxed, c, torch.tensor([[0.0, 0, 1], [0.0, 0, -1]]))
    assert torch.allclose(depth, torch.tensor([1.0, 3.0]), atol=1e-5)
    assert rgb[0, 0] > 0.5 and rgb[0, 1] == 0      # the red box, shaded; behind: the wall


def test_equirect_and_pinhole_renders_agree_at_the_optical_axis():
    room = random_room(torch.Generator().manual_seed(1))
    pos, _ = random_walk(room, 1, torch.Generator().manual_seed(2))
    _, dpano = render_equirect(room, pos[0], 32)
    _, dpin = render_pinhole(room, pos[0], 0.0, 0.0, 2, math.radians(1.0))
    # the 2x2 pinhole at a 1-degree field of view and the pano's centre pixels look along ~ +z
    assert abs(float(dpin.mean()) - float(dpano[15:17, 31:33].mean())) < 0.15 * float(dpin.mean())


def test_random_walk_stays_in_free_space_and_bad_input_raises():
    room = random_room(torch.Generator().manual_seed(5))
    pos, head = random_walk(room, 30, torch.Generator().manual_seed(6))
    assert bool(room.free(pos, margin=0.39).all())
    steps = (pos[1:] - pos[:-1]).norm(dim=1)
    assert bool(((steps - 0.15).abs() < 1e-5).all() | (steps < 1e-6).any())
    with pytest.raises(ValueError, match="fov"):
        pinhole_directions(8, 4.0)
    with pytest.raises(ValueError, match="last axis"):
        direction_to_equirect(torch.zeros(4, 2), 8)
    with pytest.raises(ValueError, match="ss"):
        equirect_directions(8, ss=0)


def test_equirect_yaw_turns_the_frame_with_its_carrier():
    room = random_room(torch.Generator().manual_seed(7))
    pos, _ = random_walk(room, 1, torch.Generator().manual_seed(8))
    a, da = render_equirect(room, pos[0], 24)
    b, db = render_equirect(room, pos[0], 24, yaw=math.pi / 2)     # a quarter turn = 12 columns
    assert torch.allclose(b, a.roll(-12, dims=-1), atol=1e-4)
    assert torch.allclose(db, da.roll(-12, dims=-1), atol=1e-4)
