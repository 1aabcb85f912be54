r"""Denoising score matching (DSM) with EDM's weighting.

For data :math:`x_0`, a noise level :math:`\sigma` and :math:`\varepsilon\sim\mathcal N(0,I)`,

.. math:: \mathcal L(\psi)=E\big[\lambda(\sigma)\,\|D_\psi(x_0+\sigma\varepsilon,\sigma)-x_0\|^2\big],
          \qquad \lambda(\sigma)=\frac{\sigma^2+\sigma_d^2}{(\sigma\sigma_d)^2},

is minimised by Tweedie's posterior mean, so :math:`(D_\psi-x)/\sigma^2` estimates the score of
:math:`p_\sigma` (Vincent 2011). :math:`\lambda` makes the effective target of :math:`F_\psi` unit-scale
at every level. Noise levels are drawn log-uniformly on ``[sigma_min, sigma_max]``.
"""
from __future__ import annotations

from typing import Callable

import torch

from .schedules import log_uniform_sigmas

__all__ = ["dsm_loss", "train_dsm"]


def dsm_loss(net, x0: torch.Tensor, sigma: torch.Tensor, eps: torch.Tensor) -> torch.Tensor:
    """EDM-weighted DSM loss of ``net`` (an :class:`~.denoiser.MLPDenoiser`) on one batch."""
    if x0.shape != eps.shape:
        raise ValueError(f"x0 and eps must have the same shape, got {tuple(x0.shape)}, "
                         f"{tuple(eps.shape)}")
    sd = net.sigma_data
    lam = (sigma ** 2 + sd ** 2) / (sigma * sd) ** 2
    return (lam * (net(x0 + sigma * eps, sigma) - x0) ** 2).sum(-1).mean()


def train_dsm(net, sample: Callable[[int, torch.Generator], torch.Tensor], *, steps: int,
              batch: int, lr: float, generator: torch.Generator, sigma_min: float = 0.002,
              sigma_max: float = 80.0, optimizer: torch.optim.Optimizer | None = None) -> list[float]:
    """Train ``net`` by DSM on batches ``sample(batch, generator)``; returns the losses per step.

    ``optimizer`` lets a caller keep Adam's state across calls (the online fake score does)."""
    if steps < 0 or batch < 1:
        raise ValueError(f"need steps >= 0 and batch >= 1, got {steps}, {batch}")
    opt = optimizer or torch.optim.Adam(net.parameters(), lr=lr)
    losses = []
    for _ in range(steps):
        x0 = sample(batch, generator).detach()
        sig = log_uniform_sigmas(batch, sigma_min, sigma_max, generator, x0.dtype).to(x0.device)
        eps = torch.randn(x0.shape, generator=generator, dtype=x0.dtype).to(x0.device)
        loss = dsm_loss(net, x0, sig, eps)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    return losses
