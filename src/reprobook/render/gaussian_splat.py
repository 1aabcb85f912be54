r"""Differentiable orthographic splatting of 3-D Gaussians, in plain torch, plus a photo-textured
test scene.

A scene is ``N`` anisotropic Gaussians, each with a mean :math:`\mu_i\in\mathbb R^3`, scales
:math:`s_i\in\mathbb R^3_{>0}`, a rotation given by a quaternion :math:`q_i` (any norm; it is
normalised), an RGB colour :math:`c_i` and an opacity :math:`o_i\in[0,1]`. Its world covariance
is :math:`\Sigma_i = R(q_i)\,\mathrm{diag}(s_i^2)\,R(q_i)^\top`.

**Camera.** Orthographic: a view is a rotation :math:`R_v` (world to camera). In camera
coordinates :math:`x = R_v\mu` the image plane is :math:`(x_1, x_2)` and the depth is :math:`x_3`
(smaller is nearer). The image covers :math:`[-e, e]^2` (``extent`` :math:`e`) with pixel centres on
a regular grid; row 0 is the top (:math:`x_2 = +e`).

**Projection.** An orthographic camera is linear, so the projected footprint is exact, not the
EWA linearisation a pinhole camera needs: :math:`\mu_i' = (R_v\mu_i)_{1:2}` and
:math:`\Sigma_i' = P R_v \Sigma_i R_v^\top P^\top + \epsilon I_2` with :math:`P=[I_2\;0]`. The
dilation :math:`\epsilon` (``dilation``, in squared pixels, 0.3 as in 3DGS) keeps every splat at
least about a pixel wide, which is the anti-aliasing low-pass of the original rasteriser.

**Alpha and compositing.** At pixel centre :math:`p`,
:math:`\alpha_i(p) = \min\big(\alpha_{\max},\; o_i \exp(-\tfrac12 (p-\mu_i')^\top
\Sigma_i'^{-1}(p-\mu_i'))\big)` (``alpha_max`` = 0.99 as in 3DGS, so transmittance never reaches
exactly 0). The Gaussians are sorted by depth, nearest first, and composited front to back:

.. math:: C(p) = \sum_i c_i\,\alpha_i(p)\,T_i(p) + b\,T_{N+1}(p),\qquad
          T_i(p) = \prod_{j<i}\big(1-\alpha_j(p)\big),

with background colour :math:`b`. Unlike the tile rasteriser of 3DGS nothing is culled (every
Gaussian touches every pixel, cost :math:`O(V N H W)`) and the sort is per Gaussian, not per tile;
for the few hundred Gaussians and 32x32 images used here that is exact and cheap.

**Gradients.** Everything above is a composition of differentiable torch operations except the
depth order, a permutation that is piecewise constant in the means; autograd therefore gives the
exact gradient with respect to means, scales, rotations, colours and opacities wherever no two
depths tie (``tests/render/test_gaussian_splat.py`` checks it against finite differences in
float64, and a render against the closed form of a single Gaussian and of two stacked ones).
"""
from __future__ import annotations

import math

import numpy as np
import torch

__all__ = ["quat_to_rotmat", "orbit_rotation", "orbit_views", "pixel_grid", "project", "render",
           "textured_sphere"]


def quat_to_rotmat(q: torch.Tensor) -> torch.Tensor:
    """Rotation matrices (..., 3, 3) of quaternions (..., 4) in (w, x, y, z) order, normalised."""
    if q.shape[-1] != 4:
        raise ValueError(f"quaternions must have a last dimension of 4, got shape {tuple(q.shape)}")
    q = q / q.norm(dim=-1, keepdim=True).clamp_min(1e-12)
    w, x, y, z = q.unbind(-1)
    rows = [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y),
            2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x),
            2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)]
    return torch.stack(rows, -1).reshape(*q.shape[:-1], 3, 3)


