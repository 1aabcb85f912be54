r"""A multi-head transformer without LayerNorm whose width, head and depth scalings are knobs
(Bordelon, Chaudhry & Pehlevan, *Infinite Limits of Multi-head Transformer Dynamics*, NeurIPS 2024),
written functionally with a leading *member* axis so that seeds train side by side.

Sizes: :math:`N` key/query (and value) dimension per head, :math:`H` heads, model width
:math:`D = NH`, :math:`L` layers, each an attention block and an MLP block. Every weight is drawn
with unit-variance entries; the scalings are explicit multipliers:

.. math::
    h^1 &= \tfrac{1}{\sqrt{d_\text{in}}} W^0 x, \\
    q_h, k_h, v_h &= \big(\tfrac{1}{\sqrt D} W^{Q,K,V} h\big)_{\text{head } h} \in \mathbb R^N,
    \qquad A_h(s, s') = \frac{q_h(s)\cdot k_h(s')}{N^{\alpha_A}}, \\
    \mathrm{MHSA}(h)(s) &= \tfrac{1}{\sqrt D} W^O\,
        \mathrm{concat}_h \textstyle\sum_{s'} \mathrm{softmax}_{s'}(A_h(s,\cdot))\, v_h(s'), \\
    h &\leftarrow h + \beta_0 L^{-\alpha_L}\, \mathrm{MHSA}(h), \qquad
    h \leftarrow h + \beta_0 L^{-\alpha_L}\, \tfrac{1}{\sqrt D} W^2 \phi\big(\tfrac{1}{\sqrt D} W^1 h\big), \\
    f &= \rho_D\; w^\top \tfrac1S \textstyle\sum_s h^{L}(s),

with :math:`\phi` = ReLU. The *width* roles (``"embedding"``, ``"hidden"``, ``"readout"``) follow
Tensor Programs' abc tables (:mod:`reprobook.models.parametrization`) for SGD or Adam, rewritten
with unit-variance weights and multipliers by the abc symmetry, relative to a base width
:math:`D_0` (width multiplier :math:`m = D/D_0`; every form is the mean-field network at
:math:`D_0`). A role's learning rate is its base rate times :math:`m^{-c}`.

* :func:`mean_field` (μP in its mean-field form, the paper's): hidden multiplier
  :math:`D^{-1/2}`, readout :math:`1/(\gamma_0 D)`. SGD learns at :math:`\eta_0\gamma_0^2 D` in
  every role; Adam at :math:`\eta_0\gamma_0` for the embedding and readout and
  :math:`\eta_0\gamma_0/\sqrt D` for the hidden weights. Both move every layer's features by
  :math:`\Theta(\eta_0\gamma_0)` per step at any width; nothing depends on :math:`D_0`.
* :func:`standard` (SP): readout :math:`1/(\gamma_0\sqrt{D D_0})`; SGD rates
  :math:`\eta_0\gamma_0^2 D_0` for the embedding and :math:`\eta_0\gamma_0^2 D` elsewhere (SP's
  constant rate on weights initialised at variance :math:`1/D`); Adam rates grow as
  :math:`\sqrt{D/D_0}` for the hidden weights and readout. Key/query scaling
  :math:`1/\sqrt N`, residual branches not scaled with depth.

Depth: the weights inside the residual blocks learn at an extra factor :math:`L^{2\alpha_L-1}`
(SGD) or :math:`L^{\alpha_L-1}` (Adam), so that each block's own change is
:math:`\Theta(L^{\alpha_L-1})` and its contribution to the residual stream :math:`\Theta(1/L)`.
These learning-rate rules are our derivation (the paper's Table 1 gives the same kind of rule; we
could not read its entries).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from .parametrization import Parametrization, mup
from .parametrization import standard as standard_table

__all__ = ["Architecture", "TransformerScaling", "mean_field", "standard", "width_parametrization",
           "init_transformer", "forward", "learning_rates", "make_optimizer", "teacher_targets",
           "train_on_teacher",
           "BLOCK_WEIGHTS"]

BLOCK_WEIGHTS = ("wq", "wk", "wv", "wo", "w1", "w2")
OPTIMIZERS = ("sgd", "adam")


def _posint(name, v) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < 1:
        raise ValueError(f"{name} must be a positive int, got {v!r}")
    return v


def _finite(name, v) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise ValueError(f"{name} must be a finite number, got {v!r}")
    return float(v)


@dataclass(frozen=True)
class Architecture:
    """Sizes: ``n`` per-head dimension N, ``heads`` H, ``depth`` L (layers), ``d_in`` token size."""

    n: int
    heads: int
    depth: int
    d_in: int = 16

    def __post_init__(self):
        for k in ("n", "heads", "depth", "d_in"):
            _posint(k, getattr(self, k))

    @property
    def width(self) -> int:
        """D = N H."""
        return self.n * self.heads


def width_parametrization(kind: str, optimizer: str) -> Parametrization:
    """The exponents of the width roles in the unit-initialisation (multiplier) form, for ``kind``
    in ``{"mean-field", "standard"}`` and ``optimizer`` in ``{"sgd", "adam"}``.

    They are Tensor Programs' tables (:func:`reprobook.models.parametrization.mup` and
    :func:`~reprobook.models.parametrization.standard`, roles input, hidden, output) with every
    role's initialisation exponent moved into a multiplier by the abc symmetry
    (:meth:`~reprobook.models.parametrization.Scaling.shifted` with :math:`\theta = b`).
    """
    if optimizer not in OPTIMIZERS:
        raise ValueError(f"unknown optimizer {optimizer!r}; use one of {OPTIMIZERS}")
    if kind == "mean-field":
        table = mup(optimizer)
    elif kind == "standard":
        table = standard_table()
    else:
        raise ValueError(f"unknown width parameterisation {kind!r}; use 'mean-field' or 'standard'")
    roles = {"embedding": "input", "hidden": "hidden", "readout": "output"}
    return Parametrization(f"{kind}/{optimizer}", {
        role: table.scaling(t).shifted(table.scaling(t).b, optimizer) for role, t in roles.items()})


@dataclass(frozen=True)
class TransformerScaling:
    """How the network scales: width form (``"mean-field"`` or ``"standard"``), key/query exponent
    ``alpha_a``, residual exponent ``alpha_l``, branch scale ``beta0``, feature-learning scale
    ``gamma0`` and the base width ``base_width`` :math:`D_0` at which every form is the same
    network (the width multiplier is :math:`m = D/D_0`; the mean-field form does not depend on it).
    """

    name: str
    width: str = "mean-field"
    alpha_a: float = 1.0
    alpha_l: float = 1.0
    beta0: float = 4.0
    gamma0: float = 0.1
    base_width: int = 1

    def __post_init__(self):
        if self.width not in ("mean-field", "standard"):
            raise ValueError(f"unknown width form {self.width!r}; use 'mean-field' or 'standard'")
        for k in ("alpha_a", "alpha_l", "beta0", "gamma0"):
            _finite(k, getattr(self, k))
        if self.beta0 <= 0 or self.gamma0 <= 0:
            raise ValueError(f"beta0 and gamma0 must be > 0, got {self.beta0}, {self.gamma0}")
        _posint("base_width", self.base_width)

    def branch(self, depth: int) -> float:
        """The residual-branch multiplier beta0 L^(-alpha_L)."""
        return self.beta0 * _posint("depth", depth) ** -self.alpha_l

    def readout(self, width: int) -> float:
        r"""The readout multiplier :math:`m^{-a}/(\gamma_0 D_0)`: :math:`1/(\gamma_0 D)` in the
        mean-field form, :math:`1/(\gamma_0\sqrt{D D_0})` in SP."""
        m = _posint("width", width) / self.base_width
        p = width_parametrization(self.width, "sgd")
        return p.multiplier("readout", m) / (self.gamma0 * self.base_width)


def mean_field(alpha_a: float = 1.0, alpha_l: float = 1.0, beta0: float = 4.0,
               gamma0: float = 0.1) -> TransformerScaling:
    """The paper's parameterisation: mean-field (muP) width scaling with key/query exponent
    ``alpha_a`` and residual exponent ``alpha_l``."""
    return TransformerScaling(f"muP(aA={alpha_a:g}, aL={alpha_l:g})", "mean-field", alpha_a,
                              alpha_l, beta0, gamma0)


def standard(beta0: float = 1.0, gamma0: float = 1.0, base_width: int = 1) -> TransformerScaling:
    """The standard-parameterisation baseline: 1/sqrt(N) key/query scaling, residual branches not
    scaled with depth, and SP's width exponents relative to ``base_width`` (where it is the
    mean-field network with the same ``gamma0``)."""
    return TransformerScaling("SP", "standard", 0.5, 0.0, beta0, gamma0, base_width)


def init_transformer(arch: Architecture, members: int, generator: torch.Generator,
                     dtype=torch.float32, device=None) -> dict:
    """Unit-variance weights for ``members`` independent networks: ``embed`` (G, D, d_in); each of
    :data:`BLOCK_WEIGHTS` (G, L, D, D); ``readout`` (G, D).
    """
    if not isinstance(arch, Architecture):
        raise TypeError(f"arch must be an Architecture, got {type(arch).__name__}")
    G, D, L = _posint("members", members), arch.width, arch.depth

    def draw(*shape):
        return torch.randn(*shape, generator=generator, dtype=dtype)

    p = {"embed": draw(G, D, arch.d_in)}
    for k in BLOCK_WEIGHTS:
        p[k] = draw(G, L, D, D)
    p["readout"] = draw(G, D)
    return {k: v.to(device) for k, v in p.items()}


def _check(params, x, arch):
    need = {"embed", "readout", *BLOCK_WEIGHTS}
    if not isinstance(params, dict) or set(params) != need:
        raise ValueError(f"params must be a dict with keys {sorted(need)}")
    G, D = params["embed"].shape[:2]
    if D != arch.width or params["wq"].shape[1] != arch.depth:
        raise ValueError(f"params are for D={D}, L={params['wq'].shape[1]}; the architecture says "
                         f"D={arch.width}, L={arch.depth}")
    if not isinstance(x, torch.Tensor) or x.dim() != 4 or x.shape[0] != G or x.shape[3] != arch.d_in:
        raise ValueError(f"x must be (members={G}, batch, seq, d_in={arch.d_in}), got "
                         f"{tuple(getattr(x, 'shape', ()))}")


def forward(params: dict, x: torch.Tensor, arch: Architecture, scaling: TransformerScaling,
            keep: bool = False):
    """Outputs f (G, B) of every member on its own inputs ``x`` (G, B, S, d_in).

    With ``keep=True`` also a dict: ``"A"`` the pre-softmax attention variables of every layer,
    (G, L, B, H, S, S), and ``"h"`` the final residual stream (G, B, S, D).
    """
    if not isinstance(scaling, TransformerScaling):
        raise TypeError(f"scaling must be a TransformerScaling, got {type(scaling).__name__}")
    _check(params, x, arch)
    G, B, S, _ = x.shape
    N, H, L, D = arch.n, arch.heads, arch.depth, arch.width
    # hidden multiplier m^(-1/2) / sqrt(D0) = 1/sqrt(D) in both forms
    rd = width_parametrization(scaling.width, "sgd").multiplier(
        "hidden", D / scaling.base_width) / math.sqrt(scaling.base_width)
    branch = scaling.branch(L)
    kq = N ** -scaling.alpha_a
    h = torch.einsum("gbsi,gdi->gbsd", x, params["embed"]) / math.sqrt(arch.d_in)
    As = []
    for l in range(L):
        def proj(k, z):
            return torch.einsum("gbsd,ged->gbse", z, params[k][:, l]) * rd

        q, k, v = (proj(n, h).reshape(G, B, S, H, N).transpose(2, 3) for n in ("wq", "wk", "wv"))
        A = kq * q @ k.transpose(-1, -2)                             # (G, B, H, S, S)
        if keep:
            As.append(A.detach())
        att = (torch.softmax(A, dim=-1) @ v).transpose(2, 3).reshape(G, B, S, D)
        h = h + branch * proj("wo", att)
        h = h + branch * proj("w2", torch.relu(proj("w1", h)))
    f = scaling.readout(D) * torch.einsum("gbd,gd->gb", h.mean(dim=2), params["readout"])
    if keep:
        return f, {"A": torch.stack(As, dim=1), "h": h.detach()}
    return f


def learning_rates(scaling: TransformerScaling, arch: Architecture, optimizer: str,
                   eta0: float) -> dict:
    r"""The learning rate of every weight: the mean-field rate at the base width :math:`D_0`
    (SGD: :math:`\eta_0\gamma_0^2 D_0` in every role; Adam: :math:`\eta_0\gamma_0`, hidden
    :math:`\eta_0\gamma_0/\sqrt{D_0}`) times :math:`m^{-c}` of the width role
    (:func:`width_parametrization`), times the depth factor :math:`L^{2\alpha_L-1}` (SGD) or
    :math:`L^{\alpha_L-1}` (Adam) inside the residual blocks of the mean-field form."""
    eta0 = _finite("eta0", eta0)
    if eta0 <= 0:
        raise ValueError(f"eta0 must be > 0, got {eta0}")
    if not isinstance(arch, Architecture):
        raise TypeError(f"arch must be an Architecture, got {type(arch).__name__}")
    p = width_parametrization(scaling.width, optimizer)
    D0, g = scaling.base_width, scaling.gamma0
    if optimizer == "sgd":
        base = dict.fromkeys(("embedding", "hidden", "readout"), eta0 * g * g * D0)
    else:
        base = {"embedding": eta0 * g, "hidden": eta0 * g / math.sqrt(D0), "readout": eta0 * g}
    depth = 1.0
    if scaling.width == "mean-field":
        dexp = (2 * scaling.alpha_l - 1) if optimizer == "sgd" else (scaling.alpha_l - 1)
        depth = arch.depth ** dexp
    m = arch.width / D0
    lrs = {"embed": p.lr("embedding", m, base["embedding"]),
           "readout": p.lr("readout", m, base["readout"])}
    for k in BLOCK_WEIGHTS:
        lrs[k] = p.lr("hidden", m, base["hidden"]) * depth
    return lrs


def make_optimizer(params: dict, lrs: dict, optimizer: str) -> torch.optim.Optimizer:
    """``torch.optim.SGD`` or ``torch.optim.Adam`` with one parameter group per weight at the rate
    ``lrs[name]`` (from :func:`learning_rates`). The members share the rates; sum (do not average)
    their losses so that each member's gradient is its own."""
    if optimizer not in OPTIMIZERS:
        raise ValueError(f"unknown optimizer {optimizer!r}; use one of {OPTIMIZERS}")
    if not isinstance(lrs, dict) or set(lrs) != set(params):
        raise ValueError(f"lrs must give a rate for each of {sorted(params)}")
    groups = [{"params": [params[k]], "lr": float(lrs[k])} for k in params]
    if optimizer == "sgd":
        return torch.optim.SGD(groups, lr=groups[0]["lr"])
    # eps far below the smallest gradient entries, so that Adam's update is sign-like at every width
    return torch.optim.Adam(groups, lr=groups[0]["lr"], eps=1e-12)


