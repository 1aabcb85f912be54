r"""Score distillation sampling (SDS): a pretrained denoiser as a loss on the output of a
differentiable renderer (DreamFusion, Poole et al. 2023).

A renderer maps parameters :math:`\theta` to an image :math:`x=g(\theta)`. SDS noises the image,
asks the frozen prior to predict the noise, and pushes :math:`\theta` along the residual:

.. math:: \nabla_\theta\mathcal L_{\rm SDS}=E_{\sigma,\varepsilon}\Big[w(\sigma)\,
          \big(\hat\varepsilon(x_\sigma,\sigma)-\varepsilon\big)\,\frac{\partial x}{\partial\theta}\Big],
          \qquad x_\sigma=x+\sigma\varepsilon,

skipping the denoiser's Jacobian (that is what makes it cheap, and it is DreamFusion's choice). We
use the VE (EDM) parametrisation of :mod:`.schedules`: a VP state :math:`\alpha_t x+\sigma_t\varepsilon`
is the VE state :math:`x+(\sigma_t/\alpha_t)\varepsilon` scaled by :math:`\alpha_t`, and the
predicted noise of an EDM denoiser :math:`D(x_\sigma,\sigma)\approx E[x_0\mid x_\sigma]` is
:math:`\hat\varepsilon=(x_\sigma-D(x_\sigma,\sigma))/\sigma`. Two identities follow:

* :math:`\hat\varepsilon-\varepsilon=(x-D(x_\sigma,\sigma))/\sigma`, and by Tweedie
  :math:`E[\hat\varepsilon\mid x_\sigma]=-\sigma\nabla\log p_\sigma(x_\sigma)`: descending the SDS
  gradient climbs the log-density of the noised prior (subtracting :math:`\varepsilon` changes no
  expectation; it removes most of the variance).
* For a Gaussian prior :math:`\mathcal N(\mu,s^2I)` the exact denoiser is
  :math:`D=(s^2x_\sigma+\sigma^2\mu)/(s^2+\sigma^2)` and
  :math:`E_\varepsilon[\hat\varepsilon-\varepsilon]=\sigma(x-\mu)/(s^2+\sigma^2)`: it points from
  the prior's mean to :math:`x`, so a descent step moves :math:`x` toward higher density (the unit
  test checks both).

Weightings :math:`w(\sigma)`: ``"sigma"`` (:math:`w=\sigma`, the VE analogue of DreamFusion's
:math:`\sigma_t^2` on the score scale: the gradient is then :math:`\sigma^2/(s^2+\sigma^2)\,(x-\mu)` for
a Gaussian, bounded by the distance to the mean at every level) or ``"unit"`` (:math:`w=1`).
"""
from __future__ import annotations

from typing import Callable

import torch

from .schedules import log_uniform_sigmas

__all__ = ["WEIGHTINGS", "sds_residual", "sds_surrogate", "gaussian_denoiser"]

WEIGHTINGS = ("sigma", "unit")

Denoiser = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def _weight(weighting: str, sigma: torch.Tensor) -> torch.Tensor:
    if weighting == "sigma":
        return sigma
    if weighting == "unit":
        return torch.ones_like(sigma)
    raise ValueError(f"unknown weighting {weighting!r}; choose one of {', '.join(WEIGHTINGS)}")


def _per_item(sigma, x: torch.Tensor) -> torch.Tensor:
    s = torch.as_tensor(sigma, dtype=x.dtype, device=x.device).reshape(-1)
    if s.numel() == 1:
        s = s.expand(x.shape[0])
    if s.shape[0] != x.shape[0]:
        raise ValueError(f"sigma must be a scalar or have one entry per item ({x.shape[0]}), "
                         f"got {s.shape[0]}")
    if not bool((s > 0).all()):
        raise ValueError("every noise level sigma must be positive")
    return s


@torch.no_grad()
def sds_residual(denoiser: Denoiser, x: torch.Tensor, sigma, eps: torch.Tensor, *,
                 weighting: str = "sigma") -> torch.Tensor:
    r"""The SDS gradient with respect to the image, :math:`w(\sigma)(\hat\varepsilon-\varepsilon)`,
    for a batch ``x`` of shape ``(batch, ...)`` (no graph: the prior is frozen)."""
    if x.ndim < 2:
        raise ValueError(f"x must have a batch dimension, got shape {tuple(x.shape)}")
    if eps.shape != x.shape:
        raise ValueError(f"eps must have the shape of x {tuple(x.shape)}, got {tuple(eps.shape)}")
    s = _per_item(sigma, x)
    view = (-1,) + (1,) * (x.ndim - 1)
    xs = x.detach() + s.view(view) * eps
    eps_hat = (xs - denoiser(xs, s)) / s.view(view)
    return _weight(weighting, s).view(view) * (eps_hat - eps)


def sds_surrogate(denoiser: Denoiser, x: torch.Tensor, generator: torch.Generator, *,
                  sigma_min: float, sigma_max: float, weighting: str = "sigma",
                  n_noise: int = 1) -> torch.Tensor:
    r"""A scalar whose gradient through ``x`` (and so through the renderer) is the SDS gradient:
    :math:`\sum \mathrm{sg}[w(\hat\varepsilon-\varepsilon)]\cdot x`, averaged over ``n_noise``
    independent draws of :math:`(\sigma,\varepsilon)` per item, :math:`\sigma` log-uniform on
    ``[sigma_min, sigma_max]``. Its value means nothing; only its gradient does."""
    if isinstance(n_noise, bool) or not isinstance(n_noise, int) or n_noise < 1:
        raise ValueError(f"n_noise must be a positive int, got {n_noise!r}")
    b = x.shape[0]
    xr = x.detach().repeat_interleave(n_noise, dim=0)
    sig = log_uniform_sigmas(b * n_noise, sigma_min, sigma_max, generator, x.dtype).to(x.device)
    eps = torch.randn(xr.shape, generator=generator, dtype=x.dtype).to(x.device)
    g = sds_residual(denoiser, xr, sig.reshape(-1), eps, weighting=weighting)
    g = g.reshape(b, n_noise, *x.shape[1:]).mean(1)
    return (g * x).sum()


def gaussian_denoiser(mu: torch.Tensor, std: float) -> Denoiser:
    r"""The exact denoiser of :math:`\mathcal N(\mu, \mathrm{std}^2 I)` diffused by the VE process:
    :math:`D(x_\sigma,\sigma)=(s^2x_\sigma+\sigma^2\mu)/(s^2+\sigma^2)` (for tests and as a reference)."""
    if not std > 0:
        raise ValueError(f"std must be positive, got {std!r}")
    s2 = float(std) ** 2

    def D(x: torch.Tensor, sigma: torch.Tensor) -> torch.Tensor:
        sg2 = torch.as_tensor(sigma, dtype=x.dtype).reshape((-1,) + (1,) * (x.ndim - 1)) ** 2
        return (s2 * x + sg2 * mu.to(x)) / (s2 + sg2)
    return D
