r"""A differentiable voxel radiance field: trilinear sampling, emission-absorption ray marching,
orbiting pinhole cameras and depth-based warping between views.

**The field.** A grid ``(B, 4, R, R, R)`` over the cube :math:`[-1, 1]^3`: channel 0 is the density
:math:`\sigma\ge 0` (per unit length), channels 1:4 the RGB colour in :math:`[0, 1]`. The array axes
are ``(z, y, x)`` (``z`` up), the order :func:`torch.nn.functional.grid_sample` expects, and voxel
``i`` of an axis sits at :math:`-1 + 2i/(R-1)` (``align_corners=True``). Between voxel centres the
field is trilinear; beyond the outer voxels it falls linearly to zero over one voxel (zero padding),
and rays are only marched inside the cube.

**Rendering.** A ray :math:`o + t d` (:math:`\lVert d\rVert = 1`) is clipped to the cube (slab test),
``n_samples`` points are placed at the midpoints of equal bins of :math:`[t_0, t_1]`
(deterministic: no jitter), and the quadrature of the emission-absorption integral is

.. math:: \alpha_k = 1 - e^{-\sigma_k\delta},\quad T_k = \prod_{j<k}(1-\alpha_j),\quad
          w_k = T_k\alpha_k,\quad C = \sum_k w_k c_k + (1 - \textstyle\sum_k w_k)\, c_{bg},

with :math:`\delta = (t_1 - t_0)/n` the bin length. The expected depth is
:math:`\sum_k w_k t_k + (1-\sum_k w_k) t_{far}`, reported as the camera's *z*-depth (distance along
the optical axis, :math:`t\,(d\cdot\hat z_{cam})`), the quantity a pinhole unprojection needs.

**Cameras** follow the OpenCV convention (x right, y down, z forward); ``c2w`` maps camera to world
coordinates. Pixel ``(i, j)`` has its centre at :math:`(u, v) = (j + \tfrac12, i + \tfrac12)`.

**Warping** (:func:`warp`) is backward: each destination pixel is unprojected with its depth, moved
into the source camera, projected, and the source image is sampled there bilinearly. A pixel is
*co-visible* when it lands inside the source image in front of the camera and, given the source's
depth, its point is not occluded there (relative depth gap below ``tol``).
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F

__all__ = ["voxel_coords", "sample_field", "look_at", "orbit_cameras", "intrinsics", "camera_rays",
           "render_rays", "render", "warp"]


def _check_grid(grid: torch.Tensor) -> torch.Tensor:
    if grid.ndim == 4:
        grid = grid[None]
    if grid.ndim != 5 or grid.shape[1] != 4 or not (grid.shape[2] == grid.shape[3] == grid.shape[4]):
        raise ValueError(f"grid must be (B, 4, R, R, R) or (4, R, R, R) (density + RGB on a cubic "
                         f"grid), got {tuple(grid.shape)}")
    if grid.shape[2] < 2:
        raise ValueError(f"grid resolution must be at least 2, got {grid.shape[2]}")
    return grid


def voxel_coords(res: int, dtype=torch.float32) -> torch.Tensor:
    """World coordinates ``(R, R, R, 3)`` (last axis x, y, z) of the voxel centres, axes (z, y, x)."""
    if res < 2:
        raise ValueError(f"res must be at least 2, got {res}")
    a = torch.linspace(-1.0, 1.0, res, dtype=dtype)
    z, y, x = torch.meshgrid(a, a, a, indexing="ij")
    return torch.stack([x, y, z], -1)


def sample_field(grid: torch.Tensor, pts: torch.Tensor) -> torch.Tensor:
    """Trilinear values of ``grid`` (B, C, R, R, R) at ``pts`` (B, N, S, 3) (world x, y, z): (B, N, S, C).

    Beyond the outer voxel centres the values fall to zero over one voxel (empty space)."""
    if pts.ndim != 4 or pts.shape[-1] != 3 or pts.shape[0] != grid.shape[0]:
        raise ValueError(f"pts must be (B, N, S, 3) with B = {grid.shape[0]}, got {tuple(pts.shape)}")
    out = F.grid_sample(grid, pts[:, :, :, None, :], mode="bilinear", padding_mode="zeros",
                        align_corners=True)                      # (B, C, N, S, 1)
    return out[..., 0].permute(0, 2, 3, 1)


def look_at(eye: torch.Tensor, target: torch.Tensor, up=(0.0, 0.0, 1.0)) -> torch.Tensor:
    """Camera-to-world ``(4, 4)`` of a camera at ``eye`` looking at ``target`` (OpenCV axes)."""
    eye, target = torch.as_tensor(eye, dtype=torch.float64), torch.as_tensor(target, dtype=torch.float64)
    fwd = target - eye
    fwd = fwd / fwd.norm()
    right = torch.linalg.cross(fwd, torch.as_tensor(up, dtype=torch.float64))
    if right.norm() < 1e-9:
        raise ValueError("the viewing direction is parallel to up; pick another up vector")
    right = right / right.norm()
    down = torch.linalg.cross(fwd, right)
    c2w = torch.eye(4, dtype=torch.float64)
    c2w[:3, 0], c2w[:3, 1], c2w[:3, 2], c2w[:3, 3] = right, down, fwd, eye
    return c2w


def orbit_cameras(azimuths_deg, radius: float, elevation_deg: float, target=(0.0, 0.0, 0.0),
                  dtype=torch.float32) -> torch.Tensor:
    """Cameras ``(V, 4, 4)`` on a circle of ``radius`` around ``target`` at ``elevation_deg``."""
    if radius <= 0:
        raise ValueError(f"radius must be positive, got {radius}")
    t = torch.as_tensor(target, dtype=torch.float64)
    out = []
    for az in azimuths_deg:
        a, e = math.radians(float(az)), math.radians(float(elevation_deg))
        eye = t + radius * torch.tensor([math.cos(e) * math.cos(a), math.cos(e) * math.sin(a),
                                         math.sin(e)], dtype=torch.float64)
        out.append(look_at(eye, t))
    return torch.stack(out).to(dtype)


def intrinsics(height: int, width: int, fov_deg: float, dtype=torch.float32) -> torch.Tensor:
    """Pinhole matrix ``K`` (3, 3) with horizontal field of view ``fov_deg``, centre at the image centre."""
    if not 0 < fov_deg < 180:
        raise ValueError(f"fov_deg must be in (0, 180), got {fov_deg}")
    f = 0.5 * width / math.tan(math.radians(fov_deg) / 2)
    return torch.tensor([[f, 0, width / 2], [0, f, height / 2], [0, 0, 1]], dtype=dtype)


def _pixels(height, width, dtype):
    v, u = torch.meshgrid(torch.arange(height, dtype=dtype) + 0.5,
                          torch.arange(width, dtype=dtype) + 0.5, indexing="ij")
    return torch.stack([u, v, torch.ones_like(u)], -1)          # (H, W, 3)


def camera_rays(c2w: torch.Tensor, K: torch.Tensor, height: int, width: int):
    """Ray origins and unit directions ``(V, H, W, 3)`` and the cosine to the optical axis ``(V, H, W)``."""
    if c2w.ndim != 3 or c2w.shape[1:] != (4, 4):
        raise ValueError(f"c2w must be (V, 4, 4), got {tuple(c2w.shape)}")
    cam = _pixels(height, width, c2w.dtype) @ torch.linalg.inv(K.to(c2w.dtype)).T  # z = 1
    d_cam = cam / cam.norm(dim=-1, keepdim=True)
    dirs = torch.einsum("vij,hwj->vhwi", c2w[:, :3, :3], d_cam)
    origins = c2w[:, None, None, :3, 3].expand_as(dirs)
    return origins, dirs, d_cam[..., 2].expand(dirs.shape[:-1])


def _clip_to_cube(origins, dirs):
    # slab test against [-1, 1]^3; rays that miss get t0 = t1 (no samples contribute)
    inv = 1.0 / torch.where(dirs.abs() < 1e-12, torch.full_like(dirs, 1e-12), dirs)
    ta, tb = (-1.0 - origins) * inv, (1.0 - origins) * inv
    t0 = torch.minimum(ta, tb).amax(-1).clamp_min(0.0)
    t1 = torch.maximum(ta, tb).amin(-1)
    return t0, torch.maximum(t1, t0)


def render_rays(grid: torch.Tensor, origins: torch.Tensor, dirs: torch.Tensor, n_samples: int,
                background=(1.0, 1.0, 1.0)) -> dict:
    """Composite ``grid`` (B, 4, R, R, R) along rays ``(B, N, 3)``.

    Returns ``rgb`` (B, N, 3), ``opacity`` (B, N) and ``t`` (B, N): the expected ray distance, with
    rays that cross nothing counted at the far end of their segment in the cube."""
    grid = _check_grid(grid)
    if origins.shape != dirs.shape or origins.ndim != 3 or origins.shape[-1] != 3:
        raise ValueError(f"origins and dirs must both be (B, N, 3), got {tuple(origins.shape)}, "
                         f"{tuple(dirs.shape)}")
    if n_samples < 1:
        raise ValueError(f"n_samples must be positive, got {n_samples}")
    t0, t1 = _clip_to_cube(origins, dirs)
    delta = (t1 - t0) / n_samples                                 # (B, N)
    k = torch.arange(n_samples, dtype=origins.dtype) + 0.5
    t = t0[..., None] + delta[..., None] * k                      # (B, N, S)
    pts = origins[..., None, :] + t[..., None] * dirs[..., None, :]
    vals = sample_field(grid, pts)                                # (B, N, S, 4)
    sigma, rgb = vals[..., 0].clamp_min(0.0), vals[..., 1:].clamp(0.0, 1.0)
    tau = sigma * delta[..., None]
    # transmittance before sample k: exp(-sum_{j<k} tau_j), exact for the piecewise-constant quadrature
    trans = torch.exp(-(torch.cumsum(tau, -1) - tau))
    w = trans * (1.0 - torch.exp(-tau))
    acc = w.sum(-1)
    bg = torch.as_tensor(background, dtype=rgb.dtype)
    color = (w[..., None] * rgb).sum(-2) + (1.0 - acc)[..., None] * bg
    depth = (w * t).sum(-1) + (1.0 - acc) * t1
    return {"rgb": color, "opacity": acc, "t": depth}


def render(grid: torch.Tensor, c2w: torch.Tensor, K: torch.Tensor, height: int, width: int,
           n_samples: int, background=(1.0, 1.0, 1.0)) -> dict:
    """Render views: ``rgb`` (V, 3, H, W), ``depth`` (V, 1, H, W, z-depth), ``opacity`` (V, 1, H, W).

    ``grid`` is one field (4, R, R, R) seen by every camera, or a batch (V, 4, R, R, R): one field
    per camera (field v is rendered from camera v only)."""
    grid = _check_grid(grid)
    V = c2w.shape[0]
    o, d, cos = camera_rays(c2w.to(grid.dtype), K, height, width)
    if grid.shape[0] == 1:
        o, d = o.reshape(1, -1, 3), d.reshape(1, -1, 3)
    elif grid.shape[0] == V:
        o, d = o.reshape(V, -1, 3), d.reshape(V, -1, 3)
    else:
        raise ValueError(f"a batch of {grid.shape[0]} fields needs as many cameras, got {V}")
    out = render_rays(grid, o, d, n_samples, background)
    rgb = out["rgb"].reshape(V, height, width, 3).permute(0, 3, 1, 2)
    depth = (out["t"].reshape(V, height, width) * cos)[:, None]
    return {"rgb": rgb, "depth": depth, "opacity": out["opacity"].reshape(V, 1, height, width)}


def warp(image_src: torch.Tensor, depth_dst: torch.Tensor, c2w_src: torch.Tensor,
         c2w_dst: torch.Tensor, K: torch.Tensor, depth_src: torch.Tensor | None = None,
         tol: float = 0.05):
    """Backward-warp ``image_src`` (V, C, H, W) into the destination cameras with ``depth_dst`` (V, 1, H, W).

    Returns the warped image (V, C, H, W) and the co-visibility mask (V, 1, H, W), bool: the point
    of the destination pixel projects inside the source image, in front of the camera, and (when
    ``depth_src`` is given) within a relative depth gap ``tol`` of the source's own depth there."""
    if image_src.ndim != 4 or depth_dst.ndim != 4 or depth_dst.shape[1] != 1 \
            or image_src.shape[0] != depth_dst.shape[0] or image_src.shape[2:] != depth_dst.shape[2:]:
        raise ValueError(f"image_src must be (V, C, H, W) and depth_dst (V, 1, H, W), got "
                         f"{tuple(image_src.shape)}, {tuple(depth_dst.shape)}")
    V, _, H, W = image_src.shape
    dt = image_src.dtype
    cam = _pixels(H, W, dt) @ torch.linalg.inv(K.to(dt)).T               # (H, W, 3), z = 1
    p_dst = cam[None] * depth_dst[:, 0, ..., None]                         # (V, H, W, 3)
    rel = torch.linalg.inv(c2w_src.to(dt)) @ c2w_dst.to(dt)                # dst camera -> src camera
    p_src = torch.einsum("vij,vhwj->vhwi", rel[:, :3, :3], p_dst) + rel[:, None, None, :3, 3]
    z = p_src[..., 2]
    uvw = p_src @ K.to(dt).T
    u, v = uvw[..., 0] / z.clamp_min(1e-9), uvw[..., 1] / z.clamp_min(1e-9)
    g = torch.stack([2 * u / W - 1, 2 * v / H - 1], -1)
    out = F.grid_sample(image_src, g, mode="bilinear", padding_mode="border", align_corners=False)
    ok = (z > 1e-6) & (u >= 0) & (u <= W) & (v >= 0) & (v <= H)
    if depth_src is not None:
        d_at = F.grid_sample(depth_src.to(dt), g, mode="bilinear", padding_mode="border",
                             align_corners=False)[:, 0]
        ok = ok & ((z - d_at).abs() <= tol * z.abs())
    return out, ok[:, None]
