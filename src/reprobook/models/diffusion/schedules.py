r"""Noise schedules :math:`x_t=\alpha_t x_0+\sigma_t\varepsilon` and the EDM noise-level grid.

* **VE** (variance exploding, the parametrisation of EDM): :math:`\alpha_t=1`, :math:`\sigma_t=t`.
  The marginal of data :math:`p_0` is :math:`p_\sigma=p_0*\mathcal N(0,\sigma^2I)` and
  :math:`\nabla_{x_t}\log q(x_t\mid x_0)=-(x_t-x_0)/\sigma^2=-\varepsilon/\sigma`.
* **VP** (variance preserving, DDPM's continuous limit with a linear :math:`\beta`):
  :math:`\alpha_t=\exp\!\big(-\tfrac12\int_0^t\beta(s)\,ds\big)`, :math:`\sigma_t=\sqrt{1-\alpha_t^2}`,
  :math:`\beta(s)=\beta_{\min}+s(\beta_{\max}-\beta_{\min})`, :math:`t\in[0,1]`. Its derivatives are
  :math:`\dot\alpha_t=-\tfrac12\beta(t)\alpha_t` and :math:`\dot\sigma_t=-\alpha_t\dot\alpha_t/\sigma_t`.
  A VP state maps to a VE one by :math:`x_t/\alpha_t` at noise level :math:`\sigma_t/\alpha_t`.

:func:`karras_sigmas` is the EDM grid
:math:`\sigma_i=\big(\sigma_{\max}^{1/\rho}+\tfrac{i}{N-1}(\sigma_{\min}^{1/\rho}-\sigma_{\max}^{1/\rho})\big)^\rho`,
:math:`i=0..N-1`, with a final 0 appended (:math:`N+1` levels, :math:`N` steps).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

__all__ = ["VESchedule", "VPSchedule", "karras_sigmas", "log_uniform_sigmas"]


def _t(t) -> torch.Tensor:
    return t if isinstance(t, torch.Tensor) else torch.as_tensor(t, dtype=torch.float64)


@dataclass(frozen=True)
class VESchedule:
    """:math:`\\alpha_t=1,\\ \\sigma_t=t` (EDM's choice)."""

    def alpha(self, t):
        return torch.ones_like(_t(t))

    def sigma(self, t):
        return _t(t).clone()

    def d_alpha(self, t):
        return torch.zeros_like(_t(t))

    def d_sigma(self, t):
        return torch.ones_like(_t(t))


@dataclass(frozen=True)
class VPSchedule:
    """The linear-:math:`\\beta` VP schedule on :math:`t\\in[0,1]` (DDPM's continuous limit)."""

    beta_min: float = 0.1
    beta_max: float = 20.0

    def __post_init__(self):
        if not 0 <= self.beta_min < self.beta_max:
            raise ValueError(f"need 0 <= beta_min < beta_max, got {self.beta_min}, {self.beta_max}")

    def beta(self, t):
        return self.beta_min + _t(t) * (self.beta_max - self.beta_min)

    def alpha(self, t):
        t = _t(t)
        return torch.exp(-0.5 * (self.beta_min * t + 0.5 * (self.beta_max - self.beta_min) * t ** 2))

    def sigma(self, t):
        return torch.sqrt(-torch.expm1(-(self.beta_min * _t(t)
                                          + 0.5 * (self.beta_max - self.beta_min) * _t(t) ** 2)))

    def d_alpha(self, t):
        return -0.5 * self.beta(t) * self.alpha(t)

    def d_sigma(self, t):
        return -self.alpha(t) * self.d_alpha(t) / self.sigma(t)

    def ve_sigma(self, t):
        """The equivalent VE noise level :math:`\\sigma_t/\\alpha_t`."""
        return self.sigma(t) / self.alpha(t)


def karras_sigmas(n_steps: int, sigma_min: float = 0.002, sigma_max: float = 80.0,
                  rho: float = 7.0) -> torch.Tensor:
    """The EDM grid of ``n_steps`` decreasing noise levels from ``sigma_max`` to ``sigma_min``,
    then 0 (float64, length ``n_steps + 1``). One step is the single level ``sigma_max``."""
    if isinstance(n_steps, bool) or not isinstance(n_steps, int) or n_steps < 1:
        raise ValueError(f"n_steps must be a positive int, got {n_steps!r}")
    if not 0 < sigma_min < sigma_max:
        raise ValueError(f"need 0 < sigma_min < sigma_max, got {sigma_min}, {sigma_max}")
    if n_steps == 1:
        return torch.tensor([sigma_max, 0.0], dtype=torch.float64)
    i = torch.arange(n_steps, dtype=torch.float64) / (n_steps - 1)
    s = (sigma_max ** (1 / rho) + i * (sigma_min ** (1 / rho) - sigma_max ** (1 / rho))) ** rho
    return torch.cat([s, s.new_zeros(1)])


def log_uniform_sigmas(n: int, sigma_min: float, sigma_max: float, generator: torch.Generator,
                       dtype=torch.float32) -> torch.Tensor:
    """``n`` noise levels drawn log-uniformly on ``[sigma_min, sigma_max]``, shape (n, 1)."""
    if not 0 < sigma_min <= sigma_max:
        raise ValueError(f"need 0 < sigma_min <= sigma_max, got {sigma_min}, {sigma_max}")
    u = torch.rand(n, 1, generator=generator, dtype=torch.float64)
    lo, hi = torch.log(torch.tensor(sigma_min, dtype=torch.float64)), torch.log(
        torch.tensor(sigma_max, dtype=torch.float64))
    return torch.exp(lo + u * (hi - lo)).to(dtype)
