r"""DDIM on a discrete variance-preserving chain: sampling, inversion, and energy guidance.

The chain is DDPM's: :math:`x_t=\sqrt{\bar\alpha_t}\,x_0+\sqrt{1-\bar\alpha_t}\,\varepsilon`,
:math:`t=0..T-1`, :math:`\bar\alpha_t=\prod_{s\le t}(1-\beta_s)` (:func:`linear_alphas_cumprod`, the
``"linear"`` schedule of ``diffusers``). With a noise prediction :math:`\hat\varepsilon` at step
:math:`t`, the clean estimate is :math:`\hat x_0=(x_t-\sqrt{1-\bar\alpha_t}\hat\varepsilon)/\sqrt{\bar\alpha_t}`
and one **DDIM step** to an earlier step :math:`s` (Song et al. 2021, eq. 12) is

.. math:: x_s=\sqrt{\bar\alpha_s}\,\hat x_0+\sqrt{1-\bar\alpha_s-\sigma^2}\,\hat\varepsilon+\sigma z,\qquad
          \sigma=\eta\sqrt{\tfrac{1-\bar\alpha_s}{1-\bar\alpha_t}}\sqrt{1-\tfrac{\bar\alpha_t}{\bar\alpha_s}},

deterministic at :math:`\eta=0`; :math:`\bar\alpha_{-1}=1` (``set_alpha_to_one``). **DDIM inversion**
runs the deterministic step the other way, :math:`x_{s'}=\sqrt{\bar\alpha_{s'}}\hat x_0+\sqrt{1-\bar\alpha_{s'}}\hat\varepsilon`
for a later :math:`s'`, with :math:`\hat\varepsilon` taken at the current (lower) step. Both formulas are
``diffusers``' ``DDIMScheduler.step`` and ``DDIMInverseScheduler.step`` (checked in the tests).

**Energy guidance** (classifier guidance with an energy :math:`E=-\log p(\text{condition}\mid x_t)`
up to a constant, as DragonDiffusion and DiffEditor use it): before each step the noise prediction is
shifted by the energy's gradient,

.. math:: \tilde\varepsilon=\hat\varepsilon+\sqrt{1-\bar\alpha_t}\;\nabla_{x_t}\textstyle\sum_k s_k E_k(x_t,\hat x_0(x_t),t),

which is the score of :math:`p(x_t)\,\prod_k p_k(\cdot\mid x_t)^{s_k}`. An energy may read :math:`\hat x_0`
(drag and content terms: the gradient flows back through the network) or :math:`x_t` itself (a
time-conditioned discriminator). :math:`\hat x_0` and the step then use :math:`\tilde\varepsilon`.

:class:`EpsFromDenoiser` turns an EDM denoiser :math:`D(x,\sigma)` (:mod:`.unet`) into a noise
predictor on this chain: a VP state is the VE state :math:`x_t/\sqrt{\bar\alpha_t}` at level
:math:`\sigma_t=\sqrt{(1-\bar\alpha_t)/\bar\alpha_t}`, so :math:`\hat x_0=D(x_t/\sqrt{\bar\alpha_t},\sigma_t)`.
"""
from __future__ import annotations

from typing import Callable, Sequence

import torch

__all__ = ["linear_alphas_cumprod", "ddim_timesteps", "EpsFromDenoiser", "ddim_step", "ddim_invert_step",
           "ddim_invert", "ddim_sample", "Energy"]

# energy(x_t, x0_hat, t) -> one energy per image, shape (n,)
Energy = Callable[[torch.Tensor, torch.Tensor, int], torch.Tensor]


def linear_alphas_cumprod(T: int = 1000, beta_start: float = 1e-4, beta_end: float = 0.02) -> torch.Tensor:
    """:math:`\\bar\\alpha_t` of DDPM's linear :math:`\\beta` schedule, float64, length ``T``."""
    if isinstance(T, bool) or not isinstance(T, int) or T < 2:
        raise ValueError(f"T must be an int >= 2, got {T!r}")
    if not 0 < beta_start < beta_end < 1:
        raise ValueError(f"need 0 < beta_start < beta_end < 1, got {beta_start}, {beta_end}")
    betas = torch.linspace(beta_start, beta_end, T, dtype=torch.float64)
    return torch.cumprod(1 - betas, 0)


def ddim_timesteps(T: int, n_steps: int, strength: float = 1.0) -> list[int]:
    """Descending DDIM timesteps with ``diffusers``' ``"leading"`` spacing (stride ``T // n_steps``),
    keeping the last ``round(n_steps * strength)`` of them (an edit starts from a partly noised image)."""
    if not 1 <= n_steps <= T:
        raise ValueError(f"need 1 <= n_steps <= T, got {n_steps}, {T}")
    if not 0 < strength <= 1:
        raise ValueError(f"strength must be in (0, 1], got {strength}")
    stride = T // n_steps
    ts = [i * stride for i in range(n_steps)][::-1]
    keep = max(1, round(n_steps * strength))
    return ts[-keep:]


def _ab(alphas_cumprod: torch.Tensor, t: int) -> float:
    return float(alphas_cumprod[t]) if t >= 0 else 1.0


class EpsFromDenoiser:
    """Noise prediction :math:`\\hat\\varepsilon(x_t,t)` from an EDM denoiser ``net(x, sigma)``."""

    def __init__(self, net: Callable, alphas_cumprod: torch.Tensor):
        if alphas_cumprod.ndim != 1:
            raise ValueError("alphas_cumprod must be 1-d")
        self.net, self.alphas_cumprod = net, alphas_cumprod

    def __call__(self, x: torch.Tensor, t: int) -> torch.Tensor:
        ab = _ab(self.alphas_cumprod, t)
        sigma = ((1 - ab) / ab) ** 0.5
        x0 = self.net(x / ab ** 0.5, torch.full((x.shape[0],), sigma, dtype=x.dtype, device=x.device))
        return (x - ab ** 0.5 * x0) / (1 - ab) ** 0.5


