r"""Symmetries of MLP weights: hidden-neuron permutations and scalings that keep the function.

For an MLP with weights :math:`W^{(l)}` (shape ``(n_l, n_{l-1})``) and biases :math:`b^{(l)}`, pick
for every hidden layer :math:`l` a permutation :math:`P_l` and a diagonal :math:`Q_l =
\operatorname{diag}(q_l)`; the input and output layers keep :math:`P_0 = P_L = Q_0 = Q_L = I`. The
action

.. math:: W^{(l)} \mapsto P_l Q_l\, W^{(l)}\, Q_{l-1}^{-1} P_{l-1}^{\top}, \qquad
          b^{(l)} \mapsto P_l Q_l\, b^{(l)}

leaves the network's function unchanged whenever :math:`\sigma(q z) = q\,\sigma(z)` for the allowed
:math:`q`: **ReLU** (and any positively homogeneous activation) for :math:`q > 0`, **tanh** (any
odd activation) for :math:`q \in \{-1, +1\}`. In the graph picture neuron :math:`i` of a hidden
layer scales by :math:`q_i`, the edge :math:`j \to i` by :math:`q_i / q_j`.

:func:`random_symmetry` draws such a group element per network: for ReLU the scales are
log-uniform on ``scale_range`` (so :math:`q` and :math:`1/q` are equally likely), for tanh the signs
are fair coin flips; the permutations are uniform.
"""
from __future__ import annotations

import math

import torch

from .sine_mlps import check_mlp_params

__all__ = ["SYMMETRIES", "act_on_mlp", "random_symmetry", "random_group_element"]

#: The scaling group each activation admits: "scale" (q > 0) or "sign" (q = +-1).
SYMMETRIES = {"relu": "scale", "tanh": "sign"}


def act_on_mlp(weights, biases, scales=None, perms=None):
    """Apply hidden-neuron scalings and permutations (see the module) to a batch of MLPs.

    ``scales`` and ``perms`` hold one entry per *hidden* layer (``len(weights) - 1`` of them):
    ``scales[k]`` of shape ``(N, n_{k+1})`` (non-zero), ``perms[k]`` a long tensor of shape
    ``(N, n_{k+1})`` whose rows are permutations; either may be ``None`` (identity). The new neuron
    ``i`` of a permuted layer is the old neuron ``perm[i]``. Returns new ``(weights, biases)``
    tuples; the inputs are not modified.
    """
    layout = check_mlp_params(weights, biases)
    n, hidden = weights[0].shape[0], layout[1:-1]
    for name, vals in (("scales", scales), ("perms", perms)):
        if vals is not None and len(vals) != len(hidden):
            raise ValueError(f"{name} needs one entry per hidden layer ({len(hidden)}), "
                             f"got {len(vals)}")
    for k, h in enumerate(hidden):
        if scales is not None and tuple(scales[k].shape) != (n, h):
            raise ValueError(f"scales[{k}] must have shape ({n}, {h}), "
                             f"got {tuple(scales[k].shape)}")
        if scales is not None and bool((scales[k] == 0).any()):
            raise ValueError(f"scales[{k}] has zeros; a scaling must be invertible")
        if perms is not None:
            p = perms[k]
            if tuple(p.shape) != (n, h) or p.dtype != torch.long:
                raise ValueError(f"perms[{k}] must be a long tensor of shape ({n}, {h})")
            if not torch.equal(p.sort(dim=1).values, torch.arange(h).expand(n, h)):
                raise ValueError(f"perms[{k}] has a row that is not a permutation of 0..{h - 1}")
    def ones(m):
        return torch.ones(n, m, dtype=weights[0].dtype, device=weights[0].device)

    q = [ones(layout[0])]                      # input and output neurons are never scaled
    for k, h in enumerate(hidden):
        q.append(scales[k].to(weights[0]) if scales is not None else ones(h))
    q.append(ones(layout[-1]))
    new_w, new_b = [], []
    for l, (w, b) in enumerate(zip(weights, biases)):
        w = q[l + 1][:, :, None] * w / q[l][:, None, :]
        b = q[l + 1] * b
        if perms is not None and l < len(hidden):            # permute this layer's outputs (rows)
            idx = perms[l].to(w.device)
            w = torch.gather(w, 1, idx[:, :, None].expand_as(w))
            b = torch.gather(b, 1, idx)
        if perms is not None and l > 0:            # and the next layer's inputs (columns)
            idx = perms[l - 1].to(w.device)
            w = torch.gather(w, 2, idx[:, None, :].expand_as(w))
        new_w.append(w)
        new_b.append(b)
    return tuple(new_w), tuple(new_b)


def random_group_element(layout, n: int, activation: str, generator: torch.Generator, *,
                         scale_range=(0.1, 10.0), permute: bool = True, dtype=torch.float32):
    """Draw ``(scales, perms)`` for ``n`` networks of the given layout (see the module).

    ``activation`` decides the scaling group (:data:`SYMMETRIES`); ``perms`` is ``None`` when
    ``permute`` is false. All randomness comes from ``generator`` (a CPU generator).
    """
    if activation not in SYMMETRIES:
        raise ValueError(f"unknown activation {activation!r}; use one of {sorted(SYMMETRIES)}")
    lo, hi = scale_range
    if not 0 < lo <= hi:
        raise ValueError(f"scale_range must be (low, high) with 0 < low <= high, got {scale_range}")
    hidden = tuple(layout)[1:-1]
    scales, perms = [], []
    for h in hidden:
        if SYMMETRIES[activation] == "scale":
            u = torch.rand(n, h, generator=generator, dtype=torch.float64)
            s = torch.exp(math.log(lo) + u * (math.log(hi) - math.log(lo)))
        else:
            s = torch.where(torch.rand(n, h, generator=generator) < 0.5, -1.0, 1.0).double()
        scales.append(s.to(dtype))
        if permute:
            perms.append(torch.argsort(torch.rand(n, h, generator=generator), dim=1))
    return scales, (perms if permute else None)


def random_symmetry(weights, biases, activation: str, generator: torch.Generator, *,
                    scale_range=(0.1, 10.0), permute: bool = True):
    """Apply an independent random function-preserving transformation to each MLP of a batch."""
    layout = check_mlp_params(weights, biases)
    scales, perms = random_group_element(layout, weights[0].shape[0], activation, generator,
                                         scale_range=scale_range, permute=permute,
                                         dtype=weights[0].dtype)
    dev = weights[0].device
    return act_on_mlp(weights, biases, [s.to(dev) for s in scales],
                      None if perms is None else [p.to(dev) for p in perms])
