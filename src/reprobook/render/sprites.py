r"""A differentiable soft sprite rasteriser: flat-coloured 2-D shapes composited with soft edges.

**World and pixels.** The image covers the unit square, :math:`x\in[0,1]` from left to right and
:math:`y\in[0,1]` from bottom to top; pixel :math:`(i,j)` of an :math:`H\times W` image has its centre
at :math:`q_{ij}=\big((j+\tfrac12)/W,\;1-(i+\tfrac12)/H\big)`.

**A sprite** has a shape (``"ball"``, ``"box"`` or ``"tree"``) and seven parameters
:math:`(x, y, \log s, \phi, r, g, b)`: its anchor (the centre of its local box), the log of its
half-size :math:`s`, a rotation :math:`\phi` (radians, counter-clockwise) and an RGB colour. A pixel's
local coordinates are :math:`u=R(-\phi)(q-(x,y))/s`, so the shape lives in the local box
:math:`[-1,1]^2` whatever its size, and its lowest point (unrotated) is at :math:`y-s`.

**Shapes** are signed distance functions :math:`d(u)` in local units (negative inside):

* ball: the unit disc, :math:`d=\lVert u\rVert-1`;
* box: the square :math:`[-1,1]^2`, the exact box distance;
* tree: the union (min) of a trunk, the box :math:`[-0.2,0.2]\times[-1,-0.4]`, and a canopy, the
  triangle with corners :math:`(-0.8,-0.4), (0.8,-0.4), (0,1)` (the max of its three edge distances:
  exact inside, a lower bound outside, which is all soft edges need).

**Soft coverage.** The coverage of a pixel is :math:`a=\sigma\!\big(-s\,d(u)/\tau\big)` with
:math:`\tau=` ``softness``:math:`/W` (so ``softness`` is in pixels): a sigmoid of the distance to the
edge in world units. It is smooth in every parameter, so gradients reach position, scale, rotation
and colour even from pixels outside the shape (SoftRas's idea in 2-D).

**Compositing** is "over", back to front in the order the sprites are given:
:math:`I\leftarrow(1-a_k)\,I+a_k\,c_k` for :math:`k=1..n`, starting from the background image.
"""
from __future__ import annotations

import math
from collections.abc import Sequence

import torch

__all__ = ["SHAPES", "N_PARAMS", "pixel_grid", "sdf", "coverage", "render", "bottom"]

SHAPES = ("ball", "box", "tree")
N_PARAMS = 7          # x, y, log_s, rotation, r, g, b

_SQRT_EPS = 1e-12     # keeps the gradient of a norm finite where its argument is exactly zero