def orbit_rotation(azimuth: float, elevation: float, dtype=torch.float64) -> torch.Tensor:
    """World-to-camera rotation of an orthographic camera on a sphere around the origin, looking
    at it: a turn of ``azimuth`` radians about the world's vertical (y) axis, then a tilt of
    ``elevation`` radians about the camera's horizontal axis. The world's y axis stays up in the
    image for small elevations."""
    ca, sa, ce, se = math.cos(azimuth), math.sin(azimuth), math.cos(elevation), math.sin(elevation)
    ry = torch.tensor([[ca, 0.0, -sa], [0.0, 1.0, 0.0], [sa, 0.0, ca]], dtype=dtype)
    rx = torch.tensor([[1.0, 0.0, 0.0], [0.0, ce, -se], [0.0, se, ce]], dtype=dtype)
    return rx @ ry


def orbit_views(azimuths_deg, elevations_deg, dtype=torch.float64) -> torch.Tensor:
    """Stack (V, 3, 3) of :func:`orbit_rotation` for paired lists of angles in degrees."""
    az, el = list(azimuths_deg), list(elevations_deg)
    if len(az) != len(el) or not az:
        raise ValueError(f"need as many azimuths as elevations (and at least one), got {len(az)}, {len(el)}")
    return torch.stack([orbit_rotation(math.radians(a), math.radians(e), dtype) for a, e in zip(az, el)])


def pixel_grid(size: int, extent: float, dtype=torch.float64, device=None) -> torch.Tensor:
    """Pixel centres (size*size, 2) in camera-plane coordinates, row-major, row 0 at the top."""
    if int(size) != size or size < 1:
        raise ValueError(f"size must be a positive integer, got {size!r}")
    if not extent > 0:
        raise ValueError(f"extent must be positive, got {extent!r}")
    t = (torch.arange(size, dtype=dtype, device=device) + 0.5) / size * 2 * extent - extent
    yy, xx = torch.meshgrid(-t, t, indexing="ij")           # y decreases down the rows
    return torch.stack([xx.reshape(-1), yy.reshape(-1)], -1)


def project(means: torch.Tensor, scales: torch.Tensor, quats: torch.Tensor, views: torch.Tensor,
            dilation: float = 0.0):
    """Camera-plane means (V, N, 2), depths (V, N) and 2x2 covariances (V, N, 2, 2) (``dilation``
    added to the diagonal, in world units squared)."""
    rot = quat_to_rotmat(quats)                                    # (N, 3, 3)
    cov = rot @ torch.diag_embed(scales ** 2) @ rot.transpose(-1, -2)
    cam = torch.einsum("vab,nb->vna", views, means)
    cov_cam = views[:, None] @ cov[None] @ views[:, None].transpose(-1, -2)
    cov2 = cov_cam[..., :2, :2] + dilation * torch.eye(2, dtype=means.dtype, device=means.device)
    return cam[..., :2], cam[..., 2], cov2


def _check(means, scales, quats, colours, opacities, views):
    n = means.shape[0]
    want = {"means": (means, (n, 3)), "scales": (scales, (n, 3)), "quats": (quats, (n, 4)),
            "colours": (colours, (n, 3)), "opacities": (opacities, (n,))}
    for name, (t, shape) in want.items():
        if tuple(t.shape) != shape:
            raise ValueError(f"{name} must have shape {shape} for N={n} Gaussians, got {tuple(t.shape)}")
    if views.ndim != 3 or views.shape[1:] != (3, 3):
        raise ValueError(f"views must be (V, 3, 3) rotations, got shape {tuple(views.shape)}")


