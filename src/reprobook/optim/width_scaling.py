r"""How SAM's perturbation scales with the width of an MLP: naive, global and μP² rules.

With width multiplier :math:`m = n/n_0` (see :mod:`reprobook.models.parametrization`), a
:class:`SamScaling` turns SAM's radius :math:`\rho` into a perturbation rule
(:mod:`reprobook.optim.sam`) with radius :math:`\rho\, m^{-d}` and layer scales
:math:`s_l = \kappa_l\, m^{-d_l}`, normalised jointly (:math:`\varepsilon = \rho' v/\|v\|`,
:math:`v_l = s_l g_l`) or per layer (:math:`\varepsilon_l = \rho' s_l g_l/\|g_l\|`):

* ``"naive"``: :math:`d = 0`, every :math:`s_l = 1`, joint: plain SAM at a fixed radius.
* ``"global"``: :math:`d = \tfrac12`: plain SAM with :math:`\rho = \Theta(n^{-1/2})`, the width
  scaling Haas et al. call *global* (it keeps the last layer's perturbation :math:`\Theta(1)`).
* ``"mup2"``: :math:`\varepsilon_l = \rho\,\sqrt{\text{fan-out}_l/\text{fan-in}_l}\; g_l/\|g_l\|`
  (:math:`\kappa_l = \sqrt{\text{fan-out}/\text{fan-in}}` at the base width, :math:`d_l = -\tfrac12,
  0, \tfrac12`, per-layer normalisation): the reproduction notes' implementation of the
  *spectral condition* μP² imposes on perturbations, :math:`\|\varepsilon^l\|_{op} =
  \Theta(\sqrt{\text{fan-out}/\text{fan-in}})` (a layer's gradient is nearly rank one, so its
  Frobenius and operator norms agree up to a width-free factor).
* ``"mup2-joint"``: our derivation of the same condition with SAM's *joint* normalisation kept,
  :math:`d = -\tfrac12`, :math:`d_l = -1, 0, 1`. Under μP the gradient norms scale as
  :math:`m^{-1/2}, 1, m^{1/2}`, so every block of :math:`v` scales as :math:`m^{1/2}`,
  :math:`\|v\| \sim m^{1/2}` and :math:`\|\varepsilon_l\| \sim m^{1/2}, 1, m^{-1/2}` as required;
  at finite width the norm is approached more slowly, because :math:`\|v\|` mixes the blocks.

Neither μP² form is copied from the paper (whose exact :math:`d_l` table we could not read); both
satisfy its stated condition, which the chapter checks by measuring every layer's effective
perturbation against the width.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

import torch

from ..models.parametrization import mlp_roles
from .sam import GlobalRadius, Layerwise, PerturbationRule

__all__ = ["SamScaling", "SAM_SCALINGS", "sam_scaling"]


@dataclass(frozen=True)
class SamScaling:
    """A width scaling of SAM's perturbation (see the module docstring)."""

    name: str
    radius_exponent: float
    layer_exponents: dict = field(default_factory=dict)
    normalise: str = "joint"
    spectral_base: bool = False

    def __post_init__(self):
        if self.normalise not in ("joint", "layer"):
            raise ValueError(f"normalise must be 'joint' or 'layer', got {self.normalise!r}")
        object.__setattr__(self, "layer_exponents", MappingProxyType(dict(self.layer_exponents)))

    def scales(self, sizes: Sequence[int], base_sizes: Sequence[int]) -> tuple[float, ...]:
        """The layer scales :math:`s_l = \\kappa_l m^{-d_l}` of an MLP with layer sizes ``sizes``
        (d_in, n, ..., n, d_out) against the base network ``base_sizes``."""
        sizes, base_sizes = list(sizes), list(base_sizes)
        if len(sizes) != len(base_sizes) or len(sizes) < 3:
            raise ValueError(f"sizes {sizes} and base_sizes {base_sizes} must be MLP layer sizes "
                             "of the same depth")
        m = sizes[1] / base_sizes[1]
        out = []
        for l, role in enumerate(mlp_roles(len(sizes) - 1)):
            kappa = math.sqrt(base_sizes[l + 1] / base_sizes[l]) if self.spectral_base else 1.0
            out.append(kappa * m ** -self.layer_exponents.get(role, 0.0))
        return tuple(out)

    def rule(self, rho, sizes: Sequence[int], base_sizes: Sequence[int],
             member_dims: int = 1) -> PerturbationRule:
        """SAM's perturbation rule at these sizes; ``rho`` a scalar or one radius per member."""
        m = list(sizes)[1] / list(base_sizes)[1]
        radius = rho * m ** -self.radius_exponent
        if isinstance(radius, torch.Tensor) is False and not math.isfinite(radius):
            raise ValueError(f"rho must be finite, got {rho}")
        scales = self.scales(sizes, base_sizes)
        if self.normalise == "joint" and all(s == 1.0 for s in scales):
            return GlobalRadius(radius, member_dims=member_dims)
        return Layerwise(radius, scales, normalise=self.normalise, member_dims=member_dims)


SAM_SCALINGS = {
    "naive": SamScaling("naive", 0.0),
    "global": SamScaling("global", 0.5),
    "mup2": SamScaling("mup2", 0.0, {"input": -0.5, "hidden": 0.0, "output": 0.5},
                       normalise="layer", spectral_base=True),
    "mup2-joint": SamScaling("mup2-joint", -0.5, {"input": -1.0, "hidden": 0.0, "output": 1.0}),
}


def sam_scaling(name: str) -> SamScaling:
    """One of :data:`SAM_SCALINGS` by name."""
    if name not in SAM_SCALINGS:
        raise ValueError(f"SAM scaling must be one of {tuple(SAM_SCALINGS)}, got {name!r}")
    return SAM_SCALINGS[name]
