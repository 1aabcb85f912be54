r"""Balancedness and balancedness-aware regularisation (BAR; Li, Zhang & He, NeurIPS 2024).

For a scale-invariant pair of factors, a loss :math:`f(XY^\top)` (a LoRA layer's
:math:`\Delta W = XY^\top`; :math:`x, y` vectors for rank one), the **balancedness** is

.. math:: \mathcal B = \tfrac12\big(\|X\|_F^2 - \|Y\|_F^2\big).

Gradient flow conserves it (:math:`X^\top\nabla_X f = Y^\top \nabla_Y f` after a transpose, since
:math:`(cX, Y/c)` leaves :math:`f` unchanged), while SAM's flow moves it at the rate

.. math:: \frac{d\mathcal B}{dt} = \rho\,\frac{\|g_X\|^2 - \|g_Y\|^2}{\sqrt{\|g_X\|^2+\|g_Y\|^2}}
          + \mathcal O(\rho^2)

(the paper's Theorem 2), which shrinks :math:`|\mathcal B|` because :math:`\|g_X\| \propto \|Y\|`
and :math:`\|g_Y\| \propto \|X\|`. BAR makes that drift explicit at no extra gradient: before the
base optimiser's step, with the *same* minibatch gradients, it rescales the two factors.

The paper's two rules (its Algorithms 2 and 3), with :math:`\mu_t = \alpha_t \eta_t`:

* ``"nbar"`` (non-overparametrised, the LoRA case): if :math:`\|g_X\| \ge \|g_Y\|` then
  :math:`X \leftarrow (1+\mu_t)X,\ Y \leftarrow (1-\mu_t)Y`, else the reverse. It follows the *sign*
  of SAM's drift; its size, :math:`\approx \mu_t(\|X\|^2+\|Y\|^2)` per step, does not depend on the
  gradient's magnitude.
* ``"obar"`` (overparametrised): if :math:`\|X\| \ge \|Y\|` then :math:`X \leftarrow (1-\mu_t)X,\
  Y \leftarrow (1+\mu_t)Y`, else the reverse: it shrinks the larger factor.

And one rule of ours, ``"flow"``, which reproduces SAM's drift *including its size* to first order
(the form a later public "gBAR" implementation uses for many factors):

.. math:: X \leftarrow \Big(1 + \mu_t \frac{\|g_X\|^2-\|g_Y\|^2}{2\|X\|^2\,\|g\|}\Big) X, \qquad
          Y \leftarrow \Big(1 - \mu_t \frac{\|g_X\|^2-\|g_Y\|^2}{2\|Y\|^2\,\|g\|}\Big) Y,

so that :math:`\Delta\mathcal B \approx \mu_t (\|g_X\|^2-\|g_Y\|^2)/\|g\|`, SAM's step with
:math:`\rho = \alpha_t`.

nBAR multiplies the product by :math:`(1+\mu_t)(1-\mu_t) = 1-\mu_t^2` at every step: besides
balancing, it decays :math:`XY^\top` like a weight decay of size :math:`\mu_t^2`, negligible at the
paper's AdamW step sizes but not at SGD's. The ablation ``"shrink"`` keeps only that decay: both
factors times :math:`\sqrt{1-\mu_t^2}` (so :math:`\mathcal B` only shrinks in proportion).

All functions act on stacks of independent problems when ``member_dims=1`` (the first dimension
indexes members; norms are per member).
"""
from __future__ import annotations

import math

import torch

from .sam import _bcast, _member_dims, member_sqnorm

__all__ = ["VARIANTS", "SCHEDULES", "balancedness", "bar_rescale", "alpha_at"]

VARIANTS = ("nbar", "obar", "flow", "shrink")
SCHEDULES = ("constant", "linear", "cosine")


def balancedness(x: torch.Tensor, y: torch.Tensor, member_dims: int = 0) -> torch.Tensor:
    r""":math:`\tfrac12(\|x\|^2 - \|y\|^2)` (per member when ``member_dims=1``)."""
    md = _member_dims(member_dims)
    if not isinstance(x, torch.Tensor) or not isinstance(y, torch.Tensor):
        raise TypeError("balancedness(x, y) takes two tensors (the two factors)")
    return 0.5 * (member_sqnorm(x, md) - member_sqnorm(y, md))


