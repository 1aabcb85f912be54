"""The orthographic Gaussian splatting renderer: closed forms, front-to-back compositing, view
consistency, and gradients against finite differences."""
import math

import numpy as np
import pytest
import torch

from reprobook.render.gaussian_splat import (orbit_rotation, orbit_views, pixel_grid, quat_to_rotmat,
                                             render, textured_sphere)

D = torch.float64
I3 = torch.eye(3, dtype=D)[None]


def _one(mean, scale, colour, opacity, quat=(1.0, 0.0, 0.0, 0.0)):
    return (torch.tensor([mean], dtype=D), torch.tensor([scale], dtype=D), torch.tensor([quat], dtype=D),
            torch.tensor([colour], dtype=D), torch.tensor([opacity], dtype=D))


def test_single_gaussian_matches_closed_form():
    size, ext, dil = 9, 1.0, 0.3
    m, s, q, c, o = _one([0.2, -0.1, 0.0], [0.3, 0.15, 0.5], [0.9, 0.4, 0.1], 0.7)
    img = render(m, s, q, c, o, I3, size, ext, background=(0.1, 0.2, 0.3), dilation=dil)
    pix = pixel_grid(size, ext)
    eps = dil * (2 * ext / size) ** 2
    var = torch.tensor([0.3 ** 2 + eps, 0.15 ** 2 + eps], dtype=D)
    a = 0.7 * torch.exp(-0.5 * (((pix - m[0, :2]) ** 2) / var).sum(1)).reshape(size, size)
    for ch, (col, bg) in enumerate(zip([0.9, 0.4, 0.1], [0.1, 0.2, 0.3])):
        torch.testing.assert_close(img[0, ch], col * a + bg * (1 - a), rtol=1e-12, atol=1e-12)