def render(means: torch.Tensor, scales: torch.Tensor, quats: torch.Tensor, colours: torch.Tensor,
           opacities: torch.Tensor, views: torch.Tensor, size: int, extent: float,
           background=(0.0, 0.0, 0.0), dilation: float = 0.3, alpha_max: float = 0.99) -> torch.Tensor:
    """Images (V, 3, size, size) of the Gaussians seen from each view in ``views`` (V, 3, 3).

    ``scales`` are positive standard deviations (pass ``log_scales.exp()``), ``opacities`` lie in
    [0, 1] and ``colours`` are RGB (typically in [0, 1]); see the module docstring for the maths.
    ``dilation`` is in squared pixels."""
    _check(means, scales, quats, colours, opacities, views)
    views = views.to(means)
    pix = pixel_grid(size, extent, means.dtype, means.device)                 # (P, 2)
    px = (2 * extent / size) ** 2
    mu2, depth, cov2 = project(means, scales, quats, views, dilation * px)
    # depth order, nearest first: a permutation, so it carries no gradient itself. Sorting the
    # per-Gaussian quantities before they are expanded to every pixel is the cheap way round.
    order = torch.argsort(depth.detach(), dim=1)                                 # (V, N)
    mu2 = torch.gather(mu2, 1, order[..., None].expand_as(mu2))
    cov2 = torch.gather(cov2, 1, order[..., None, None].expand_as(cov2))
    opac, col = opacities[order], colours[order]                                 # (V, N), (V, N, 3)
    a, b, c = cov2[..., 0, 0], cov2[..., 0, 1], cov2[..., 1, 1]
    det = a * c - b * b
    ia, ib, ic = c / det, -b / det, a / det                                      # inverse (V, N)
    # the quadratic form, expanded so that one matrix product evaluates it at every pixel:
    # (p-m)^T A (p-m) = [x^2, 2xy, y^2, x, y, 1] . [a, b, c, -2(a m1 + b m2), -2(b m1 + c m2), m^T A m]
    m1, m2 = mu2[..., 0], mu2[..., 1]
    coef = torch.stack([ia, ib, ic, -2 * (ia * m1 + ib * m2), -2 * (ib * m1 + ic * m2),
                        ia * m1 * m1 + 2 * ib * m1 * m2 + ic * m2 * m2], -1)       # (V, N, 6)
    x, y = pix[:, 0], pix[:, 1]
    feats = torch.stack([x * x, 2 * x * y, y * y, x, y, torch.ones_like(x)], 0)     # (6, P)
    maha = (coef @ feats).clamp_min(0)                                              # (V, N, P)
    alpha = (opac[..., None] * torch.exp(-0.5 * maha)).clamp(max=alpha_max)
    # transmittance as exp(cumsum(log(1 - alpha))): the same product, with a cheaper backward
    # than cumprod's (alpha <= alpha_max < 1 keeps the log finite)
    log_t = torch.cumsum(torch.log1p(-alpha), dim=1)                             # inclusive
    trans = torch.exp(log_t)
    excl = torch.exp(torch.cat([torch.zeros_like(log_t[:, :1]), log_t[:, :-1]], 1))
    weights = alpha * excl                                                       # (V, N, P)
    img = torch.einsum("vnp,vnc->vcp", weights, col)
    bg = torch.as_tensor(background, dtype=means.dtype, device=means.device)
    img = img + bg[None, :, None] * trans[:, -1:, :]
    return img.reshape(views.shape[0], 3, size, size)


