r"""Reversible instance normalisation (RevIN; Kim et al., ICLR 2022).

For a look-back window ``x [B, L, C]`` every channel of every window is normalised by its own
statistics, :math:`\hat x = (x - \mu)/\sqrt{\sigma^2 + \epsilon}` (optionally followed by a learned
per-channel affine map), the model forecasts in that space, and the forecast is mapped back with the
same :math:`\mu, \sigma` (and the inverse affine map). A level or scale shift between training and
test windows is then removed before the network sees it.
"""
from __future__ import annotations

import torch
from torch import nn

__all__ = ["RevIN"]


class RevIN(nn.Module):
    """``norm(x)`` stores the statistics of ``x [B, L, C]`` and returns the normalised input;
    ``denorm(y)`` maps ``y [B, H, C]`` back with them. ``affine=True`` adds a learned per-channel
    scale and bias (then ``n_channels`` is needed)."""

    def __init__(self, n_channels: int | None = None, eps: float = 1e-5, affine: bool = False):
        super().__init__()
        if affine and not n_channels:
            raise ValueError("RevIN(affine=True) needs n_channels")
        self.eps, self.affine = float(eps), bool(affine)
        if affine:
            self.weight = nn.Parameter(torch.ones(n_channels))
            self.bias = nn.Parameter(torch.zeros(n_channels))
        self._mean = self._std = None

    def norm(self, x: torch.Tensor) -> torch.Tensor:
        if x.ndim != 3:
            raise ValueError(f"RevIN expects [batch, time, channels], got shape {tuple(x.shape)}")
        self._mean = x.mean(1, keepdim=True).detach()
        self._std = torch.sqrt(x.var(1, keepdim=True, unbiased=False) + self.eps).detach()
        z = (x - self._mean) / self._std
        return z * self.weight + self.bias if self.affine else z

    def denorm(self, y: torch.Tensor) -> torch.Tensor:
        if self._mean is None:
            raise RuntimeError("RevIN.denorm called before norm")
        if y.ndim != 3 or y.shape[0] != self._mean.shape[0] or y.shape[2] != self._mean.shape[2]:
            raise ValueError(f"denorm expects [batch, horizon, channels] matching the normalised "
                             f"input {tuple(self._mean.shape)}, got {tuple(y.shape)}")
        if self.affine:
            y = (y - self.bias) / (self.weight + self.eps ** 2)
        return y * self._std + self._mean
