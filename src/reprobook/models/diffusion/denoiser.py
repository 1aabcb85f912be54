r"""A small EDM-preconditioned MLP denoiser :math:`D_\psi(x,\sigma)\approx E[x_0\mid x_\sigma=x]`.

EDM's preconditioning (Karras et al. 2022) keeps the network's input and target at unit scale at
every noise level:

.. math:: D_\psi(x,\sigma)=c_{\rm skip}(\sigma)\,x+c_{\rm out}(\sigma)\,F_\psi\big(c_{\rm in}(\sigma)x,
          c_{\rm noise}(\sigma)\big),

:math:`c_{\rm skip}=\sigma_d^2/(\sigma^2+\sigma_d^2)`, :math:`c_{\rm out}=\sigma\sigma_d/\sqrt{\sigma^2+\sigma_d^2}`,
:math:`c_{\rm in}=1/\sqrt{\sigma^2+\sigma_d^2}`, :math:`c_{\rm noise}=\tfrac14\log\sigma`, with
:math:`\sigma_d` the data's standard deviation. The score follows from Tweedie,
:math:`s_\psi(x,\sigma)=(D_\psi(x,\sigma)-x)/\sigma^2`. :math:`F_\psi` is an MLP whose every hidden
layer receives a projection of a sin/cos embedding of :math:`c_{\rm noise}` (fixed geometric
frequencies), so one network covers all noise levels. On 8x8 digits the 64 pixels are its input.
"""
from __future__ import annotations

import math

import torch
from torch import nn

__all__ = ["FourierEmbedding", "MLPDenoiser"]


class FourierEmbedding(nn.Module):
    """:math:`c\\mapsto[\\sin(2\\pi f_j c),\\cos(2\\pi f_j c)]_j`, frequencies ``f_j`` geometric in
    [1/4, 16] (fixed, not learned: the embedding is the same for every seed)."""

    def __init__(self, dim: int = 32):
        super().__init__()
        if dim < 2 or dim % 2:
            raise ValueError(f"dim must be an even int >= 2, got {dim}")
        self.register_buffer("freqs", torch.logspace(math.log10(0.25), math.log10(16.0), dim // 2))

    def forward(self, c: torch.Tensor) -> torch.Tensor:
        a = 2 * math.pi * c.reshape(-1, 1) * self.freqs[None].to(c.dtype)
        return torch.cat([a.sin(), a.cos()], dim=1)


class MLPDenoiser(nn.Module):
    """EDM-preconditioned MLP denoiser on vectors of ``dim`` numbers (see the module docstring)."""

    def __init__(self, dim: int, width: int = 128, depth: int = 3, emb_dim: int = 32,
                 sigma_data: float = 1.0):
        super().__init__()
        if dim < 1 or width < 1 or depth < 1:
            raise ValueError(f"dim, width and depth must be positive, got {dim}, {width}, {depth}")
        if sigma_data <= 0:
            raise ValueError(f"sigma_data must be positive, got {sigma_data}")
        self.dim, self.sigma_data = dim, float(sigma_data)
        self.embed = FourierEmbedding(emb_dim)
        self.inp = nn.Linear(dim, width)
        self.temb = nn.ModuleList(nn.Linear(emb_dim, width) for _ in range(depth))
        self.hidden = nn.ModuleList(nn.Linear(width, width) for _ in range(depth - 1))
        self.out = nn.Linear(width, dim)
        nn.init.zeros_(self.out.weight)   # start at D = c_skip x: a sensible denoiser of N(0, sigma_d^2)
        nn.init.zeros_(self.out.bias)

    def _sigma(self, sigma, x: torch.Tensor) -> torch.Tensor:
        s = torch.as_tensor(sigma, dtype=x.dtype, device=x.device)
        s = s.reshape(-1, 1) if s.ndim else s.reshape(1, 1).expand(x.shape[0], 1)
        if s.shape[0] != x.shape[0]:
            raise ValueError(f"sigma must be a scalar or have {x.shape[0]} entries, got {s.shape[0]}")
        return s

    def forward(self, x: torch.Tensor, sigma) -> torch.Tensor:
        if x.ndim != 2 or x.shape[1] != self.dim:
            raise ValueError(f"x must have shape (n, {self.dim}), got {tuple(x.shape)}")
        s = self._sigma(sigma, x)
        sd2 = self.sigma_data ** 2
        c_skip, c_out = sd2 / (s ** 2 + sd2), s * self.sigma_data / torch.sqrt(s ** 2 + sd2)
        c_in = 1 / torch.sqrt(s ** 2 + sd2)
        e = self.embed(0.25 * torch.log(s))
        h = nn.functional.silu(self.inp(c_in * x) + self.temb[0](e))
        for lin, t in zip(self.hidden, self.temb[1:]):
            h = nn.functional.silu(lin(h) + t(e))
        return c_skip * x + c_out * self.out(h)

    def score(self, x: torch.Tensor, sigma) -> torch.Tensor:
        """Tweedie: :math:`(D(x,\\sigma)-x)/\\sigma^2`."""
        s = self._sigma(sigma, x)
        return (self(x, s) - x) / s ** 2