def textured_sphere(n_surface: int, n_interior: int, photo: np.ndarray, *, radius: float = 1.0,
                    interior_radius: float = 0.6, surface_opacity=(0.5, 1.0), generator: torch.Generator | None = None,
                    dtype=torch.float64) -> dict:
    r"""A Gaussian scene: ``n_surface`` Gaussians on a sphere of ``radius`` coloured by ``photo``
    (an (H, W, 3) array in [0, 1]) wrapped on it as an equirectangular texture, plus
    ``n_interior`` Gaussians of random colour inside a ball of ``interior_radius`` (occluded from
    most directions: the weakly observed part of a real capture).

    Surface points lie on a Fibonacci lattice (even spacing :math:`\delta=\sqrt{4\pi/n}\,r`) with a
    small random jitter; their scales are :math:`0.6\delta` times a log-normal factor, flattened
    to a third along the normal so that they tile the surface like the discs a fitted 3DGS makes.
    Surface opacities are uniform on ``surface_opacity``: discs that let what lies behind show
    through are constrained by fewer pixels, as in a fitted scene. Returns a dict of tensors ``means, scales, quats, colours, opacities`` and ``interior`` (bool)."""
    if n_surface < 1 or n_interior < 0:
        raise ValueError(f"need n_surface >= 1 and n_interior >= 0, got {n_surface}, {n_interior}")
    photo = np.asarray(photo, dtype=np.float64)
    if photo.ndim != 3 or photo.shape[2] != 3:
        raise ValueError(f"photo must be an (H, W, 3) RGB array, got shape {photo.shape}")
    g = generator if generator is not None else torch.Generator().manual_seed(0)
    k = torch.arange(n_surface, dtype=dtype) + 0.5
    y = 1 - 2 * k / n_surface
    r_xz = torch.sqrt((1 - y * y).clamp_min(0))
    phi = k * math.pi * (3 - math.sqrt(5))
    normal = torch.stack([r_xz * torch.cos(phi), y, r_xz * torch.sin(phi)], -1)
    spacing = math.sqrt(4 * math.pi / n_surface) * radius
    jitter = 0.15 * spacing * torch.randn(n_surface, 3, generator=g, dtype=dtype)
    jitter = jitter - (jitter * normal).sum(-1, keepdim=True) * normal         # tangential only
    surf = radius * normal + jitter
    # texture lookup: longitude -> columns, latitude -> rows
    lon = torch.atan2(normal[:, 2], normal[:, 0])
    lat = torch.asin(normal[:, 1].clamp(-1, 1))
    h, w = photo.shape[:2]
    cols = ((lon / (2 * math.pi) + 0.5) * (w - 1)).round().long().clamp(0, w - 1)
    rows = ((0.5 - lat / math.pi) * (h - 1)).round().long().clamp(0, h - 1)
    surf_col = torch.as_tensor(photo, dtype=dtype)[rows, cols]
    # orient each disc: rotate the z axis onto the normal (quaternion from two vectors)
    z = torch.tensor([0.0, 0.0, 1.0], dtype=dtype).expand_as(normal)
    axis = torch.cross(z, normal, dim=-1)
    w_q = 1 + (z * normal).sum(-1)
    q = torch.cat([w_q[:, None], axis], -1)
    q = torch.where(w_q[:, None] < 1e-9, torch.tensor([0.0, 1.0, 0.0, 0.0], dtype=dtype), q)
    base = 0.6 * spacing * torch.exp(0.2 * torch.randn(n_surface, 1, generator=g, dtype=dtype))
    surf_scale = base * torch.tensor([1.0, 1.0, 1 / 3], dtype=dtype)
    # interior: uniform in a ball, random colours and sizes
    u = torch.randn(n_interior, 3, generator=g, dtype=dtype)
    u = u / u.norm(dim=-1, keepdim=True).clamp_min(1e-12)
    rad = interior_radius * torch.rand(n_interior, 1, generator=g, dtype=dtype) ** (1 / 3)
    inner = u * rad
    inner_col = torch.rand(n_interior, 3, generator=g, dtype=dtype)
    inner_scale = 0.6 * spacing * torch.exp(0.3 * torch.randn(n_interior, 3, generator=g, dtype=dtype))
    inner_q = torch.randn(n_interior, 4, generator=g, dtype=dtype)
    n = n_surface + n_interior
    lo, hi = surface_opacity
    if not 0 <= lo <= hi <= 1:
        raise ValueError(f"surface_opacity must be a range inside [0, 1], got {surface_opacity!r}")
    opac = torch.cat([lo + (hi - lo) * torch.rand(n_surface, generator=g, dtype=dtype),
                      0.5 + 0.4 * torch.rand(n_interior, generator=g, dtype=dtype)])
    return {"means": torch.cat([surf, inner]), "scales": torch.cat([surf_scale, inner_scale]),
            "quats": torch.cat([q, inner_q]), "colours": torch.cat([surf_col, inner_col]),
            "opacities": opac, "interior": torch.arange(n) >= n_surface}
