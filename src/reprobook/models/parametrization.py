r"""Width parameterisations (abc), by layer role: how initialisation, multipliers and learning
rates scale with the width.

A network of width :math:`n` is compared with a *base* network of width :math:`n_0` through the
width multiplier :math:`m = n/n_0`. Every layer has a *role* (``"input"``: fan-in fixed, fan-out
:math:`\propto n`; ``"hidden"``: both :math:`\propto n`; ``"output"``: fan-in :math:`\propto n`,
fan-out fixed; a later model can add roles, such as a transformer's embedding, readout or
attention logits) and three exponents (Yang & Hu's abc-parameterisation, Tensor Programs IV):

.. math::
    W^l = m^{-a_l}\, w^l, \qquad w^l_0 \sim N\big(0, (\sigma_l\, m^{-b_l})^2\big), \qquad
    \eta_l = \eta\, m^{-c_l},

where :math:`\sigma_l = 1/\sqrt{\text{fan-in at the base width}}`. At :math:`m = 1` every
parameterisation is the base network, which is what makes hyperparameters comparable across
widths. The presets, for SGD and a ReLU MLP, are in the no-multiplier form (:math:`a_l = 0`):

* :func:`standard` (SP): fan-in initialisation at the actual width
  (:math:`b = 0, \tfrac12, \tfrac12` for input, hidden, output) and one learning rate.
* :func:`mup` (μP, Tensor Programs V, Table 3 for SGD): :math:`b = 0, \tfrac12, 1`,
  :math:`c = -1, 0, 1`: the input layer's learning rate grows like :math:`m`, the output
  layer's initialisation and learning rate shrink like :math:`1/m`.

:meth:`Scaling.shifted` gives the equivalent exponents with multipliers (the abc symmetry). SAM's
perturbation scalings across widths are in :mod:`reprobook.optim.width_scaling`.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from types import MappingProxyType

__all__ = ["Scaling", "Parametrization", "standard", "mup", "mlp_roles"]


def _finite(name, v) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise ValueError(f"{name} must be a finite number, got {v!r}")
    return float(v)


def _multiplier(m) -> float:
    m = _finite("width multiplier m", m)
    if m <= 0:
        raise ValueError(f"width multiplier m = n/n0 must be > 0, got {m}")
    return m


@dataclass(frozen=True)
class Scaling:
    """The width exponents of one layer role: multiplier ``a``, initialisation ``b``, learning rate
    ``c`` (see the module docstring)."""

    a: float = 0.0
    b: float = 0.0
    c: float = 0.0

    def __post_init__(self):
        for k in ("a", "b", "c"):
            object.__setattr__(self, k, _finite(f"exponent {k}", getattr(self, k)))

    def shifted(self, theta: float, optimizer: str = "sgd") -> "Scaling":
        r"""The equivalent exponents :math:`(a+\theta, b-\theta, c-2\theta)` for SGD, or
        :math:`(a+\theta, b-\theta, c-\theta)` for Adam.

        Writing :math:`W = m^{-a} w` with :math:`w = m^{\theta} w'` changes nothing in the forward
        pass, and an SGD step on :math:`w'` with learning rate :math:`\eta m^{-c+2\theta}` moves
        :math:`W` exactly as the original step does (the abc symmetry of Tensor Programs IV). Adam's
        step ignores the gradient's scale, so there the rate only needs :math:`m^{-c+\theta}`.
        """
        theta = _finite("theta", theta)
        if optimizer not in ("sgd", "adam"):
            raise ValueError(f"unknown optimizer {optimizer!r}; use 'sgd' or 'adam'")
        k = 2 if optimizer == "sgd" else 1
        return Scaling(self.a + theta, self.b - theta, self.c - k * theta)


@dataclass(frozen=True)
class Parametrization:
    """Exponents per layer role."""

    name: str
    layers: dict = field(default_factory=dict)

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name:
            raise ValueError("a parameterisation needs a name")
        layers = dict(self.layers)
        for role, s in layers.items():
            if not isinstance(role, str) or not isinstance(s, Scaling):
                raise TypeError(f"layers must map role names to Scaling, got {role!r}: {s!r}")
        object.__setattr__(self, "layers", MappingProxyType(layers))

    def scaling(self, role: str) -> Scaling:
        if role not in self.layers:
            raise KeyError(f"parameterisation {self.name!r} has no role {role!r}; it has "
                           f"{', '.join(self.layers)}")
        return self.layers[role]

    def multiplier(self, role: str, m: float) -> float:
        """The forward multiplier :math:`m^{-a}`."""
        return _multiplier(m) ** -self.scaling(role).a

    def init_std(self, role: str, m: float, base_std: float) -> float:
        """The initialisation standard deviation :math:`\\sigma\\, m^{-b}`."""
        if not base_std > 0:
            raise ValueError(f"base_std must be > 0, got {base_std}")
        return float(base_std) * _multiplier(m) ** -self.scaling(role).b

    def lr(self, role: str, m: float, eta: float = 1.0) -> float:
        """The learning rate :math:`\\eta\\, m^{-c}`."""
        return float(eta) * _multiplier(m) ** -self.scaling(role).c


def standard() -> Parametrization:
    """SP for SGD: fan-in initialisation at the actual width, one global learning rate."""
    return Parametrization("SP", {"input": Scaling(b=0.0), "hidden": Scaling(b=0.5),
                                  "output": Scaling(b=0.5)})


def mup(optimizer: str = "sgd") -> Parametrization:
    """μP in the no-multiplier form (Tensor Programs V, Table 3) for SGD or Adam."""
    if optimizer == "sgd":
        c = (-1.0, 0.0, 1.0)
    elif optimizer == "adam":
        c = (0.0, 1.0, 1.0)
    else:
        raise ValueError(f"unknown optimizer {optimizer!r}; use 'sgd' or 'adam'")
    return Parametrization("muP" if optimizer == "sgd" else "muP/adam", {
        "input": Scaling(b=0.0, c=c[0]), "hidden": Scaling(b=0.5, c=c[1]),
        "output": Scaling(b=1.0, c=c[2])})


def mlp_roles(n_layers: int) -> tuple[str, ...]:
    """The roles of an MLP's weight matrices: input, hidden..., output (``n_layers`` >= 2)."""
    if isinstance(n_layers, bool) or not isinstance(n_layers, int) or n_layers < 2:
        raise ValueError(f"an MLP needs at least 2 weight layers, got {n_layers!r}")
    return ("input",) + ("hidden",) * (n_layers - 2) + ("output",)