def test_front_to_back_compositing_and_depth_order():
    size = 5
    m1, s1, q1, c1, o1 = _one([0.0, 0.0, -1.0], [5.0, 5.0, 5.0], [1.0, 0.0, 0.0], 0.6)   # near, red
    m2, s2, q2, c2, o2 = _one([0.0, 0.0, 1.0], [5.0, 5.0, 5.0], [0.0, 1.0, 0.0], 0.5)    # far, green
    cat = lambda *t: torch.cat(t)  # noqa: E731
    args = (cat(m1, m2), cat(s1, s2), cat(q1, q2), cat(c1, c2), cat(o1, o2))
    img = render(*args, I3, size, 1.0, background=(0.0, 0.0, 1.0), dilation=0.0)
    # huge Gaussians: alpha is ~ the opacity at the centre pixel
    pix = pixel_grid(size, 1.0)[size * size // 2]
    a1 = 0.6 * math.exp(-0.5 * float((pix ** 2).sum()) / 25)
    a2 = 0.5 * math.exp(-0.5 * float((pix ** 2).sum()) / 25)
    centre = img[0, :, size // 2, size // 2]
    want = torch.tensor([a1, a2 * (1 - a1), (1 - a1) * (1 - a2)], dtype=D)
    torch.testing.assert_close(centre, want, rtol=1e-12, atol=1e-12)
    # turning the camera round (180 degrees about y) puts green in front
    back = render(*args, orbit_views([180], [0]), size, 1.0, background=(0.0, 0.0, 1.0), dilation=0.0)
    c = back[0, :, size // 2, size // 2]
    assert c[1] > c[0]
    torch.testing.assert_close(c, torch.tensor([a1 * (1 - a2), a2, (1 - a1) * (1 - a2)], dtype=D))
    # the order must not depend on the order of the input rows
    rev = tuple(t.flip(0) for t in args)
    torch.testing.assert_close(render(*rev, I3, size, 1.0, dilation=0.0), render(*args, I3, size, 1.0, dilation=0.0))


def test_rotating_scene_and_camera_together_changes_nothing():
    g = torch.Generator().manual_seed(1)
    n = 6
    m = torch.randn(n, 3, generator=g, dtype=D) * 0.4
    s = torch.rand(n, 3, generator=g, dtype=D) * 0.2 + 0.05
    q = torch.randn(n, 4, generator=g, dtype=D)
    c, o = torch.rand(n, 3, generator=g, dtype=D), torch.rand(n, generator=g, dtype=D) * 0.8
    rq = torch.tensor([0.8, 0.3, -0.4, 0.2], dtype=D)
    R = quat_to_rotmat(rq)
    # rotate the scene by R: means R m, Gaussian rotations R R(q)  (quaternion product rq * q)
    w1, x1, y1, z1 = (rq / rq.norm()).unbind()
    w2, x2, y2, z2 = q.unbind(-1)
    qq = torch.stack([w1 * w2 - x1 * x2 - y1 * y2 - z1 * z2, w1 * x2 + x1 * w2 + y1 * z2 - z1 * y2,
                      w1 * y2 - x1 * z2 + y1 * w2 + z1 * x2, w1 * z2 + x1 * y2 - y1 * x2 + z1 * w2], -1)
    view = orbit_views([30], [20])
    a = render(m, s, q, c, o, view, 12, 1.0)
    b = render(m @ R.T, s, qq, c, o, view @ R.T, 12, 1.0)
    torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-10)


def test_gradients_match_finite_differences():
    g = torch.Generator().manual_seed(0)
    n = 4
    m = (torch.randn(n, 3, generator=g, dtype=D) * 0.3).requires_grad_()
    s = (torch.rand(n, 3, generator=g, dtype=D) * 0.2 + 0.15).requires_grad_()
    q = torch.randn(n, 4, generator=g, dtype=D).requires_grad_()
    c = torch.rand(n, 3, generator=g, dtype=D).requires_grad_()
    o = (torch.rand(n, generator=g, dtype=D) * 0.5 + 0.2).requires_grad_()
    views = orbit_views([0, 70], [10, -20])
    f = lambda *p: render(*p, views, 6, 0.8, background=(0.2, 0.3, 0.4))  # noqa: E731
    assert torch.autograd.gradcheck(f, (m, s, q, c, o), eps=1e-6, atol=1e-6, rtol=1e-4)


def test_orbit_rotation_is_a_rotation_and_pixel_grid_is_centred():
    R = orbit_rotation(0.7, -0.3)
    torch.testing.assert_close(R @ R.T, torch.eye(3, dtype=D))
    assert abs(float(torch.linalg.det(R)) - 1) < 1e-12
    p = pixel_grid(4, 2.0)
    torch.testing.assert_close(p.mean(0), torch.zeros(2, dtype=D))
    assert p[0, 0] < 0 < p[0, 1]                       # first pixel: left, top


def test_textured_sphere_and_bad_input():
    photo = np.random.default_rng(0).random((20, 30, 3))
    sc = textured_sphere(50, 10, photo, generator=torch.Generator().manual_seed(0))
    assert sc["means"].shape == (60, 3) and sc["interior"].sum() == 10
    assert float(sc["colours"].min()) >= 0 and float(sc["colours"].max()) <= 1
    torch.testing.assert_close(sc["means"][:50].norm(dim=1).mean(), torch.tensor(1.0, dtype=D), atol=0.05, rtol=0)
    with pytest.raises(ValueError, match="photo"):
        textured_sphere(5, 0, photo[..., 0])
    m, s, q, c, o = _one([0.0, 0.0, 0.0], [0.1, 0.1, 0.1], [1.0, 1.0, 1.0], 0.5)
    with pytest.raises(ValueError, match="colours"):
        render(m, s, q, c[:, :2], o, I3, 4, 1.0)
    with pytest.raises(ValueError, match="views"):
        render(m, s, q, c, o, torch.eye(3, dtype=D), 4, 1.0)
    with pytest.raises(ValueError, match="size"):
        render(m, s, q, c, o, I3, 0, 1.0)
