r"""Full-reference image quality: PSNR and SSIM on batches ``[B, C, H, W]`` in ``[0, data_range]``.

PSNR of an estimate :math:`x` against a reference :math:`y`, per image:

.. math:: \mathrm{PSNR} = 10 \log_{10} \frac{R^2}{\tfrac{1}{CHW}\sum (x - y)^2}

SSIM (Wang et al. 2004) with the usual Gaussian window (:math:`\sigma = 1.5`, 11 taps) and
:math:`c_1 = (0.01 R)^2`, :math:`c_2 = (0.03 R)^2`; local moments :math:`\mu, \sigma^2, \sigma_{xy}`
are Gaussian-weighted means (population covariance), the map

.. math:: \frac{(2\mu_x\mu_y + c_1)(2\sigma_{xy} + c_2)}{(\mu_x^2 + \mu_y^2 + c_1)(\sigma_x^2 + \sigma_y^2 + c_2)}

is taken where the window fits inside the image ("valid") and averaged over pixels and channels.
This matches ``skimage.metrics.structural_similarity(gaussian_weights=True, sigma=1.5,
use_sample_covariance=False)``, which the tests check; the torch form is differentiable, so it
can also serve as a loss.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

__all__ = ["psnr", "ssim"]


def _check_pair(x: torch.Tensor, ref: torch.Tensor, data_range: float) -> None:
    if not isinstance(x, torch.Tensor) or not isinstance(ref, torch.Tensor):
        raise TypeError("psnr/ssim expect torch tensors")
    if x.dim() != 4:
        raise ValueError(f"expected images [B, C, H, W], got shape {tuple(x.shape)}")
    if x.shape != ref.shape:
        raise ValueError(f"estimate and reference differ in shape: {tuple(x.shape)} vs {tuple(ref.shape)}")
    if not data_range > 0:
        raise ValueError(f"data_range must be positive, got {data_range!r}")


def psnr(x: torch.Tensor, ref: torch.Tensor, data_range: float = 1.0, eps: float = 1e-12) -> torch.Tensor:
    """PSNR in dB per image, ``[B]`` (module docstring); identical images give ``10 log10(R^2/eps)``."""
    _check_pair(x, ref, data_range)
    mse = (x.float() - ref.float()).pow(2).flatten(1).mean(1)
    return 10.0 * torch.log10(data_range ** 2 / (mse + eps))


def _gaussian_window(sigma: float, radius: int, device, dtype) -> torch.Tensor:
    t = torch.arange(-radius, radius + 1, device=device, dtype=dtype)
    g = torch.exp(-0.5 * (t / sigma) ** 2)
    return g / g.sum()


def ssim(x: torch.Tensor, ref: torch.Tensor, data_range: float = 1.0, sigma: float = 1.5,
         truncate: float = 3.5, reduction: str = "mean") -> torch.Tensor:
    """SSIM per image ``[B]`` (``reduction="mean"``) or the map ``[B, C, H', W']`` (``"none"``)."""
    _check_pair(x, ref, data_range)
    if reduction not in ("mean", "none"):
        raise ValueError(f"reduction must be 'mean' or 'none', got {reduction!r}")
    radius = int(truncate * sigma + 0.5)      # skimage's window: 2 * radius + 1 taps
    H, W = x.shape[-2:]
    if min(H, W) < 2 * radius + 1:
        raise ValueError(f"images {H}x{W} are smaller than the {2 * radius + 1}-tap SSIM window")
    x, ref = x.float(), ref.float()
    C = x.shape[1]
    g = _gaussian_window(sigma, radius, x.device, x.dtype)
    gh = g.view(1, 1, 1, -1).repeat(C, 1, 1, 1)
    gv = g.view(1, 1, -1, 1).repeat(C, 1, 1, 1)

    def blur(t):  # separable, valid: only where the whole window fits
        return F.conv2d(F.conv2d(t, gh, groups=C), gv, groups=C)

    mx, my = blur(x), blur(ref)
    sxx = blur(x * x) - mx * mx
    syy = blur(ref * ref) - my * my
    sxy = blur(x * ref) - mx * my
    c1, c2 = (0.01 * data_range) ** 2, (0.03 * data_range) ** 2
    smap = ((2 * mx * my + c1) * (2 * sxy + c2)) / ((mx * mx + my * my + c1) * (sxx + syy + c2))
    return smap if reduction == "none" else smap.flatten(1).mean(1)