def teacher_targets(teacher: dict, x: torch.Tensor, arch: Architecture) -> torch.Tensor:
    """Targets y = tanh(f_teacher(x)) of a random standard-parameterised teacher (one member,
    broadcast to every student member): x (G, B, S, d_in) -> (G, B)."""
    G = x.shape[0] if isinstance(x, torch.Tensor) and x.dim() == 4 else None
    if G is None:
        raise ValueError("x must be (members, batch, seq, d_in)")
    if teacher["embed"].shape[0] != 1:
        raise ValueError("the teacher must be a single member")
    t = {k: v.expand(G, *v.shape[1:]) for k, v in teacher.items()}
    with torch.no_grad():
        return torch.tanh(forward(t, x, arch, standard()))


def train_on_teacher(params: dict, arch: Architecture, scaling: TransformerScaling, lrs: dict,
                     optimizer: str, steps: int, batch: int, seq: int, generator: torch.Generator,
                     teacher: dict, teacher_arch: Architecture) -> torch.Tensor:
    """Online regression on a random teacher: ``steps`` steps of ``optimizer``, each on a fresh
    batch x ~ N(0, I) of shape (G, batch, seq, d_in) drawn from ``generator`` (every member sees
    the same stream), MSE loss on y = tanh(f_teacher(x)). Trains ``params`` in place and returns
    each member's loss on its last batch (G,)."""
    _posint("steps", steps), _posint("batch", batch), _posint("seq", seq)
    if teacher_arch.d_in != arch.d_in:
        raise ValueError(f"teacher and student token sizes differ: {teacher_arch.d_in} vs "
                         f"{arch.d_in}")
    G = params["embed"].shape[0]
    dev = params["embed"].device
    for v in params.values():
        v.requires_grad_(True)
    opt = make_optimizer(params, lrs, optimizer)
    for _ in range(steps):
        x = torch.randn(1, batch, seq, arch.d_in, generator=generator).to(dev).expand(G, -1, -1, -1)
        y = teacher_targets(teacher, x, teacher_arch)
        loss = (forward(params, x, arch, scaling) - y).pow(2).mean(dim=1)
        opt.zero_grad()
        loss.sum().backward()
        opt.step()
    for v in params.values():
        v.requires_grad_(False)
    return loss.detach()
