r"""Expected improvement for a Gaussian posterior, its log, the smooth EI utility used by EULBO,
Gauss-Hermite expectations and a multi-start optimiser over the unit cube.

**EI.** For :math:`f(x) \sim \mathcal N(\mu, \sigma^2)` and incumbent :math:`y^*`, with
:math:`z = (\mu - y^*)/\sigma`,

.. math:: \mathrm{EI} = \mathbb E[\max(f - y^*, 0)] = \sigma\,h(z),\qquad h(z) = \varphi(z) + z\,\Phi(z).

**log-EI.** :math:`\log\mathrm{EI} = \log\sigma + \log h(z)`. For :math:`z \ll 0`, :math:`h(z)`
underflows, so write :math:`h(z) = \varphi(z)\,(1 - t\,R(t))` with :math:`t = -z` and the Mills ratio
:math:`R(t) = \Phi(-t)/\varphi(t) = \sqrt{\pi/2}\,\operatorname{erfcx}(t/\sqrt 2)`; then
:math:`\log h(z) = \log\varphi(z) + \log(1 - tR(t))` stays finite.

**Smooth EI utility.** :math:`u(x, f) = \max(f(x) - y^*, 0)` has :math:`\log u = -\infty` on half the
line, so EULBO (Maus et al. 2024) uses :math:`u = \operatorname{softplus}(f(x) - y^*)`,
:math:`\operatorname{softplus}(a) = \log(1 + e^a) > 0`.

**Gauss-Hermite.** For :math:`f \sim \mathcal N(\mu, \sigma^2)`,

.. math:: \mathbb E[g(f)] = \frac{1}{\sqrt\pi}\int e^{-t^2} g(\mu + \sqrt2\,\sigma t)\,dt
   \approx \frac{1}{\sqrt\pi}\sum_{k=1}^{K} w_k\, g(\mu + \sqrt2\,\sigma t_k),

exact for polynomials of degree :math:`\le 2K - 1`. It is differentiable in :math:`(\mu, \sigma)`, which
is what lets EULBO push gradients of :math:`\mathbb E_q[\log u]` into :math:`q` and into :math:`x`.
"""
from __future__ import annotations

import math
from typing import Callable

import numpy as np
import torch

__all__ = ["expected_improvement", "log_expected_improvement", "log_softplus_utility",
           "gauss_hermite_expectation", "expected_log_utility_ei", "optimize_acquisition"]

DTYPE = torch.float64
_LOG_SQRT_2PI = 0.5 * math.log(2 * math.pi)


def _check_sigma(sigma: torch.Tensor) -> None:
    if (sigma <= 0).any():
        raise ValueError("sigma must be > 0 everywhere")


def expected_improvement(mean: torch.Tensor, sigma: torch.Tensor, best_f) -> torch.Tensor:
    r""":math:`\sigma h(z)` elementwise (maximisation)."""
    sigma = torch.as_tensor(sigma, dtype=mean.dtype)
    _check_sigma(sigma)
    # sigma * exp(log h(z)): the direct phi(z) + z Phi(z) cancels catastrophically for z << 0
    return sigma * torch.exp(_log_h((mean - best_f) / sigma))


def _log_h(z: torch.Tensor) -> torch.Tensor:
    log_phi = -0.5 * z * z - _LOG_SQRT_2PI
    # z >= -1: h(z) is of order one, the direct formula is accurate
    zs = z.clamp_min(-1.0)
    direct = torch.log(torch.exp(-0.5 * zs * zs - _LOG_SQRT_2PI) + zs * torch.special.ndtr(zs))
    # z < -1: h = phi(z) (1 - t R(t)), t = -z, R the Mills ratio, via erfcx (no underflow)
    t = (-z).clamp_min(1.0)
    r = math.sqrt(math.pi / 2) * torch.special.erfcx(t / math.sqrt(2))
    tail = log_phi + torch.log1p(-(t * r).clamp(max=1 - 1e-16))
    return torch.where(z >= -1.0, direct, tail)


def log_expected_improvement(mean: torch.Tensor, sigma: torch.Tensor, best_f) -> torch.Tensor:
    r""":math:`\log\sigma + \log h(z)`, finite far into the tail (:math:`z \approx -30` and below)."""
    sigma = torch.as_tensor(sigma, dtype=mean.dtype)
    _check_sigma(sigma)
    return sigma.log() + _log_h((mean - best_f) / sigma)


def log_softplus_utility(f: torch.Tensor, best_f) -> torch.Tensor:
    r""":math:`\log\operatorname{softplus}(f - y^*)`; for :math:`a < -30`, :math:`\log\operatorname{softplus}(a) = a`
    to double precision, which avoids :math:`\log 0`."""
    a = f - best_f
    safe = torch.nn.functional.softplus(a.clamp_min(-30.0)).log()
    return torch.where(a < -30.0, a, safe)


