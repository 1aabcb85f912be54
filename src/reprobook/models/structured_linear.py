r"""Structured linear layers as a two-factor Einstein summation, and their mixture of experts.

**The family** (Potapczynski et al., NeurIPS 2024). Write the input :math:`x\in\mathbb{R}^{d_{in}}`
as a tensor with three indices and the output :math:`y\in\mathbb{R}^{d_{out}}` with three, and
classify every index by which of :math:`\{x, A, B, y\}` it appears in:

=========  ==================  =======================================
index      appears in          role
=========  ==================  =======================================
``a`` (α)  x, A                contracted by the first factor
``b`` (β)  x, B                carried through, contracted by B
``c`` (γ)  x, A, B             a block index of A, contracted by B
``d`` (δ)  A, y                produced by A
``e`` (ε)  B, y                produced by B
``f`` (φ)  A, B, y             a block index of B
``r`` (ρ)  A, B                a bottleneck (rank) index
=========  ==================  =======================================

with :math:`x\in\mathbb{R}^{a\times b\times c}` (so :math:`abc = d_{in}`),
:math:`y\in\mathbb{R}^{d\times e\times f}` (:math:`def = d_{out}`),
:math:`A\in\mathbb{R}^{a\times c\times d\times f\times r}`,
:math:`B\in\mathbb{R}^{b\times c\times e\times f\times r}`, and

.. math:: z_{bcdfr} = \sum_a A_{acdfr}\,x_{abc}, \qquad
          y_{def} = \sum_{b,c,r} B_{bcefr}\, z_{bcdfr}.

Sizes are given by exponents :math:`\theta=(\alpha,\beta,\gamma,\delta,\varepsilon,\varphi,\rho)`
of the width, :math:`a = d^{\alpha}` and so on, with :math:`\alpha+\beta+\gamma = 1 =
\delta+\varepsilon+\varphi`. Named members (:data:`STRUCTURES`):

* **dense** :math:`(1,0,0,1,0,0,0)`: :math:`A` is the whole matrix, :math:`B` a scalar;
* **low-rank** :math:`(1,0,0,0,1,0,\rho)`: :math:`W = B A^\top` through a rank-:math:`d^\rho`
  bottleneck;
* **Kronecker** :math:`(\tfrac12,\tfrac12,0,\tfrac12,\tfrac12,0,0)`: :math:`W = A^\top\otimes B^\top`;
* **tensor train** (two cores) :math:`(\tfrac12,\tfrac12,0,\tfrac12,\tfrac12,0,\rho)`: a sum of
  :math:`d^\rho` Kronecker products;
* **BTT / Monarch** :math:`(\tfrac12,0,\tfrac12,0,\tfrac12,\tfrac12,0)`: two block-diagonal factors
  with a transpose between them, :math:`z_{cf} = \sum_a A_{acf}x_{ac}`,
  :math:`y_{ef} = \sum_c B_{cef} z_{cf}`;
* **low-rank BTT** :math:`(\tfrac23,0,\tfrac13,0,\tfrac23,\tfrac13,0)`: BTT with a bottleneck of
  size :math:`d^{2/3}`.

**Counts** (per input vector; a FLOP is a multiply or an add, so a multiply-add counts 2)::

    params = a c d f r + b c e f r            (the two factors)
    flops  = 2 (a b c d f r + b c d e f r)    (the two contractions)

A factor whose every index has size 1 (dense's ``B``) is the constant 1: it is not a parameter and
its product is skipped, so it counts 0 in both (the paper's formula writes it as ``+1``). A
contraction over a single element (``a = 1``, or ``b c r = 1``) is a broadcast (outer) product,
multiplies without additions; it counts 0 FLOPs, the convention of PyTorch's FLOP counter, which
charges matrix products only (:mod:`reprobook.bench.flops`).

**Taxonomy** (exponents of the width, for a square layer; our reconstruction of the paper's):

* parameter sharing :math:`\omega` = leading exponent of the FLOPs minus that of the parameters:
  how many times each parameter is reused per input (0 for dense, low-rank and BTT; 1/2 for
  Kronecker and TT);
* rank :math:`\psi = \min(1, \beta+\gamma+\delta+\varphi+\rho)`: the log-size of the bottleneck
  ``z`` (1 for dense, BTT and Kronecker; :math:`\rho` for low-rank);
* compute intensity :math:`\nu` = leading exponent of the FLOPs minus 1.

**Initialisation and learning rates (μP).** Each factor is drawn with variance
:math:`1/\text{fan-in}` (``a`` for A, ``b c r`` for B), so every entry of the materialised matrix
has variance :math:`1/d_{in}`, as a dense layer's. Adam's step on a factor must scale as
:math:`1/\text{fan-in}` for the layer's output to move as a dense layer's does (the spectral
condition of μP); with ``mup=True`` the factors are stored divided by a multiplier
:math:`s = d_{in}/\text{fan-in}` and multiplied back in ``forward``, so one learning rate for the
whole model gives every factor the right step (a dense layer gets :math:`s = 1`).

**Einsum mixture of experts** (:class:`EinsumMoE`, BTT-MoE with the default structure): ``E``
experts of the same structure and a linear router :math:`p = \mathrm{softmax}(W_r x)`; the input
goes to its top-``k`` experts, :math:`y = \sum_{e\in\mathrm{top}_k} g_e\,W_e x`, with the Switch
load-balancing loss (:func:`reprobook.models.moe.load_balancing_loss`). Only the chosen experts run.
:class:`StructuredMLP` (FFN name ``"structured"``) is a transformer feed-forward block whose two
linear maps are either kind.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn as nn

from .ffn import _activation, register_ffn
from .moe import load_balancing_loss

__all__ = ["STRUCTURES", "EinsumSizes", "sizes_from_theta", "taxonomy", "EinsumLinear", "EinsumMoE",
           "StructuredMLP", "materialize"]

#: Named members of the family: exponents (α, β, γ, δ, ε, φ, ρ); ``None`` for ρ means "give rank=".
STRUCTURES: dict[str, tuple] = {
    "dense": (1.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0),
    "low-rank": (1.0, 0.0, 0.0, 0.0, 1.0, 0.0, None),
    "kronecker": (0.5, 0.5, 0.0, 0.5, 0.5, 0.0, 0.0),
    "tt": (0.5, 0.5, 0.0, 0.5, 0.5, 0.0, None),
    "btt": (0.5, 0.0, 0.5, 0.0, 0.5, 0.5, 0.0),
    "low-rank-btt": (2 / 3, 0.0, 1 / 3, 0.0, 2 / 3, 1 / 3, 0.0),
}


@dataclass(frozen=True)
class EinsumSizes:
    """Integer sizes of the seven index classes (see the module docstring)."""

    a: int
    b: int
    c: int
    d: int
    e: int
    f: int
    r: int

    def __post_init__(self):
        for k, v in self.as_dict().items():
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"index size {k} must be a positive int, got {v!r}")

    def as_dict(self) -> dict:
        return dict(a=self.a, b=self.b, c=self.c, d=self.d, e=self.e, f=self.f, r=self.r)

    @property
    def d_in(self) -> int:
        return self.a * self.b * self.c

    @property
    def d_out(self) -> int:
        return self.d * self.e * self.f

    @property
    def shape_a(self) -> tuple:
        return (self.a, self.c, self.d, self.f, self.r)

    @property
    def shape_b(self) -> tuple:
        return (self.b, self.c, self.e, self.f, self.r)

    @property
    def fan_in_a(self) -> int:
        return self.a

    @property
    def fan_in_b(self) -> int:
        return self.b * self.c * self.r

    def num_params(self) -> int:
        """``a c d f r + b c e f r``, a factor of size 1 counting 0 (it is a fixed 1)."""
        pa, pb = math.prod(self.shape_a), math.prod(self.shape_b)
        return (pa if pa > 1 else 0) + (pb if pb > 1 else 0)

    def flops(self) -> int:
        """FLOPs of one input vector: ``2 (a b c d f r + b c d e f r)``, where a contraction over
        a single element (``a = 1`` for the first, ``b c r = 1`` for the second: a broadcast
        product, or a product with dense's constant factor, which is skipped) counts 0."""
        s = self
        fa = s.a * s.b * s.c * s.d * s.f * s.r if s.a > 1 else 0
        fb = s.b * s.c * s.d * s.e * s.f * s.r if s.b * s.c * s.r > 1 else 0
        return 2 * (fa + fb)

    def bottleneck(self) -> int:
        """Size of the intermediate ``z`` per input: ``b c d f r``."""
        return self.b * self.c * self.d * self.f * self.r


def _round_pow(n: int, x: float) -> int:
    return max(1, int(round(n ** x)))


def _split(n: int, exps) -> list[int]:
    """Sizes of three indices with product ``n`` near ``n^exp`` each: an index with exponent 0
    has size 1, the others take the divisor nearest their target in turn, the last non-zero one
    what is left."""
    sizes, rest = [1, 1, 1], n
    live = [i for i, x in enumerate(exps) if x > 1e-9]
    for i in live[:-1]:
        sizes[i] = _nearest_divisor(rest, n ** exps[i])
        rest //= sizes[i]
    if live:
        sizes[live[-1]] = rest
    return sizes


def _nearest_divisor(n: int, target: float) -> int:
    """The divisor of ``n`` closest to ``target`` on a log scale (the smaller one on a tie)."""
    divs = [k for k in range(1, n + 1) if n % k == 0]
    t = math.log(max(target, 1.0))
    return min(divs, key=lambda k: (abs(math.log(k) - t) - 1e-9 * (k < target), k))


def sizes_from_theta(d_in: int, d_out: int | None = None, theta: Sequence[float] | str = "dense",
                     rank: int | None = None) -> EinsumSizes:
    """Index sizes of a ``d_in -> d_out`` layer from exponents θ (or a name of :data:`STRUCTURES`).

    α, β, γ are exponents of ``d_in``; δ, ε, φ of ``d_out``; ρ of ``min(d_in, d_out)``. An index
    with exponent 0 has size 1; the others take, in turn, the divisor of what is left nearest
    ``d^θ`` (on a log scale), the last one the remainder, so every width can be split; at widths that are exact powers (``64 = 8 x 8`` for BTT)
    the sizes are exactly ``d^θ``, elsewhere the realised exponents differ a little from θ.
    ``rank`` sets ``r`` directly (needed for ``"low-rank"`` and ``"tt"``, whose ρ is free).
    """
    d_out = d_in if d_out is None else d_out
    for name, v in (("d_in", d_in), ("d_out", d_out)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{name} must be a positive int, got {v!r}")
    if isinstance(theta, str):
        if theta not in STRUCTURES:
            raise ValueError(f"unknown structure {theta!r}; known: {sorted(STRUCTURES)}")
        theta = STRUCTURES[theta]
    theta = list(theta)
    if len(theta) != 7:
        raise ValueError(f"theta must have 7 exponents (α, β, γ, δ, ε, φ, ρ), got {len(theta)}")
    al, be, ga, de, ep, ph, rho = theta
    if rho is None and rank is None:
        raise ValueError("this structure's rank is free: pass rank=")
    if rho is not None and rank is not None:
        raise ValueError(f"this structure fixes its rank (ρ = {rho:g}); rank= is only for "
                         "structures with a free ρ ('low-rank', 'tt')")
    for name, v in zip("αβγδεφ", (al, be, ga, de, ep, ph)):
        if not 0 <= v <= 1:
            raise ValueError(f"exponent {name} must be in [0, 1], got {v}")
    if abs(al + be + ga - 1) > 1e-6 or abs(de + ep + ph - 1) > 1e-6:
        raise ValueError(f"need α+β+γ = 1 and δ+ε+φ = 1, got {al + be + ga:.4f} and {de + ep + ph:.4f}")
    a, b, c = _split(d_in, (al, be, ga))
    d, e, f = _split(d_out, (de, ep, ph))
    if rank is not None:
        if isinstance(rank, bool) or not isinstance(rank, int) or rank < 1:
            raise ValueError(f"rank must be a positive int, got {rank!r}")
        r = rank
    else:
        r = _round_pow(min(d_in, d_out), rho)
    return EinsumSizes(a=a, b=b, c=c, d=d, e=e, f=f, r=r)


def taxonomy(theta: Sequence[float]) -> dict:
    """ω (parameter sharing), ψ (rank) and ν (compute intensity) of a square layer from its
    exponents (see the module docstring; our reconstruction of the paper's definitions). Exponents
    of terms are compared as written, so a factor of size 1 (exponent 0) still counts, which
    leaves dense's ω at 0 as the leading terms decide."""
    al, be, ga, de, ep, ph, rho = (float(t) for t in theta)
    p = max(al + ga + de + ph + rho, be + ga + ep + ph + rho)
    c = max(al + be + ga + de + ph + rho, be + ga + de + ep + ph + rho)
    return {"omega": c - p, "psi": min(1.0, be + ga + de + ph + rho), "nu": c - 1.0}


def _init_factor(shape, std, mult, generator=None):
    w = torch.empty(shape)
    if generator is None:
        nn.init.normal_(w, std=std / mult)
    else:
        w.normal_(0.0, std / mult, generator=generator)
    return w


class EinsumLinear(nn.Module):
    """A structured linear map ``d_in -> d_out`` of the einsum family (see the module docstring).

    Args:
        d_in, d_out: widths. structure: a name of :data:`STRUCTURES` or 7 exponents.
        rank: ``r`` for structures with a free ρ. sizes: :class:`EinsumSizes` (overrides the rest).
        bias: add a bias vector. mup: store factors divided by their μP learning-rate multiplier.
        init_scale: multiplies the init standard deviation (1: entries of variance ``1/d_in``).
    """

    def __init__(self, d_in: int, d_out: int | None = None, structure="dense", *,
                 rank: int | None = None, sizes: EinsumSizes | None = None, bias: bool = False,
                 mup: bool = True, init_scale: float = 1.0):
        super().__init__()
        self.sizes = sizes if sizes is not None else sizes_from_theta(d_in, d_out, structure, rank)
        if sizes is not None and (sizes.d_in != d_in or (d_out is not None and sizes.d_out != d_out)):
            raise ValueError(f"sizes {sizes} do not give a {d_in} -> {d_out} layer")
        s = self.sizes
        self.d_in, self.d_out = s.d_in, s.d_out
        self.structure = structure if isinstance(structure, str) and sizes is None else "custom"
        # μP multipliers: a factor's Adam step should scale like 1/fan-in, relative to a dense layer
        self.mult_a = s.d_in / s.fan_in_a if mup else 1.0
        self.mult_b = s.d_in / s.fan_in_b if mup else 1.0
        # variance 1/fan-in for each factor -> the product has variance 1/d_in per entry
        std_a, std_b = init_scale / math.sqrt(s.fan_in_a), 1.0 / math.sqrt(s.fan_in_b)
        if math.prod(s.shape_a) > 1:
            self.A = nn.Parameter(_init_factor(s.shape_a, std_a, self.mult_a))
        else:   # a trivial factor is the constant 1 (dense's B): not a parameter
            self.register_buffer("A", torch.full(s.shape_a, init_scale), persistent=False)
            self.mult_a = 1.0
        if math.prod(s.shape_b) > 1:
            self.B = nn.Parameter(_init_factor(s.shape_b, std_b, self.mult_b))
        else:
            self.register_buffer("B", torch.ones(s.shape_b), persistent=False)
            self.mult_b = 1.0
        self.trivial_a, self.trivial_b = math.prod(s.shape_a) == 1, math.prod(s.shape_b) == 1
        self.bias = nn.Parameter(torch.zeros(s.d_out)) if bias else None

    def factors(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The effective factors ``(A [a,c,d,f,r], B [b,c,e,f,r])`` (multipliers applied)."""
        return self.A * self.mult_a, self.B * self.mult_b

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[-1] != self.d_in:
            raise ValueError(f"expected inputs [..., {self.d_in}], got {tuple(x.shape)}")
        s = self.sizes
        A, B = self.factors()
        lead = x.shape[:-1]
        xt = x.reshape(-1, s.a, s.b, s.c)
        # a trivial factor (the constant 1) is skipped: dense is then one plain matrix product
        if self.trivial_a:
            z = xt.reshape(-1, s.b, s.c, 1, 1, 1)
        else:
            z = torch.einsum("nabc,acdfr->nbcdfr", xt, A.to(x.dtype))
        if self.trivial_b:
            y = z.reshape(*lead, s.d_out)
        else:
            y = torch.einsum("nbcdfr,bcefr->ndef", z, B.to(x.dtype)).reshape(*lead, s.d_out)
        return y + self.bias if self.bias is not None else y

    def num_params(self) -> int:
        """Parameters of the structure (the formula; the bias is not included)."""
        return self.sizes.num_params()

    def flops(self) -> int:
        """Forward FLOPs per input vector (the formula; the bias is not included)."""
        return self.sizes.flops()

    def extra_repr(self) -> str:
        return f"{self.d_in} -> {self.d_out}, {self.structure}, sizes={self.sizes.as_dict()}"


@torch.no_grad()
def materialize(layer: nn.Module, dtype=torch.float64) -> torch.Tensor:
    """The ``[d_out, d_in]`` matrix ``W`` with ``layer(x) = W x`` (bias excluded), by applying the
    layer to the identity basis in ``dtype`` on a copy."""
    import copy
    m = copy.deepcopy(layer).to(dtype)
    if getattr(m, "bias", None) is not None:
        m.bias = None
    device = next(m.parameters()).device
    return m(torch.eye(m.d_in, dtype=dtype, device=device)).T.contiguous()


class EinsumMoE(nn.Module):
    """A top-``k`` mixture of ``n_experts`` structured linear maps (BTT-MoE by default).

    ``y = Σ_{e ∈ top-k} g_e(x) W_e x (+ bias)`` with ``g = softmax(router x)`` (top-1: the raw
    probability, Switch-style; top-k: renormalised). Expert factors are stacked,
    ``A: [E, a, c, d, f, r]`` and ``B: [E, b, c, e, f, r]``. After a forward, ``aux_loss`` is the
    Switch balance loss and ``last_assignments`` the chosen experts. ``dispatch``: ``"padded"``
    (one batched einsum over a buffer padded to the busiest expert's load, fast) or ``"loop"``
    (each expert on exactly its own inputs: what a FLOP counter should see). Both give the same
    outputs and gradients.
    """

    def __init__(self, d_in: int, d_out: int | None = None, structure="btt", n_experts: int = 8,
                 top_k: int = 1, *, rank: int | None = None, bias: bool = False, mup: bool = True,
                 router_std: float = 0.02):
        super().__init__()
        for name, v in (("n_experts", n_experts), ("top_k", top_k)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{name} must be a positive int, got {v!r}")
        if top_k > n_experts:
            raise ValueError(f"top_k={top_k} exceeds n_experts={n_experts}")
        s = self.sizes = sizes_from_theta(d_in, d_out, structure, rank)
        self.d_in, self.d_out, self.n_experts, self.top_k = s.d_in, s.d_out, n_experts, top_k
        self.structure = structure if isinstance(structure, str) else "custom"
        if math.prod(s.shape_a) == 1 or math.prod(s.shape_b) == 1:
            raise ValueError("EinsumMoE needs two non-trivial factors (use structure='btt', "
                             "'low-rank', ... or a dense MoE from reprobook.models.moe)")
        self.mult_a = s.d_in / s.fan_in_a if mup else 1.0
        self.mult_b = s.d_in / s.fan_in_b if mup else 1.0
        self.A = nn.Parameter(_init_factor((n_experts, *s.shape_a), 1 / math.sqrt(s.fan_in_a), self.mult_a))
        self.B = nn.Parameter(_init_factor((n_experts, *s.shape_b), 1 / math.sqrt(s.fan_in_b), self.mult_b))
        self.router = nn.Linear(s.d_in, n_experts, bias=False)
        nn.init.normal_(self.router.weight, std=router_std)
        self.bias = nn.Parameter(torch.zeros(s.d_out)) if bias else None
        self.dispatch = "padded"
        self.aux_loss = None
        self.last_assignments = None

    def expert(self, e: int, x: torch.Tensor) -> torch.Tensor:
        """Expert ``e`` alone on ``x: [N, d_in]`` (no gate, no bias)."""
        s = self.sizes
        A, B = (self.A[e] * self.mult_a).to(x.dtype), (self.B[e] * self.mult_b).to(x.dtype)
        z = torch.einsum("nabc,acdfr->nbcdfr", x.reshape(-1, s.a, s.b, s.c), A)
        return torch.einsum("nbcdfr,bcefr->ndef", z, B).reshape(-1, s.d_out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[-1] != self.d_in:
            raise ValueError(f"expected inputs [..., {self.d_in}], got {tuple(x.shape)}")
        s, E = self.sizes, self.n_experts
        lead = x.shape[:-1]
        u = x.reshape(-1, self.d_in)
        N = u.shape[0]
        logits = self.router(u)
        # softmax in at least float32 (half-precision logits are upcast, float64 kept)
        probs = (logits.softmax(-1) if logits.dtype in (torch.float32, torch.float64)
                 else logits.float().softmax(-1).to(u.dtype))
        gates, assign = probs.topk(self.top_k, dim=-1)
        if self.top_k > 1:
            gates = gates / gates.sum(-1, keepdim=True)
        self.aux_loss = load_balancing_loss(probs, assign)
        self.last_assignments = assign.detach()
        flat_e = assign.reshape(-1)
        flat_u = torch.arange(N, device=u.device).repeat_interleave(self.top_k)
        order = torch.argsort(flat_e, stable=True)
        ex, unit, gate = flat_e[order], flat_u[order], gates.reshape(-1)[order]
        counts = torch.bincount(flat_e, minlength=E)
        if self.dispatch == "loop":
            out = u.new_zeros(N, self.d_out)
            start = 0
            for e, n in enumerate(counts.tolist()):
                if n:
                    idx = unit[start:start + n]
                    out = out.index_add(0, idx, self.expert(e, u[idx]) * gate[start:start + n, None])
                    start += n
        else:
            C = int(counts.max())
            slot = torch.arange(ex.numel(), device=u.device) - (counts.cumsum(0) - counts)[ex]
            pos = ex * C + slot
            buf = u.new_zeros(E * C, self.d_in).index_copy(0, pos, u[unit])
            A, B = (self.A * self.mult_a).to(u.dtype), (self.B * self.mult_b).to(u.dtype)
            z = torch.einsum("xnabc,xacdfr->xnbcdfr", buf.view(E, C, s.a, s.b, s.c), A)
            y = torch.einsum("xnbcdfr,xbcefr->xndef", z, B).reshape(E * C, self.d_out)
            out = u.new_zeros(N, self.d_out).index_add(0, unit, y.index_select(0, pos) * gate[:, None])
        out = out.view(*lead, self.d_out)
        return out + self.bias if self.bias is not None else out

    def num_params(self) -> int:
        """Expert parameters (all experts) plus the router's."""
        return self.n_experts * self.sizes.num_params() + self.d_in * self.n_experts

    def active_flops(self) -> int:
        """Forward FLOPs per input: router ``2 d_in E`` plus ``k`` experts (gating not counted)."""
        return 2 * self.d_in * self.n_experts + self.top_k * self.sizes.flops()

    def extra_repr(self) -> str:
        return (f"{self.d_in} -> {self.d_out}, {self.structure}, experts={self.n_experts}, "
                f"top_k={self.top_k}, sizes={self.sizes.as_dict()}")


@register_ffn("structured")
class StructuredMLP(nn.Module):
    """Feed-forward block ``fc_out(act(fc_in(x)))`` whose two linear maps are structured
    (:class:`EinsumLinear`) or, with ``n_experts``, structured mixtures of experts
    (:class:`EinsumMoE`, each layer with its own router: BTT-MoE for ``structure="btt"``).
    ``aux_loss`` is the sum of the two layers' balance losses."""

    def __init__(self, d_model: int, hidden: int, structure="btt", n_experts: int | None = None,
                 top_k: int = 1, rank: int | None = None, activation: str = "gelu",
                 bias: bool = True, mup: bool = True):
        super().__init__()
        self.act = _activation(activation)
        if n_experts is None:
            self.fc_in = EinsumLinear(d_model, hidden, structure, rank=rank, bias=bias, mup=mup)
            self.fc_out = EinsumLinear(hidden, d_model, structure, rank=rank, bias=bias, mup=mup)
        else:
            self.fc_in = EinsumMoE(d_model, hidden, structure, n_experts, top_k, rank=rank, bias=bias,
                                   mup=mup)
            self.fc_out = EinsumMoE(hidden, d_model, structure, n_experts, top_k, rank=rank, bias=bias,
                                    mup=mup)
        self.moe = n_experts is not None

    @property
    def aux_loss(self):
        if not self.moe or self.fc_in.aux_loss is None:
            return None
        return self.fc_in.aux_loss + self.fc_out.aux_loss

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc_out(self.act(self.fc_in(x)))
