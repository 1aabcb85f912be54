r"""The perturbed Fenchel-Young loss for a combinatorial *minimisation* layer.

A layer :math:`\hat y(\theta) = \arg\min_{y \in \mathcal Y} \theta^\top y` is piecewise constant in
:math:`\theta`, so it has no useful gradient. Perturbing it with Gaussian noise,

.. math:: F_\varepsilon(\theta) = \mathbb E_Z\big[\min_{y \in \mathcal Y} (\theta + \varepsilon Z)^\top y\big],
   \qquad \hat y_\varepsilon(\theta) = \nabla F_\varepsilon(\theta)
   = \mathbb E_Z\big[\arg\min_y (\theta + \varepsilon Z)^\top y\big],

gives a smooth concave :math:`F_\varepsilon` (Berthet et al., 2020). For a target :math:`y^\star`
the Fenchel-Young loss (sign-adapted to minimisation, up to a constant in :math:`\theta`) is

.. math:: L_\varepsilon(\theta; y^\star) = \theta^\top y^\star - F_\varepsilon(\theta) \;\ge 0,
   \qquad \nabla_\theta L_\varepsilon = y^\star - \hat y_\varepsilon(\theta).

It is convex in :math:`\theta`, non-negative because :math:`\min_y (\theta+\varepsilon Z)^\top y \le
(\theta+\varepsilon Z)^\top y^\star` for every :math:`Z` (and :math:`\mathbb E Z = 0`), and it tends to
0 as :math:`\theta` makes :math:`y^\star` the clear minimiser. A gradient *descent* step therefore
lowers the cost of the target's components and raises that of the components the layer picks
instead. We estimate it with ``M`` fixed noise draws:
:math:`\hat L = \frac1M \sum_m [(\theta + \varepsilon Z_m)^\top y^\star - (\theta + \varepsilon Z_m)^\top \hat y_m]`
with :math:`\hat y_m` the solver's answer for :math:`\theta + \varepsilon Z_m`. Each term is
:math:`\ge 0` when the solver is exact. With a heuristic solver a term can be negative (the
heuristic missed a tree cheaper than the target); we still use the heuristic's answer in the
gradient, because replacing it by the target would zero the gradient exactly where the layer is
wrong.
"""
from __future__ import annotations

import numpy as np
import torch

__all__ = ["PerturbedFenchelYoung", "fenchel_young_loss", "perturbed_argmin"]


def _check(theta, y_target, eps, noise):
    if theta.dim() != 1:
        raise ValueError(f"theta must be a 1-D tensor, got shape {tuple(theta.shape)}")
    if y_target.shape != theta.shape:
        raise ValueError(f"y_target must have theta's shape {tuple(theta.shape)}, "
                         f"got {tuple(y_target.shape)}")
    if not eps > 0:
        raise ValueError(f"eps must be > 0, got {eps}")
    if noise.dim() != 2 or noise.shape[1] != theta.shape[0] or noise.shape[0] < 1:
        raise ValueError(f"noise must have shape (M, {theta.shape[0]}), got {tuple(noise.shape)}")


class PerturbedFenchelYoung(torch.autograd.Function):
    """``apply(theta, y_target, solver, eps, noise, sign)`` -> scalar loss.

    ``solver(theta_np) -> y_np`` minimises :math:`\\theta^\\top y`; ``noise`` is ``(M, d)``;
    ``sign`` is +1 (correct). ``sign = -1`` flips the gradient, a planted bug for the chapter.
    ``ctx`` keeps :math:`y^\\star - \\hat y_\\varepsilon` for the backward pass."""

    @staticmethod
    def forward(ctx, theta, y_target, solver, eps, noise, sign=1.0):
        th = theta.detach().cpu().double().numpy()
        yt = y_target.detach().cpu().double().numpy()
        z = noise.detach().cpu().double().numpy()
        losses, ys = [], []
        for zm in z:
            tp = th + eps * zm
            y = np.asarray(solver(tp), dtype=float)
            losses.append(tp @ yt - tp @ y)
            ys.append(y)
        y_eps = np.mean(ys, axis=0)
        ctx.grad = torch.as_tensor(sign * (yt - y_eps), dtype=theta.dtype, device=theta.device)
        ctx.y_eps = y_eps
        return theta.new_tensor(float(np.mean(losses)))

    @staticmethod
    def backward(ctx, grad_out):
        return grad_out * ctx.grad, None, None, None, None, None


def fenchel_young_loss(theta: torch.Tensor, y_target, solver, eps: float = 1.0,
                       n_samples: int = 8, generator: torch.Generator | None = None,
                       sign: float = 1.0) -> torch.Tensor:
    """Monte-Carlo perturbed Fenchel-Young loss (see the module docstring)."""
    if not isinstance(n_samples, int) or n_samples < 1:
        raise ValueError(f"n_samples must be a positive integer, got {n_samples!r}")
    y_target = torch.as_tensor(y_target, dtype=theta.dtype)
    noise = torch.randn((n_samples, theta.shape[-1]), generator=generator, dtype=torch.float64)
    _check(theta, y_target, eps, noise)
    return PerturbedFenchelYoung.apply(theta, y_target, solver, float(eps), noise, float(sign))


def perturbed_argmin(theta, solver, eps: float, noise) -> np.ndarray:
    """:math:`\\hat y_\\varepsilon(\\theta)`, the mean solver output over the noise draws."""
    th = np.asarray(theta, dtype=float)
    z = np.asarray(noise, dtype=float)
    if not eps > 0:
        raise ValueError(f"eps must be > 0, got {eps}")
    if z.ndim != 2 or z.shape[1] != th.shape[0]:
        raise ValueError(f"noise must have shape (M, {th.shape[0]}), got {z.shape}")
    return np.mean([np.asarray(solver(th + eps * zm), dtype=float) for zm in z], axis=0)