_GH_CACHE: dict[int, tuple[np.ndarray, np.ndarray]] = {}


def gauss_hermite_expectation(fn: Callable[[torch.Tensor], torch.Tensor], mean: torch.Tensor,
                              var: torch.Tensor, n_points: int = 20) -> torch.Tensor:
    r""":math:`\mathbb E[fn(f)]` for :math:`f \sim \mathcal N(\text{mean}, \text{var})`, elementwise,
    by ``n_points``-node Gauss-Hermite quadrature. ``fn`` must act elementwise."""
    if not isinstance(n_points, int) or n_points < 1:
        raise ValueError(f"n_points must be a positive int, got {n_points!r}")
    mean = torch.as_tensor(mean, dtype=DTYPE) if not isinstance(mean, torch.Tensor) else mean
    var = torch.as_tensor(var, dtype=mean.dtype) if not isinstance(var, torch.Tensor) else var
    if (var < 0).any():
        raise ValueError("var must be >= 0")
    if n_points not in _GH_CACHE:
        _GH_CACHE[n_points] = np.polynomial.hermite.hermgauss(n_points)
    t, w = (torch.as_tensor(a, dtype=mean.dtype) for a in _GH_CACHE[n_points])
    f = mean[..., None] + math.sqrt(2.0) * var.clamp_min(0).sqrt()[..., None] * t
    return (fn(f) * w).sum(-1) / math.sqrt(math.pi)


def expected_log_utility_ei(mean: torch.Tensor, var: torch.Tensor, best_f, n_points: int = 20):
    r""":math:`\mathbb E_{f\sim\mathcal N(\text{mean},\text{var})}[\log\operatorname{softplus}(f - y^*)]`."""
    return gauss_hermite_expectation(lambda f: log_softplus_utility(f, best_f), mean, var, n_points)


def optimize_acquisition(acq: Callable[[torch.Tensor], torch.Tensor], dim: int, *,
                         lower: torch.Tensor | None = None, upper: torch.Tensor | None = None,
                         n_raw: int = 256, n_restarts: int = 8, steps: int = 60, lr: float = 0.02,
                         seed: int = 0) -> tuple[torch.Tensor, float]:
    r"""Maximise ``acq`` (maps (b, d) to (b,)) over the box ``[lower, upper]`` (default unit cube).

    Multi-start: score ``n_raw`` scrambled-Sobol points, start Adam from the ``n_restarts`` best,
    run ``steps`` projected steps (clamp to the box after each), and return the best point seen
    (evaluated exactly, not the last iterate) and its value.
    """
    if not isinstance(dim, int) or dim < 1:
        raise ValueError(f"dim must be a positive int, got {dim!r}")
    for name, v in (("n_raw", n_raw), ("n_restarts", n_restarts)):
        if not isinstance(v, int) or v < 1:
            raise ValueError(f"{name} must be a positive int, got {v!r}")
    if not isinstance(steps, int) or steps < 0:
        raise ValueError(f"steps must be an int >= 0, got {steps!r}")
    lo = torch.zeros(dim, dtype=DTYPE) if lower is None else torch.as_tensor(lower, dtype=DTYPE)
    hi = torch.ones(dim, dtype=DTYPE) if upper is None else torch.as_tensor(upper, dtype=DTYPE)
    if lo.shape != (dim,) or hi.shape != (dim,) or (hi <= lo).any():
        raise ValueError(f"lower and upper must have shape ({dim},) with lower < upper")
    sob = torch.quasirandom.SobolEngine(dim, scramble=True, seed=seed)
    raw = lo + (hi - lo) * sob.draw(n_raw, dtype=DTYPE)
    with torch.no_grad():
        vals = acq(raw)
    best_val, best_i = vals.max(0)
    best_x, best_val = raw[best_i].clone(), float(best_val)
    starts = raw[vals.argsort(descending=True)[:min(n_restarts, n_raw)]].clone()
    x = starts.requires_grad_(True)
    opt = torch.optim.Adam([x], lr=lr)
    for _ in range(steps):
        opt.zero_grad()
        v = acq(x)
        (-v.sum()).backward()
        opt.step()
        with torch.no_grad():
            x.copy_(torch.maximum(torch.minimum(x, hi), lo))
    with torch.no_grad():
        v = acq(x)
        j = int(v.argmax())
        if float(v[j]) > best_val:
            best_x, best_val = x[j].detach().clone(), float(v[j])
    return best_x, best_val
