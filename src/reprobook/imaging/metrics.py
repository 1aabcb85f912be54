r"""Reconstruction quality of volumes ``(V, Z, n, n)`` against a reference, one number per volume.

* :func:`slice_psnr` -- mean PSNR over the slices of one orientation, :math:`10\log_{10}(R^2/\mathrm{MSE})`
  per slice with :math:`R` the data range. ``"axial"`` slices are the :math:`n\times n` images the CT
  measures; ``"sagittal"`` slices are :math:`Z\times n` images at a fixed column, so they cut across
  the slices and show any inconsistency between neighbouring axial reconstructions. Slices whose
  reference is empty (outside the body) are skipped: their PSNR measures nothing but noise.
* :func:`z_gradient_error` -- :math:`\|\partial_zx-\partial_zx^\star\|_2/\|\partial_zx^\star\|_2` with
  :math:`\partial_z` the forward difference between neighbouring slices.
"""
from __future__ import annotations

import torch

__all__ = ["slice_psnr", "z_gradient_error"]

_AXES = {"axial": (0, 1, 2, 3), "coronal": (0, 2, 1, 3), "sagittal": (0, 3, 1, 2)}


def _pair(x, ref):
    if x.shape != ref.shape or x.ndim != 4:
        raise ValueError(f"x and ref must both be (V, Z, n, n), got {tuple(x.shape)}, {tuple(ref.shape)}")


def slice_psnr(x: torch.Tensor, ref: torch.Tensor, orientation: str = "axial",
               data_range: float = 1.0) -> torch.Tensor:
    """Mean PSNR (dB) over the non-empty reference slices of ``orientation``: shape (V,)."""
    _pair(x, ref)
    if orientation not in _AXES:
        raise ValueError(f"unknown orientation {orientation!r}; use one of {sorted(_AXES)}")
    xs, rs = x.permute(*_AXES[orientation]), ref.permute(*_AXES[orientation])
    mse = ((xs - rs) ** 2).mean((-1, -2))
    psnr = 10 * torch.log10(data_range ** 2 / mse.clamp_min(1e-20))
    keep = (rs.abs().amax((-1, -2)) > 0).to(psnr.dtype)
    return (psnr * keep).sum(1) / keep.sum(1).clamp_min(1)


def z_gradient_error(x: torch.Tensor, ref: torch.Tensor) -> torch.Tensor:
    """Relative error of the slice-to-slice differences: shape (V,)."""
    _pair(x, ref)
    dx, dr = (x[:, 1:] - x[:, :-1]).flatten(1), (ref[:, 1:] - ref[:, :-1]).flatten(1)
    return torch.linalg.vector_norm(dx - dr, dim=1) / torch.linalg.vector_norm(dr, dim=1).clamp_min(1e-20)