def ddim_step(x: torch.Tensor, eps: torch.Tensor, ab_t: float, ab_prev: float, eta: float = 0.0,
              noise: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """One DDIM step from level ``ab_t`` to the earlier ``ab_prev``; returns ``(x_prev, x0_hat)``."""
    if x.shape != eps.shape:
        raise ValueError(f"x and eps must have the same shape, got {tuple(x.shape)}, {tuple(eps.shape)}")
    if not 0 < ab_t <= ab_prev <= 1:
        raise ValueError(f"need 0 < ab_t <= ab_prev <= 1 (a step towards the data), got {ab_t}, {ab_prev}")
    if eta < 0:
        raise ValueError(f"eta must be >= 0, got {eta}")
    x0 = (x - (1 - ab_t) ** 0.5 * eps) / ab_t ** 0.5
    sigma = eta * ((1 - ab_prev) / (1 - ab_t)) ** 0.5 * (1 - ab_t / ab_prev) ** 0.5 if eta > 0 else 0.0
    out = ab_prev ** 0.5 * x0 + max(1 - ab_prev - sigma ** 2, 0.0) ** 0.5 * eps
    if sigma > 0:
        if noise is None:
            raise ValueError("eta > 0 needs noise (a standard normal tensor shaped like x)")
        out = out + sigma * noise
    return out, x0


def ddim_invert_step(x: torch.Tensor, eps: torch.Tensor, ab_t: float, ab_next: float) -> torch.Tensor:
    """One deterministic DDIM inversion step from level ``ab_t`` to the later (noisier) ``ab_next``."""
    if x.shape != eps.shape:
        raise ValueError(f"x and eps must have the same shape, got {tuple(x.shape)}, {tuple(eps.shape)}")
    if not 0 < ab_next <= ab_t <= 1:
        raise ValueError(f"need 0 < ab_next <= ab_t <= 1 (a step towards noise), got {ab_t}, {ab_next}")
    x0 = (x - (1 - ab_t) ** 0.5 * eps) / ab_t ** 0.5
    return ab_next ** 0.5 * x0 + (1 - ab_next) ** 0.5 * eps


def _prev(timesteps: Sequence[int], i: int) -> int:
    return timesteps[i + 1] if i + 1 < len(timesteps) else -1


@torch.no_grad()
def ddim_invert(eps_fn: Callable, x0: torch.Tensor, timesteps: Sequence[int],
                alphas_cumprod: torch.Tensor) -> torch.Tensor:
    """Map a clean image to its DDIM latent at ``timesteps[0]`` (``timesteps`` descending, as
    :func:`ddim_sample` takes them)."""
    if list(timesteps) != sorted(timesteps, reverse=True) or len(set(timesteps)) != len(timesteps):
        raise ValueError("timesteps must be strictly descending")
    x = x0
    levels = [-1] + list(timesteps)[::-1]           # ascending, from the data
    for cur, nxt in zip(levels[:-1], levels[1:]):
        # at the data (cur = -1) the network is asked at the first positive step, as diffusers does
        eps = eps_fn(x, max(cur, nxt if cur < 0 else cur))
        x = ddim_invert_step(x, eps, _ab(alphas_cumprod, cur), _ab(alphas_cumprod, nxt))
    return x


def ddim_sample(eps_fn: Callable, x: torch.Tensor, timesteps: Sequence[int], alphas_cumprod: torch.Tensor,
                *, eta: float = 0.0, generator: torch.Generator | None = None,
                energies: Sequence[tuple[Energy, float]] = (), guide_steps: int | None = None,
                eps_override: Callable | None = None) -> torch.Tensor:
    """DDIM from ``x`` at ``timesteps[0]`` down to the data, with optional energy guidance.

    ``energies``: pairs ``(E, scale)``; the guidance is applied on the first ``guide_steps`` steps
    (all by default). ``eps_override(x_t, t, eps)`` may replace the noise prediction before guidance
    (classifier-free guidance plugs in there).
    """
    if list(timesteps) != sorted(timesteps, reverse=True) or len(set(timesteps)) != len(timesteps):
        raise ValueError("timesteps must be strictly descending")
    if eta > 0 and generator is None:
        raise ValueError("eta > 0 needs a torch.Generator for the sampler's noise")
    n_guided = len(timesteps) if guide_steps is None else int(guide_steps)
    active = [(e, float(s)) for e, s in energies if float(s) != 0.0]
    for i, t in enumerate(timesteps):
        ab_t, ab_prev = _ab(alphas_cumprod, t), _ab(alphas_cumprod, _prev(timesteps, i))
        if active and i < n_guided:
            with torch.enable_grad():
                xg = x.detach().requires_grad_(True)
                eps = eps_fn(xg, t)
                if eps_override is not None:
                    eps = eps_override(xg, t, eps)
                x0 = (xg - (1 - ab_t) ** 0.5 * eps) / ab_t ** 0.5
                total = sum(s * e(xg, x0, t).sum() for e, s in active)
                grad, = torch.autograd.grad(total, xg)
            eps = eps.detach() + (1 - ab_t) ** 0.5 * grad
        else:
            with torch.no_grad():
                eps = eps_fn(x, t)
                if eps_override is not None:
                    eps = eps_override(x, t, eps)
        noise = (torch.randn(x.shape, generator=generator, dtype=x.dtype).to(x.device)
                 if eta > 0 and _prev(timesteps, i) >= 0 else None)
        x, _ = ddim_step(x.detach(), eps.detach(), ab_t, ab_prev, eta if noise is not None else 0.0, noise)
    return x
