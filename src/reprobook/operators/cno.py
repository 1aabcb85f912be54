r"""Spectral resampling and the alias-free blocks of the convolutional neural operator (CNO).

A grid function of ``n x n`` samples is read as the band-limited periodic function whose Fourier
coefficients are its DFT (frequencies ``|k| < n/2``; the Nyquist row and column are dropped, so the
interpretation is symmetric). Then

* :func:`fourier_resample` ``(x, m)`` samples *the same function* on an ``m x m`` grid when
  ``m >= n``, and its low-pass projection onto ``|k| < m/2`` when ``m < n``: sinc interpolation and
  ideal low-pass filtering, the continuous-discrete equivalence (CDE) of CNO in its simplest form.
* :class:`AliasFree` applies a pointwise nonlinearity :math:`\sigma` without aliasing: upsample by
  ``up`` (default 2), apply :math:`\sigma`, low-pass back to ``n``. On the fine grid
  :math:`\sigma(u)` has frequencies beyond ``n/2``; sampling them on the coarse grid would fold them
  back (aliasing) and make the layer's output depend on the grid. CNO's filtered LReLU does the
  same with windowed-sinc filters (``cutoff = n/2.0001``); the FFT form here is the ideal filter.
* :class:`CNOBlock` = 3x3 convolution, then the alias-free LReLU resampling from ``n`` to ``m``
  (``m = n``: a block, ``m = n/2``: a down-sampling, ``m = 2n``: an up-sampling).
* :class:`CNOResidualBlock` = ``x + conv(act(conv(x)))`` (with batch norms, as CNO).

The 3x3 kernels are in grid units, so a CNO-style network is meant to run at the grid it was built
for; another resolution is handled by resampling the input to that grid and the output back
(:func:`reprobook.operators.train.predict`), which is what CDE licenses.
"""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

__all__ = ["fourier_resample", "AliasFree", "CNOBlock", "CNOResidualBlock"]


def _check_grid(name, x):
    if not isinstance(x, torch.Tensor) or x.dim() != 4 or x.shape[-1] != x.shape[-2]:
        shape = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
        raise ValueError(f"{name} must be a [batch, channels, n, n] tensor, got {shape}")
    if x.shape[-1] % 2:
        raise ValueError(f"{name}: the grid size n must be even, got {x.shape[-1]}")


def fourier_resample(x: torch.Tensor, size: int) -> torch.Tensor:
    """Band-limited resampling of ``x: [B, C, n, n]`` to ``[B, C, size, size]`` (module docstring).

    Keeps the frequencies ``|k| < min(n, size) / 2`` of both axes (drops the Nyquist ones), scales by
    ``(size / n)^2`` so that sample values (not sums) are preserved. ``size`` must be even."""
    _check_grid("x", x)
    if isinstance(size, bool) or not isinstance(size, int) or size < 2 or size % 2:
        raise ValueError(f"size must be an even int >= 2, got {size!r}")
    n = x.shape[-1]
    if size == n:
        return x
    k = min(n, size) // 2                      # frequencies 0..k-1 and -(k-1)..-1 are kept
    X = torch.fft.rfft2(x.float() if x.dtype not in (torch.float32, torch.float64) else x)
    Y = X.new_zeros(x.shape[:2] + (size, size // 2 + 1))
    Y[..., :k, :k] = X[..., :k, :k]
    if k > 1:
        Y[..., -(k - 1):, :k] = X[..., -(k - 1):, :k]
    return torch.fft.irfft2(Y, s=(size, size)) * (size / n) ** 2


class AliasFree(nn.Module):
    """``sigma`` applied at ``up`` times the resolution, then resampled to ``out_size(n)``.

    ``scale`` maps the input size ``n`` to the output size (1: same grid, 0.5: down, 2: up)."""

    def __init__(self, activation: str = "lrelu", up: int = 2, scale: float = 1.0,
                 negative_slope: float = 0.01):
        super().__init__()
        if activation not in ("lrelu", "silu", "gelu"):
            raise ValueError(f"activation must be 'lrelu', 'silu' or 'gelu', got {activation!r}")
        if isinstance(up, bool) or not isinstance(up, int) or up < 1:
            raise ValueError(f"up must be a positive int, got {up!r}")
        if scale not in (0.5, 1.0, 2.0):
            raise ValueError(f"scale must be 0.5, 1 or 2, got {scale!r}")
        self.activation, self.up, self.scale, self.slope = activation, up, scale, negative_slope

    def _sigma(self, x):
        if self.activation == "lrelu":
            return F.leaky_relu(x, self.slope)
        return F.silu(x) if self.activation == "silu" else F.gelu(x)

    def forward(self, x):
        _check_grid("x", x)
        n = x.shape[-1]
        out = int(n * self.scale)
        y = self._sigma(fourier_resample(x, self.up * max(n, out)))
        return fourier_resample(y, out)


class CNOBlock(nn.Module):
    """3x3 convolution (``in_ch -> out_ch``), optional batch norm, then :class:`AliasFree` LReLU
    that resamples by ``scale``."""

    def __init__(self, in_ch: int, out_ch: int, scale: float = 1.0, kernel: int = 3,
                 batch_norm: bool = True):
        super().__init__()
        for name, v in (("in_ch", in_ch), ("out_ch", out_ch), ("kernel", kernel)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{name} must be a positive int, got {v!r}")
        self.conv = nn.Conv2d(in_ch, out_ch, kernel, padding=kernel // 2)
        self.norm = nn.BatchNorm2d(out_ch) if batch_norm else nn.Identity()
        self.act = AliasFree("lrelu", scale=scale)

    def forward(self, x):
        return self.act(self.norm(self.conv(x)))


class CNOResidualBlock(nn.Module):
    """``x + BN(conv(AliasFree-LReLU(BN(conv(x)))))``: CNO's residual block, at one resolution."""

    def __init__(self, channels: int, kernel: int = 3, batch_norm: bool = True):
        super().__init__()
        self.block = CNOBlock(channels, channels, 1.0, kernel, batch_norm)
        self.conv = nn.Conv2d(channels, channels, kernel, padding=kernel // 2)
        self.norm = nn.BatchNorm2d(channels) if batch_norm else nn.Identity()

    def forward(self, x):
        return x + self.norm(self.conv(self.block(x)))