def alpha_at(alpha0: float, t: int, total: int, schedule: str = "linear") -> float:
    r"""The regularisation coefficient :math:`\alpha_t` at step ``t`` of ``total``.

    ``"linear"``: :math:`\alpha_0(1 - t/T)`; ``"cosine"``: :math:`\alpha_0(1+\cos(\pi t/T))/2`;
    ``"constant"``: :math:`\alpha_0` (the paper uses all three).
    """
    if schedule not in SCHEDULES:
        raise ValueError(f"schedule must be one of {SCHEDULES}, got {schedule!r}")
    if not (isinstance(total, int) and total >= 1 and isinstance(t, int) and 0 <= t <= total):
        raise ValueError(f"need integers 0 <= t <= total, total >= 1; got t={t!r}, total={total!r}")
    if not math.isfinite(alpha0) or alpha0 < 0:
        raise ValueError(f"alpha0 must be finite and >= 0, got {alpha0}")
    if schedule == "constant":
        return float(alpha0)
    if schedule == "linear":
        return float(alpha0 * (1 - t / total))
    return float(alpha0 * 0.5 * (1 + math.cos(math.pi * t / total)))


def bar_rescale(x: torch.Tensor, y: torch.Tensor, gx: torch.Tensor, gy: torch.Tensor, *,
                alpha: float | torch.Tensor, lr: float | torch.Tensor, variant: str = "nbar",
                member_dims: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """The factors after BAR's rescaling (new tensors; the optimiser's step comes after).

    ``gx``, ``gy`` are the gradients at ``(x, y)`` on the current minibatch; ``alpha`` is
    :math:`\\alpha_t` and ``lr`` the learning rate :math:`\\eta_t`, each a scalar or one per member.
    """
    if variant not in VARIANTS:
        raise ValueError(f"BAR variant must be one of {VARIANTS}, got {variant!r}")
    md = _member_dims(member_dims)
    for name, a, b in (("gx", gx, x), ("gy", gy, y)):
        if not isinstance(a, torch.Tensor) or a.shape != b.shape:
            raise ValueError(f"{name} must be a tensor shaped like its factor {tuple(b.shape)}")
    mu = None
    for name, v in (("alpha", alpha), ("lr", lr)):
        t = torch.as_tensor(v, dtype=x.dtype, device=x.device)
        if t.dim() not in (0, 1) or (t.dim() == 1 and (md == 0 or t.shape[0] != x.shape[0])):
            raise ValueError(f"{name} must be a scalar or (with member_dims=1) one value per member")
        if not torch.isfinite(t).all() or (t < 0).any():
            raise ValueError(f"{name} must be finite and >= 0")
        mu = t if mu is None else mu * t
    return _rescale(x, y, gx, gy, mu, variant, md)


def _rescale(x, y, gx, gy, mu, variant, md):
    """:func:`bar_rescale` without the argument checks (the training loop checks once); each rule
    computes only the norms it needs (nBAR: the two gradient norms)."""
    if variant == "nbar":
        sign = torch.where(member_sqnorm(gx, md) >= member_sqnorm(gy, md), 1.0, -1.0)
        sx, sy = 1 + sign * mu, 1 - sign * mu
    elif variant == "obar":
        sign = torch.where(member_sqnorm(x, md) >= member_sqnorm(y, md), 1.0, -1.0)
        sx, sy = 1 - sign * mu, 1 + sign * mu
    elif variant == "shrink":  # the ablation: nBAR's decay of the product, no balancing
        sx = sy = (1 - mu * mu).clamp_min(0.0).sqrt()
    else:  # flow: SAM's first-order drift of B, split between the two factors
        ngx, ngy = member_sqnorm(gx, md), member_sqnorm(gy, md)
        drift = mu * (ngx - ngy) / (ngx + ngy).sqrt().clamp_min(1e-30)
        sx = 1 + drift / (2 * member_sqnorm(x, md).clamp_min(1e-30))
        sy = 1 - drift / (2 * member_sqnorm(y, md).clamp_min(1e-30))
    return _bcast(sx, x, md) * x, _bcast(sy, y, md) * y
