r"""Building blocks equivariant or invariant to a per-vector scaling: ScaleGMN's layers.

A hidden neuron's representation :math:`x \in \mathbb R^d` transforms as :math:`x \mapsto q x` under
the weight-space symmetry (one scalar :math:`q` for the whole vector), with :math:`q > 0` for ReLU
networks (``"scale"``) and :math:`q = \pm 1` for tanh networks (``"sign"``). The blocks:

* a **canonicalisation** :math:`c` with :math:`c(qx) = c(x)`:
  ``"scale"``: :math:`c(x) = x / \lVert x \rVert`;
  ``"sign"``: the symmetrisation :math:`c(x) = \rho(x) + \rho(-x)` with :math:`\rho` an MLP;
* an **invariant map** :math:`\phi(c(x))` with :math:`\phi` an MLP;
* an **equivariant layer** :math:`f(x) = (W x) \odot \phi(c(x))` with :math:`W` linear and
  *bias-free*: :math:`f(qx) = q\,(Wx) \odot \phi(c(x)) = q f(x)`.

Products give the "product" symmetries: if :math:`e` scales by :math:`q_i/q_j` and :math:`x` by
:math:`q_j`, then :math:`(W_e e) \odot (W_x x)` scales by :math:`q_i`.

``canonicalize=False`` replaces :math:`c` by the identity. That is not ScaleGMN: the blocks then
lose their invariance (it is the planted bug of the chapter's controls).

MLPs here are ``Linear -> LayerNorm -> SiLU -> Linear``, the form the official implementation
configures for its message, update and readout networks.
"""
from __future__ import annotations

import torch
from torch import nn

__all__ = ["SYMMETRY_KINDS", "mlp", "PairMLP", "Canonicalizer", "InvariantMap",
           "ScaleEquivariantLayer"]

#: The per-vector groups the blocks know: positive scalars and signs.
SYMMETRY_KINDS = ("scale", "sign")


def _check_dims(**dims):
    for name, v in dims.items():
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{name} must be a positive int, got {v!r}")


def _check_symmetry(symmetry):
    if symmetry not in SYMMETRY_KINDS:
        raise ValueError(f"unknown symmetry {symmetry!r}; use one of {SYMMETRY_KINDS}")


def mlp(d_in: int, d_hidden: int, d_out: int) -> nn.Sequential:
    """``Linear(d_in, d_hidden) -> LayerNorm -> SiLU -> Linear(d_hidden, d_out)``."""
    _check_dims(d_in=d_in, d_hidden=d_hidden, d_out=d_out)
    return nn.Sequential(nn.Linear(d_in, d_hidden), nn.LayerNorm(d_hidden), nn.SiLU(),
                         nn.Linear(d_hidden, d_out))


class PairMLP(nn.Module):
    r"""An MLP on the concatenation :math:`[a_1, \dots, a_k]` of tensors that broadcast together.

    The first linear layer of an MLP on a concatenation splits as :math:`\sum_m A_m a_m + c`, so
    each part is projected at its own (smaller) size before broadcasting: a message or edge MLP on
    :math:`[e_{ij}, x_i, x_j]` costs one projection per node instead of one per edge. The result is
    exactly ``mlp(sum(d_parts), d_hidden, d_out)`` applied to the broadcast concatenation.
    """

    def __init__(self, d_parts, d_hidden: int, d_out: int):
        super().__init__()
        d_parts = tuple(d_parts)
        _check_dims(d_hidden=d_hidden, d_out=d_out, **{f"d_parts[{i}]": d
                                                      for i, d in enumerate(d_parts)})
        self.d_parts = d_parts
        self.first = nn.ModuleList(nn.Linear(d, d_hidden, bias=i == 0)
                                   for i, d in enumerate(d_parts))
        self.rest = nn.Sequential(nn.LayerNorm(d_hidden), nn.SiLU(), nn.Linear(d_hidden, d_out))

    def project(self, i: int, x):
        """The first layer's share of part ``i`` (apply, then gather or broadcast, then
        :meth:`finish` the sum of the shares)."""
        return self.first[i](x)

    def finish(self, h):
        return self.rest(h)

    def forward(self, *parts):
        if len(parts) != len(self.d_parts):
            raise ValueError(f"expected {len(self.d_parts)} parts, got {len(parts)}")
        h = None
        for i, p in enumerate(parts):
            h = self.project(i, p) if h is None else h + self.project(i, p)
        return self.finish(h)


class Canonicalizer(nn.Module):
    """:math:`c(x)`, invariant to :math:`x \\mapsto qx` (see the module); acts on the last axis."""

    def __init__(self, d: int, symmetry: str = "scale", canonicalize: bool = True):
        super().__init__()
        _check_dims(d=d)
        _check_symmetry(symmetry)
        self.symmetry, self.canonicalize = symmetry, bool(canonicalize)
        self.rho = mlp(d, d, d) if symmetry == "sign" and canonicalize else None

    def forward(self, x):
        if not self.canonicalize:
            return x
        if self.symmetry == "scale":
            # a floor, not an additive epsilon: x/||x|| is then exactly invariant for every
            # non-degenerate x (an additive eps makes it only approximately so)
            floor = torch.finfo(x.dtype).tiny ** 0.5
            return x / torch.linalg.vector_norm(x, dim=-1, keepdim=True).clamp_min(floor)
        return self.rho(x) + self.rho(-x)


class InvariantMap(nn.Module):
    """:math:`\\phi(c(x))`: an MLP on the canonicalised vector, invariant to :math:`x \\mapsto qx`.
    """

    def __init__(self, d_in: int, d_out: int, d_hidden: int | None = None, symmetry: str = "scale",
                 canonicalize: bool = True):
        super().__init__()
        self.canon = Canonicalizer(d_in, symmetry, canonicalize)
        self.phi = mlp(d_in, d_hidden or d_out, d_out)

    def forward(self, x):
        return self.phi(self.canon(x))


class ScaleEquivariantLayer(nn.Module):
    """:math:`f(x) = (Wx) \\odot \\phi(c(x))`, bias-free :math:`W`: :math:`f(qx) = q f(x)`."""

    def __init__(self, d_in: int, d_out: int, symmetry: str = "scale", canonicalize: bool = True):
        super().__init__()
        _check_dims(d_in=d_in, d_out=d_out)
        self.W = nn.Linear(d_in, d_out, bias=False)
        self.gate = InvariantMap(d_in, d_out, d_out, symmetry, canonicalize)

    def forward(self, x):
        return self.W(x) * self.gate(x)
