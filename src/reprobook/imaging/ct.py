r"""A differentiable 2-D parallel-beam projector in torch, the same geometry as
``skimage.transform.radon(image, theta, circle=True)``.

For an :math:`n\times n` image :math:`f` (zero outside the inscribed circle), centre
:math:`c=\lfloor n/2\rfloor` and an angle :math:`\theta`, the projection on detector bin :math:`u`
is the sum along the column :math:`u` of the image rotated by :math:`\theta`:

.. math:: (Af)(\theta,u)=\sum_{v=0}^{n-1} f\big(c-\sin\theta\,(u-c)+\cos\theta\,(v-c),\;
          c+\cos\theta\,(u-c)+\sin\theta\,(v-c)\big),

with :math:`f(\text{row},\text{col})` read by bilinear interpolation and zero outside the grid
(scikit-image rotates with ``warp(order=1, mode="constant")`` and sums over rows; we do the same
with ``grid_sample``). :math:`A` is linear, so :func:`radon_matrix` builds it once as a dense
:math:`(n_\theta n)\times n^2` matrix by projecting the :math:`n^2` unit images in one batch; a
sinogram is then one matrix product and the adjoint :math:`A^\top` is its transpose. Sparse-view
and limited-angle CT only change the list of angles (:func:`view_angles`).
"""
from __future__ import annotations

import math

import numpy as np
import torch
from torch.nn import functional as F

__all__ = ["view_angles", "radon", "radon_matrix", "project", "back_project", "circle_mask"]


def view_angles(n_views: int, span: float = 180.0) -> np.ndarray:
    """``n_views`` equispaced angles in degrees on ``[0, span)`` (180 = full, < 180 = limited angle)."""
    if isinstance(n_views, bool) or not isinstance(n_views, (int, np.integer)) or n_views < 1:
        raise ValueError(f"n_views must be a positive int, got {n_views!r}")
    if not 0 < span <= 360:
        raise ValueError(f"span must be in (0, 360] degrees, got {span}")
    return np.arange(n_views) * (span / n_views)


def circle_mask(n: int) -> torch.Tensor:
    """Boolean (n, n) mask of the reconstruction circle, as scikit-image's ``circle=True`` test."""
    c = n // 2
    r = torch.arange(n, dtype=torch.float64) - c
    return (r[:, None] ** 2 + r[None, :] ** 2) <= c ** 2


def _grid(n: int, theta_deg, dtype) -> torch.Tensor:
    """Sampling grid (n_theta, n, n, 2) for grid_sample: output (row v, col u) reads input at the
    rotated point, as skimage's inverse map; coordinates normalised with align_corners=True."""
    th = torch.as_tensor(np.deg2rad(np.asarray(theta_deg, dtype=np.float64)))
    c = n // 2
    u = torch.arange(n, dtype=torch.float64) - c          # output column (detector bin)
    v = torch.arange(n, dtype=torch.float64) - c          # output row (summed over)
    cos, sin = th.cos()[:, None, None], th.sin()[:, None, None]
    col = c + cos * u[None, None, :] + sin * v[None, :, None]
    row = c - sin * u[None, None, :] + cos * v[None, :, None]
    scale = 2.0 / (n - 1)
    return torch.stack([col * scale - 1, row * scale - 1], dim=-1).to(dtype)


def radon(images: torch.Tensor, theta_deg) -> torch.Tensor:
    """Projections of ``images`` (..., n, n) at angles ``theta_deg`` (degrees): shape
    (..., n_theta, n), differentiable. ``radon(x, th)[i, :]`` equals
    ``skimage.transform.radon(x, th)[:, i]`` up to interpolation round-off."""
    if images.ndim < 2 or images.shape[-1] != images.shape[-2] or images.shape[-1] < 2:
        raise ValueError(f"images must have shape (..., n, n) with n >= 2, got {tuple(images.shape)}")
    theta = np.atleast_1d(np.asarray(theta_deg, dtype=np.float64))
    if theta.ndim != 1 or len(theta) == 0:
        raise ValueError("theta_deg must be a non-empty 1-d list of angles")
    n, lead = images.shape[-1], images.shape[:-2]
    x = images.reshape(-1, 1, n, n)
    b, k = x.shape[0], len(theta)
    grid = _grid(n, theta, x.dtype).to(x.device)
    # every image at every angle: (b*k, 1, n, n) rotated, then summed over rows
    xr = x.repeat_interleave(k, dim=0)
    g = grid.repeat(b, 1, 1, 1)
    rot = F.grid_sample(xr, g, mode="bilinear", padding_mode="zeros", align_corners=True)
    return rot.sum(dim=-2).reshape(*lead, k, n)


def radon_matrix(n: int, theta_deg, dtype=torch.float64) -> torch.Tensor:
    """The dense projector :math:`A` of shape (n_theta * n, n * n): ``A @ f.flatten()`` is
    ``radon(f, theta).flatten()`` (angle-major)."""
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 2:
        raise ValueError(f"n must be an int >= 2, got {n!r}")
    eye = torch.eye(n * n, dtype=dtype).reshape(n * n, n, n)
    cols = radon(eye, theta_deg)                           # (n*n, k, n): column j = A e_j
    return cols.reshape(n * n, -1).T.contiguous()


def project(A: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """Sinograms of a stack of slices ``x`` (..., n, n) -> (..., n_theta * n), slice by slice."""
    n2 = A.shape[1]
    n = math.isqrt(n2)
    if x.shape[-2:] != (n, n):
        raise ValueError(f"slices must be {n}x{n} for this operator, got {tuple(x.shape[-2:])}")
    return x.reshape(*x.shape[:-2], n2) @ A.T.to(x.dtype)


def back_project(A: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """The adjoint :math:`A^\\top y` of sinograms (..., m) -> slices (..., n, n)."""
    if y.shape[-1] != A.shape[0]:
        raise ValueError(f"sinograms must have {A.shape[0]} entries, got {y.shape[-1]}")
    n = math.isqrt(A.shape[1])
    return (y @ A.to(y.dtype)).reshape(*y.shape[:-1], n, n)