def pixel_grid(height: int, width: int, dtype=torch.float32, device=None) -> torch.Tensor:
    """World coordinates of the pixel centres, shape ``(H, W, 2)`` (x, y), y pointing up."""
    for name, v in (("height", height), ("width", width)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{name} must be a positive int, got {v!r}")
    ys = 1.0 - (torch.arange(height, dtype=dtype, device=device) + 0.5) / height
    xs = (torch.arange(width, dtype=dtype, device=device) + 0.5) / width
    gy, gx = torch.meshgrid(ys, xs, indexing="ij")
    return torch.stack([gx, gy], dim=-1)


def _norm(v: torch.Tensor) -> torch.Tensor:
    return torch.sqrt((v ** 2).sum(-1) + _SQRT_EPS)


def _box_sdf(u: torch.Tensor, cx: float, cy: float, hx: float, hy: float) -> torch.Tensor:
    q = torch.stack([(u[..., 0] - cx).abs() - hx, (u[..., 1] - cy).abs() - hy], dim=-1)
    outside = _norm(q.clamp_min(0.0)) - math.sqrt(_SQRT_EPS)
    inside = q.max(dim=-1).values.clamp_max(0.0)
    return outside + inside


# canopy triangle: each edge as (unit outward normal n, offset c) with n.u - c <= 0 inside
def _edges():
    pts = [(-0.8, -0.4), (0.8, -0.4), (0.0, 1.0)]
    out = []
    for (ax, ay), (bx, by) in zip(pts, pts[1:] + pts[:1]):
        nx, ny = by - ay, -(bx - ax)          # clockwise-rotated edge: outward for this winding
        L = math.hypot(nx, ny)
        nx, ny = nx / L, ny / L
        out.append((nx, ny, nx * ax + ny * ay))
    return out


_CANOPY = _edges()


def sdf(shape: str, u: torch.Tensor) -> torch.Tensor:
    """Signed distance (local units, negative inside) of ``shape`` at local points ``u[..., 2]``."""
    if shape == "ball":
        return _norm(u) - 1.0
    if shape == "box":
        return _box_sdf(u, 0.0, 0.0, 1.0, 1.0)
    if shape == "tree":
        trunk = _box_sdf(u, 0.0, -0.7, 0.2, 0.3)
        canopy = torch.stack([nx * u[..., 0] + ny * u[..., 1] - c for nx, ny, c in _CANOPY],
                             dim=-1).max(dim=-1).values
        return torch.minimum(trunk, canopy)
    raise ValueError(f"unknown shape {shape!r}; known shapes: {', '.join(SHAPES)}")


def _check(shapes: Sequence[str], params: torch.Tensor) -> list[str]:
    if isinstance(shapes, str):
        raise TypeError("shapes must be a sequence of shape names, not one string")
    shapes = list(shapes)
    unknown = [s for s in shapes if s not in SHAPES]
    if unknown:
        raise ValueError(f"unknown shape(s) {unknown}; known shapes: {', '.join(SHAPES)}")
    if not isinstance(params, torch.Tensor) or params.ndim < 2 or params.shape[-1] != N_PARAMS:
        shape = tuple(params.shape) if isinstance(params, torch.Tensor) else type(params).__name__
        raise ValueError(f"params must be a tensor of shape (..., n_sprites, {N_PARAMS}) "
                         f"[x, y, log_s, rotation, r, g, b], got {shape}")
    if params.shape[-2] != len(shapes):
        raise ValueError(f"params has {params.shape[-2]} sprites but {len(shapes)} shapes were given")
    return shapes


def coverage(shapes: Sequence[str], params: torch.Tensor, height: int, width: int,
             softness: float = 0.5) -> torch.Tensor:
    """Soft coverage :math:`a_k\\in(0,1)` of every sprite, shape ``(..., n_sprites, H, W)``."""
    shapes = _check(shapes, params)
    if not softness > 0:
        raise ValueError(f"softness must be positive (pixels), got {softness!r}")
    grid = pixel_grid(height, width, params.dtype, params.device)          # (H, W, 2)
    tau = softness / width
    out = []
    for k, shape in enumerate(shapes):
        p = params[..., k, :]
        x, y, s, phi = p[..., 0], p[..., 1], p[..., 2].exp(), p[..., 3]
        e = lambda t: t[..., None, None]                                   # noqa: E731
        dx, dy = grid[..., 0] - e(x), grid[..., 1] - e(y)
        c, sn = e(torch.cos(phi)), e(torch.sin(phi))
        u = torch.stack([(c * dx + sn * dy) / e(s), (-sn * dx + c * dy) / e(s)], dim=-1)
        out.append(torch.sigmoid(-e(s) * sdf(shape, u) / tau))
    return torch.stack(out, dim=-3)


def render(shapes: Sequence[str], params: torch.Tensor, height: int, width: int, *,
           background: torch.Tensor | None = None, softness: float = 0.5) -> torch.Tensor:
    """Composite the sprites back to front over ``background`` (``(3, H, W)``, default black).

    ``params``: ``(..., n_sprites, 7)``; returns ``(..., 3, H, W)``.
    """
    shapes = _check(shapes, params)
    a = coverage(shapes, params, height, width, softness)                 # (..., n, H, W)
    batch = params.shape[:-2]
    if background is None:
        img = params.new_zeros(*batch, 3, height, width)
    else:
        if background.shape != (3, height, width):
            raise ValueError(f"background must have shape (3, {height}, {width}), "
                             f"got {tuple(background.shape)}")
        img = background.to(params).expand(*batch, 3, height, width)
    for k in range(len(shapes)):
        ak = a[..., k, :, :].unsqueeze(-3)                                 # (..., 1, H, W)
        col = params[..., k, 4:7][..., :, None, None]                      # (..., 3, 1, 1)
        img = (1 - ak) * img + ak * col
    return img


def bottom(params: torch.Tensor) -> torch.Tensor:
    """The lowest point :math:`y-s` of each (unrotated) sprite, shape ``params.shape[:-1]``."""
    if not isinstance(params, torch.Tensor) or params.shape[-1] != N_PARAMS:
        raise ValueError(f"params must have last dimension {N_PARAMS}")
    return params[..., 1] - params[..., 2].exp()
