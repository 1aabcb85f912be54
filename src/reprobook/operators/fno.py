r"""The Fourier neural operator (FNO; Li et al. 2021), the baseline MambaNO is compared with.

One Fourier layer on ``v: [B, w, n, n]``:

.. math::

    v \mapsto \sigma\big(W v + \mathcal F^{-1}(R \cdot \mathcal F v)\big),

with :math:`W` a pointwise (1x1) linear map and :math:`R` a learned complex ``w x w`` matrix for
each retained frequency :math:`(k_1, k_2)`, :math:`|k_1| < m`, :math:`0 \le k_2 < m` (the rest of
the spectrum is dropped; ``rfft2`` gives the other half by symmetry). The network lifts the input
channels pointwise to width ``w``, applies ``n_layers`` Fourier layers (GELU after every one but the
last), and projects pointwise through a hidden width back to one channel. Every weight acts on
frequencies or points, never on grid offsets, so the same network runs on any grid with ``n >= 2m``
(*discretisation invariance*); its cost is the FFT's, ``O(n^2 log n)`` per channel.
"""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

__all__ = ["SpectralConv2d", "FNO2d", "fno_parameters"]


class SpectralConv2d(nn.Module):
    """``F^{-1}(R . F v)`` on the frequencies ``|k1| < modes``, ``0 <= k2 < modes``."""

    def __init__(self, in_ch: int, out_ch: int, modes: int):
        super().__init__()
        for name, v in (("in_ch", in_ch), ("out_ch", out_ch), ("modes", modes)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{name} must be a positive int, got {v!r}")
        self.modes, self.out_ch = modes, out_ch
        scale = 1.0 / (in_ch * out_ch)
        # two blocks: non-negative k1 (rows 0..m-1) and negative k1 (rows -m..-1), as in the FNO code
        self.w_pos = nn.Parameter(scale * torch.rand(in_ch, out_ch, modes, modes, dtype=torch.cfloat))
        self.w_neg = nn.Parameter(scale * torch.rand(in_ch, out_ch, modes, modes, dtype=torch.cfloat))

    def forward(self, x):
        if x.dim() != 4:
            raise ValueError(f"SpectralConv2d expects [B, C, n, n], got shape {tuple(x.shape)}")
        n1, n2 = x.shape[-2:]
        m = self.modes
        if 2 * m > n1 or m > n2 // 2 + 1:
            raise ValueError(f"the grid {n1}x{n2} is too coarse for {m} modes (needs n >= {2 * m})")
        X = torch.fft.rfft2(x)
        Y = X.new_zeros(x.shape[0], self.out_ch, n1, n2 // 2 + 1)
        Y[..., :m, :m] = torch.einsum("bixy,ioxy->boxy", X[..., :m, :m], self.w_pos)
        Y[..., -m:, :m] = torch.einsum("bixy,ioxy->boxy", X[..., -m:, :m], self.w_neg)
        return torch.fft.irfft2(Y, s=(n1, n2))


class FNO2d(nn.Module):
    """``[B, in_ch, n, n] -> [B, 1, n, n]`` (module docstring)."""

    def __init__(self, in_ch: int = 3, width: int = 24, modes: int = 12, n_layers: int = 4,
                 proj: int | None = None):
        super().__init__()
        for name, v in (("in_ch", in_ch), ("width", width), ("modes", modes), ("n_layers", n_layers)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{name} must be a positive int, got {v!r}")
        proj = proj or 4 * width
        self.lift = nn.Conv2d(in_ch, width, 1)
        self.spectral = nn.ModuleList(SpectralConv2d(width, width, modes) for _ in range(n_layers))
        self.pointwise = nn.ModuleList(nn.Conv2d(width, width, 1) for _ in range(n_layers))
        self.proj1 = nn.Conv2d(width, proj, 1)
        self.proj2 = nn.Conv2d(proj, 1, 1)

    def forward(self, x):
        if x.dim() != 4 or x.shape[1] != self.lift.in_channels:
            raise ValueError(f"FNO2d expects [B, {self.lift.in_channels}, n, n], got {tuple(x.shape)}")
        v = self.lift(x)
        last = len(self.spectral) - 1
        for i, (K, W) in enumerate(zip(self.spectral, self.pointwise)):
            v = K(v) + W(v)
            if i < last:
                v = F.gelu(v)
        return self.proj2(F.gelu(self.proj1(v)))


def fno_parameters(in_ch: int, width: int, modes: int, n_layers: int, proj: int | None = None) -> int:
    """The parameter count of :class:`FNO2d` (complex weights count twice), in closed form."""
    proj = proj or 4 * width
    spectral = 2 * 2 * width * width * modes * modes
    return ((in_ch + 1) * width + n_layers * (spectral + width * width + width)
            + (width + 1) * proj + proj + 1)

