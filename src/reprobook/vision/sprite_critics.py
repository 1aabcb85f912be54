r"""Small convolutional critics of images: a classifier or regressor, optionally told the noise
level of a noised input (plain torch).

:class:`SmallCNN` is three 3x3 convolution blocks (GroupNorm, SiLU, the last two with stride 2),
global average pooling and a linear head of ``out_dim`` outputs. With ``noise_cond=True`` each block
adds a projection of a Fourier embedding of :math:`\tfrac14\log\sigma` (as the diffusion U-Net does),
so one network judges inputs at every noise level: this is the form of a time-conditioned
discriminator :math:`D_\psi(x_t,t)` used for classifier guidance.

:func:`train_critic` fits a critic by Adam on batches drawn by a callable, with a cross-entropy
(``"bce"``, one logit) or squared-error (``"mse"``) loss.
"""
from __future__ import annotations

from typing import Callable

import torch
from torch import nn
from torch.nn import functional as F

from ..models.diffusion.denoiser import FourierEmbedding

__all__ = ["SmallCNN", "train_critic"]


class SmallCNN(nn.Module):
    """Conv critic ``(n, C, H, W) -> (n, out_dim)`` (see the module docstring)."""

    def __init__(self, in_channels: int = 3, out_dim: int = 1, width: int = 16, noise_cond: bool = False,
                 emb_dim: int = 16):
        super().__init__()
        if in_channels < 1 or out_dim < 1 or width < 1:
            raise ValueError(f"in_channels, out_dim and width must be positive, got "
                             f"{in_channels}, {out_dim}, {width}")
        self.in_channels, self.noise_cond = in_channels, bool(noise_cond)
        chans = [in_channels, width, 2 * width, 2 * width]
        self.convs = nn.ModuleList(nn.Conv2d(chans[i], chans[i + 1], 3, stride=1 if i == 0 else 2,
                                             padding=1) for i in range(3))
        self.norms = nn.ModuleList(nn.GroupNorm(4 if c % 4 == 0 else 1, c) for c in chans[1:])
        if self.noise_cond:
            self.embed = FourierEmbedding(emb_dim)
            self.proj = nn.ModuleList(nn.Linear(emb_dim, c) for c in chans[1:])
        self.head = nn.Linear(chans[-1], out_dim)

    def forward(self, x: torch.Tensor, sigma=None) -> torch.Tensor:
        if x.ndim != 4 or x.shape[1] != self.in_channels:
            raise ValueError(f"x must have shape (n, {self.in_channels}, H, W), got {tuple(x.shape)}")
        if self.noise_cond and sigma is None:
            raise ValueError("this critic is noise-conditioned: pass sigma (a scalar or one per image)")
        if not self.noise_cond and sigma is not None:
            raise ValueError("this critic is not noise-conditioned; sigma must be None")
        if self.noise_cond:
            s = torch.as_tensor(sigma, dtype=x.dtype, device=x.device).reshape(-1)
            s = s.expand(x.shape[0]) if s.numel() == 1 else s
            if s.shape[0] != x.shape[0]:
                raise ValueError(f"sigma must be a scalar or have {x.shape[0]} entries, got {s.shape[0]}")
            e = self.embed(0.25 * torch.log(s))
            # the input is scaled to unit variance at its noise level, as the U-Net's c_in does
            x = x / torch.sqrt(1 + s ** 2)[:, None, None, None]
        h = x
        for i, (conv, norm) in enumerate(zip(self.convs, self.norms)):
            h = conv(h)
            if self.noise_cond:
                h = h + self.proj[i](e)[:, :, None, None]
            h = F.silu(norm(h))
        return self.head(h.mean((2, 3)))


def train_critic(net: nn.Module, batch_fn: Callable[[int, torch.Generator], tuple], *, steps: int,
                 batch: int, lr: float, generator: torch.Generator, loss: str = "bce") -> list[float]:
    """Fit ``net`` on batches ``(x, y)`` or ``(x, y, sigma)`` from ``batch_fn(batch, generator)``;
    returns the loss of every step."""
    if loss not in ("bce", "mse"):
        raise ValueError(f"unknown loss {loss!r}; use 'bce' or 'mse'")
    if steps < 0 or batch < 1 or lr <= 0:
        raise ValueError(f"need steps >= 0, batch >= 1, lr > 0; got {steps}, {batch}, {lr}")
    opt = torch.optim.Adam(net.parameters(), lr=lr)
    out = []
    for _ in range(steps):
        b = batch_fn(batch, generator)
        pred = net(b[0], b[2]) if len(b) == 3 else net(b[0])
        y = b[1].to(pred.dtype).reshape(pred.shape)
        val = (F.binary_cross_entropy_with_logits(pred, y) if loss == "bce" else F.mse_loss(pred, y))
        opt.zero_grad(set_to_none=True)
        val.backward()
        opt.step()
        out.append(float(val.detach()))
    return out
