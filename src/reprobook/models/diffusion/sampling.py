r"""Probability-flow ODE samplers for the VE process (Euler = DDIM, and EDM's Heun).

The probability-flow ODE of :math:`x_\sigma=x_0+\sigma\varepsilon` is

.. math:: \frac{dx}{d\sigma}=-\sigma\,\nabla_x\log p_\sigma(x)=\frac{x-D(x,\sigma)}{\sigma},

integrated from :math:`x_{\sigma_{\max}}\sim\mathcal N(0,\sigma_{\max}^2I)` down to 0 over a grid
(:func:`~.schedules.karras_sigmas`). **Euler** on this ODE is DDIM (deterministic, :math:`\eta=0`)
in the VE parametrisation: :math:`x_{i+1}=D_i+\tfrac{\sigma_{i+1}}{\sigma_i}(x_i-D_i)`. **Heun** adds
EDM's second-order correction on every step whose end level is positive, so ``N`` steps cost
:math:`2N-1` denoiser calls. With one step either sampler returns :math:`D(x_{\sigma_{\max}},\sigma_{\max})`,
the teacher's one-step output.
"""
from __future__ import annotations

from typing import Callable

import torch

from .schedules import karras_sigmas

__all__ = ["pf_ode_sample", "sample_teacher", "n_evaluations"]

Denoiser = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def n_evaluations(n_steps: int, method: str) -> int:
    """Denoiser calls of an ``n_steps`` sampler."""
    return n_steps if method == "euler" else 2 * n_steps - 1


@torch.no_grad()
def pf_ode_sample(denoise: Denoiser, x: torch.Tensor, sigmas: torch.Tensor,
                  method: str = "heun") -> torch.Tensor:
    """Integrate the PF-ODE from ``x`` (at level ``sigmas[0]``) along ``sigmas`` (ending at 0)."""
    if method not in ("euler", "heun"):
        raise ValueError(f"unknown method {method!r}; use 'euler' or 'heun'")
    if sigmas.ndim != 1 or len(sigmas) < 2 or float(sigmas[-1]) != 0.0:
        raise ValueError("sigmas must be a 1-d decreasing grid ending in 0")
    for s, s_next in zip(sigmas[:-1].tolist(), sigmas[1:].tolist()):
        d = (x - denoise(x, torch.full((x.shape[0], 1), s, dtype=x.dtype))) / s
        x_next = x + (s_next - s) * d
        if method == "heun" and s_next > 0:
            d2 = (x_next - denoise(x_next, torch.full((x.shape[0], 1), s_next, dtype=x.dtype))) / s_next
            x_next = x + (s_next - s) * 0.5 * (d + d2)
        x = x_next
    return x


def sample_teacher(denoise: Denoiser, n: int, dim: int, n_steps: int, generator: torch.Generator,
                   *, sigma_min: float = 0.002, sigma_max: float = 80.0, rho: float = 7.0,
                   method: str = "heun", dtype=torch.float32) -> torch.Tensor:
    """``n`` samples of the teacher's ``n_steps``-step PF-ODE sampler on the EDM grid."""
    sig = karras_sigmas(n_steps, sigma_min, sigma_max, rho)
    x = torch.randn(n, dim, generator=generator, dtype=dtype) * sigma_max
    return pf_ode_sample(denoise, x, sig, method)
