r"""A small EDM-preconditioned convolutional U-Net denoiser on images of ``channels`` channels,
optionally conditioned on a scalar position (plain torch, no torchvision).

As :class:`~.denoiser.MLPDenoiser`, the network is wrapped in EDM's preconditioning,

.. math:: D_\psi(x,\sigma,p)=c_{\rm skip}(\sigma)\,x+c_{\rm out}(\sigma)\,F_\psi\big(c_{\rm in}(\sigma)x,
          \tfrac14\log\sigma,\,p\big),

so :math:`(D_\psi-x)/\sigma^2` is the score of the data diffused to level :math:`\sigma`. A 2-D slice
prior is ``channels=1``; DiffusionBlend's 3-D-patch prior is ``channels=k`` (a slab of ``k``
adjacent slices stacked as channels) with ``position=True``: the slab's normalised z-location
:math:`p\in[-1,1]` gets its own Fourier embedding, added to the noise-level embedding, so one network
learns a position-dependent prior :math:`p(x_{\rm slab}\mid p)`.

:math:`F_\psi`: a 3x3 convolution in, two resolution levels of residual blocks (each block adds a
projection of the embedding; group norm, SiLU), a bottleneck, and the mirror path with skip
connections; the output convolution starts at zero (so training starts from
:math:`D=c_{\rm skip}x`). The image side must be divisible by 4.
"""
from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from .denoiser import FourierEmbedding

__all__ = ["UNetDenoiser"]


def _groups(ch: int) -> int:
    return next(g for g in (8, 4, 2, 1) if ch % g == 0)


class _ResBlock(nn.Module):
    def __init__(self, cin: int, cout: int, emb: int):
        super().__init__()
        self.n1, self.c1 = nn.GroupNorm(_groups(cin), cin), nn.Conv2d(cin, cout, 3, padding=1)
        self.e = nn.Linear(emb, cout)
        self.n2, self.c2 = nn.GroupNorm(_groups(cout), cout), nn.Conv2d(cout, cout, 3, padding=1)
        self.skip = nn.Conv2d(cin, cout, 1) if cin != cout else nn.Identity()

    def forward(self, x, e):
        h = self.c1(F.silu(self.n1(x))) + self.e(e)[:, :, None, None]
        return self.skip(x) + self.c2(F.silu(self.n2(h)))


class UNetDenoiser(nn.Module):
    """EDM-preconditioned two-level U-Net (see the module docstring)."""

    def __init__(self, channels: int = 1, base: int = 16, emb_dim: int = 32, position: bool = False,
                 sigma_data: float = 0.5):
        super().__init__()
        if channels < 1 or base < 1:
            raise ValueError(f"channels and base must be positive, got {channels}, {base}")
        if sigma_data <= 0:
            raise ValueError(f"sigma_data must be positive, got {sigma_data}")
        self.channels, self.position, self.sigma_data = channels, bool(position), float(sigma_data)
        self.embed = FourierEmbedding(emb_dim)
        self.pos_embed = FourierEmbedding(emb_dim) if position else None
        self.emb = nn.Sequential(nn.Linear(emb_dim, 2 * emb_dim), nn.SiLU(),
                                 nn.Linear(2 * emb_dim, 2 * emb_dim))
        e, b = 2 * emb_dim, base
        self.inp = nn.Conv2d(channels, b, 3, padding=1)
        self.d1 = _ResBlock(b, b, e)
        self.down1 = nn.Conv2d(b, 2 * b, 3, stride=2, padding=1)
        self.d2 = _ResBlock(2 * b, 2 * b, e)
        self.down2 = nn.Conv2d(2 * b, 2 * b, 3, stride=2, padding=1)
        self.mid = _ResBlock(2 * b, 2 * b, e)
        self.u2 = _ResBlock(4 * b, 2 * b, e)
        self.u1 = _ResBlock(3 * b, b, e)
        self.out = nn.Conv2d(b, channels, 3, padding=1)
        nn.init.zeros_(self.out.weight)
        nn.init.zeros_(self.out.bias)

    def _sigma(self, sigma, x: torch.Tensor) -> torch.Tensor:
        s = torch.as_tensor(sigma, dtype=x.dtype, device=x.device).reshape(-1)
        if s.numel() == 1:
            s = s.expand(x.shape[0])
        if s.shape[0] != x.shape[0]:
            raise ValueError(f"sigma must be a scalar or have {x.shape[0]} entries, got {s.shape[0]}")
        return s

    def forward(self, x: torch.Tensor, sigma, pos: torch.Tensor | None = None) -> torch.Tensor:
        if x.ndim != 4 or x.shape[1] != self.channels:
            raise ValueError(f"x must have shape (batch, {self.channels}, H, W), got {tuple(x.shape)}")
        if x.shape[-1] % 4 or x.shape[-2] % 4:
            raise ValueError(f"image sides must be divisible by 4, got {tuple(x.shape[-2:])}")
        if self.position and pos is None:
            raise ValueError("this denoiser is position-aware: pass pos (one value per image)")
        if not self.position and pos is not None:
            raise ValueError("this denoiser has no position input; pos must be None")
        s = self._sigma(sigma, x)
        sd2 = self.sigma_data ** 2
        c_skip = (sd2 / (s ** 2 + sd2))[:, None, None, None]
        c_out = (s * self.sigma_data / torch.sqrt(s ** 2 + sd2))[:, None, None, None]
        c_in = (1 / torch.sqrt(s ** 2 + sd2))[:, None, None, None]
        emb = self.embed(0.25 * torch.log(s))
        if self.position:
            p = torch.as_tensor(pos, dtype=x.dtype, device=x.device).reshape(-1)
            if p.shape[0] != x.shape[0]:
                raise ValueError(f"pos must have {x.shape[0]} entries, got {p.shape[0]}")
            emb = emb + self.pos_embed(p)
        e = self.emb(emb)
        h0 = self.d1(self.inp(c_in * x), e)
        h1 = self.d2(self.down1(h0), e)
        h = self.mid(self.down2(h1), e)
        h = self.u2(torch.cat([F.interpolate(h, scale_factor=2.0, mode="nearest"), h1], 1), e)
        h = self.u1(torch.cat([F.interpolate(h, scale_factor=2.0, mode="nearest"), h0], 1), e)
        return c_skip * x + c_out * self.out(F.silu(h))
