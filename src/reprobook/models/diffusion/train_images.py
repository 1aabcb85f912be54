r"""Denoising score matching for image denoisers with an optional conditioning input.

The loss is the EDM-weighted DSM loss of :mod:`.train`, averaged over pixels instead of summed (so
one learning rate suits any image size),

.. math:: \mathcal L(\psi)=E\big[\lambda(\sigma)\,\mathrm{mean}_{\rm pixels}
          \big(D_\psi(x_0+\sigma\varepsilon,\sigma,p)-x_0\big)^2\big],\qquad
          \lambda(\sigma)=\frac{\sigma^2+\sigma_d^2}{(\sigma\sigma_d)^2},

with :math:`\sigma` log-uniform on ``[sigma_min, sigma_max]`` and :math:`p` the condition drawn with
the image (a slab's z-position for DiffusionBlend's prior; ``None`` for an unconditional prior).
"""
from __future__ import annotations

from typing import Callable

import torch

from .schedules import log_uniform_sigmas

__all__ = ["image_dsm_loss", "train_image_dsm"]

Sampler = Callable[[int, torch.Generator], tuple[torch.Tensor, torch.Tensor | None]]


def image_dsm_loss(net, x0: torch.Tensor, sigma: torch.Tensor, eps: torch.Tensor,
                   pos: torch.Tensor | None = None) -> torch.Tensor:
    """EDM-weighted DSM loss of an image denoiser ``net(x, sigma, pos)`` on one batch."""
    if x0.shape != eps.shape or x0.ndim != 4:
        raise ValueError(f"x0 and eps must both have shape (batch, C, H, W), got {tuple(x0.shape)}, "
                         f"{tuple(eps.shape)}")
    s = sigma.reshape(-1)
    if s.shape[0] != x0.shape[0]:
        raise ValueError(f"need one sigma per image, got {s.shape[0]} for {x0.shape[0]}")
    sd = net.sigma_data
    lam = (s ** 2 + sd ** 2) / (s * sd) ** 2
    out = net(x0 + s[:, None, None, None] * eps, s, pos) if pos is not None else net(
        x0 + s[:, None, None, None] * eps, s)
    return (lam * ((out - x0) ** 2).mean((1, 2, 3))).mean()


def train_image_dsm(net, sample: Sampler, *, steps: int, batch: int, lr: float,
                    generator: torch.Generator, sigma_min: float = 0.002,
                    sigma_max: float = 80.0) -> list[float]:
    """Train ``net`` by DSM on batches ``(x0, pos) = sample(batch, generator)`` with Adam;
    returns the loss of every step."""
    if steps < 0 or batch < 1 or lr <= 0:
        raise ValueError(f"need steps >= 0, batch >= 1, lr > 0; got {steps}, {batch}, {lr}")
    opt = torch.optim.Adam(net.parameters(), lr=lr)
    losses = []
    for _ in range(steps):
        x0, pos = sample(batch, generator)
        sig = log_uniform_sigmas(x0.shape[0], sigma_min, sigma_max, generator, x0.dtype)
        eps = torch.randn(x0.shape, generator=generator, dtype=x0.dtype)
        loss = image_dsm_loss(net, x0, sig, eps, pos)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    return losses
