r"""A stack of independent ReLU MLPs ("members") in a width parameterisation, written functionally.

The weights of layer :math:`l` are one tensor of shape ``(G, fan_out, fan_in)`` holding all
:math:`G` members (one per hyperparameter setting or seed), so a hyperparameter grid trains in one
batched pass (``torch.bmm``). Inputs are ``(G, batch, d_in)``: each member may see its own
minibatch. No biases: the chapter's inputs are standardised, and a bias-free network keeps every
layer a matrix with a role of :mod:`reprobook.models.parametrization`.

.. math::
    h^0 = x, \qquad z^l = m^{-a_l}\, h^{l-1} (W^l)^\top, \qquad
    h^l = \mathrm{relu}(z^l)\ (l < L), \qquad f(x) = z^L.
"""
from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from .parametrization import Parametrization, mlp_roles

__all__ = ["init_mlp", "mlp_forward", "layer_inputs", "perturbation_effects"]


def _check_sizes(sizes) -> list[int]:
    sizes = list(sizes)
    if len(sizes) < 3 or any(isinstance(s, bool) or not isinstance(s, int) or s < 1
                             for s in sizes):
        raise ValueError(f"sizes must be >= 3 positive ints (d_in, widths..., d_out), got {sizes}")
    return sizes


def init_mlp(sizes: Sequence[int], base_sizes: Sequence[int], param: Parametrization,
             members: int, generator: torch.Generator, dtype=torch.float32,
             device=None) -> list[torch.Tensor]:
    """Initial weights (one (members, fan_out, fan_in) tensor per layer) for ``sizes`` = (d_in,
    n, ..., n, d_out) in ``param``, relative to the base network ``base_sizes``.

    Layer :math:`l` draws :math:`N(0, (\\sigma_l m^{-b_l})^2)` with :math:`\\sigma_l` one over the
    square root of its fan-in in the base network and :math:`m = n/n_0`.
    """
    sizes, base_sizes = _check_sizes(sizes), _check_sizes(base_sizes)
    if len(sizes) != len(base_sizes) or sizes[0] != base_sizes[0] or sizes[-1] != base_sizes[-1]:
        raise ValueError(f"sizes {sizes} and base_sizes {base_sizes} must have the same depth, "
                         "input and output")
    if isinstance(members, bool) or not isinstance(members, int) or members < 1:
        raise ValueError(f"members must be a positive int, got {members!r}")
    m = sizes[1] / base_sizes[1]
    roles = mlp_roles(len(sizes) - 1)
    out = []
    for l, role in enumerate(roles):
        std = param.init_std(role, m, 1.0 / math.sqrt(base_sizes[l]))
        w = torch.randn(members, sizes[l + 1], sizes[l], generator=generator, dtype=dtype)
        out.append((std * w).to(device))
    return out


def _forward(params, x, param, m, keep_inputs):
    if not isinstance(x, torch.Tensor) or x.dim() != 3 or x.shape[0] != params[0].shape[0]:
        raise ValueError(f"x must be (members={params[0].shape[0]}, batch, d_in), got "
                         f"{tuple(getattr(x, 'shape', ()))}")
    roles = mlp_roles(len(params))
    h, inputs = x, []
    for l, (w, role) in enumerate(zip(params, roles)):
        if keep_inputs:
            inputs.append(h)
        z = torch.bmm(h, w.transpose(1, 2))
        mult = param.multiplier(role, m)
        if mult != 1.0:
            z = mult * z
        h = torch.relu(z) if l < len(params) - 1 else z
    return h, inputs


def mlp_forward(params: Sequence[torch.Tensor], x: torch.Tensor, param: Parametrization,
                m: float) -> torch.Tensor:
    """Logits (members, batch, d_out) of every member on its own inputs ``x``."""
    return _forward(list(params), x, param, m, False)[0]


def layer_inputs(params: Sequence[torch.Tensor], x: torch.Tensor, param: Parametrization,
                 m: float) -> list[torch.Tensor]:
    """The input :math:`h^{l-1}` of every layer (what a perturbation of :math:`W^l` acts on)."""
    return _forward(list(params), x, param, m, True)[1]


def perturbation_effects(deltas: Sequence[torch.Tensor], inputs: Sequence[torch.Tensor],
                         param: Parametrization, m: float) -> list[torch.Tensor]:
    r"""The first-order change of each layer's pre-activations caused by that layer's own weight
    change :math:`\delta^l` (a SAM perturbation, an update): per member, the root mean square over
    the batch and the units of :math:`m^{-a_l}\, h^{l-1} (\delta^l)^\top`. One (G,) tensor per layer.

    A layer is *effectively perturbed* when this stays :math:`\Theta(1)` as the width grows.
    """
    deltas, inputs = list(deltas), list(inputs)
    if len(deltas) != len(inputs):
        raise ValueError(f"need one input per layer: {len(deltas)} deltas, {len(inputs)} inputs")
    roles = mlp_roles(len(deltas))
    out = []
    for d, h, role in zip(deltas, inputs, roles):
        if d.dim() != 3 or h.dim() != 3 or d.shape[2] != h.shape[2] or d.shape[0] != h.shape[0]:
            raise ValueError(f"delta {tuple(d.shape)} does not act on input {tuple(h.shape)}")
        z = param.multiplier(role, m) * torch.bmm(h, d.transpose(1, 2))
        out.append(z.pow(2).mean(dim=(1, 2)).sqrt())
    return out
