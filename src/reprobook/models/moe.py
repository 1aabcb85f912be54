r"""Sparse mixtures of experts: top-k routing (SMoE) and multi-head routing (MH-MoE).

**SMoE** (:class:`SparseMoE`, FFN name ``"moe"``; Shazeer et al. 2017, GShard, Switch). A router
:math:`W_r \in \mathbb{R}^{E\times d}` scores the ``E`` experts for every routed unit ``u``,
:math:`p(u) = \mathrm{softmax}(W_r u)`; the unit goes to its ``k`` highest-scoring experts
:math:`\mathcal{T}(u)`, and the output is the gate-weighted sum of their outputs,

.. math:: y(u) = \sum_{e\in\mathcal{T}(u)} g_e(u)\, E_e(u), \qquad
          E_e(u) = W^{e}_{out}\,\mathrm{act}(W^{e}_{in} u),

with :math:`g_e = p_e` for ``k = 1`` (Switch) and the top-k probabilities renormalised to sum to 1
for ``k > 1`` (GShard). Only the chosen experts run: each unit costs ``k`` expert MLPs.

**Load balance** (:func:`load_balancing_loss`, Switch Transformer's): with :math:`f_e` the
fraction of the ``N k`` routing assignments that go to expert ``e`` and :math:`P_e` the mean router
probability of ``e`` over the ``N`` units,

.. math:: \mathcal{L}_{aux} = E \sum_{e} f_e P_e ,

which is 1 when routing is uniform and grows as it concentrates. It is exposed as ``aux_loss``
after each forward (the training loop adds ``aux_weight * aux_loss``).

**MH-MoE** (:class:`MultiHeadMoE`, FFN name ``"mh-moe"``; Wu et al., NeurIPS 2024). A token
:math:`x\in\mathbb{R}^d` is projected by a *head layer* :math:`z = W_{head}x + b`, cut into ``h``
sub-tokens :math:`z_1,\dots,z_h \in\mathbb{R}^{d/h}`, each sub-token is routed and processed
*independently* by an SMoE over ``d/h``-dimensional experts, and the outputs are concatenated and
mixed by a *merge layer*, :math:`y = W_{merge}[o_1;\dots;o_h] + b`. A token can thus reach up to
``h k`` different experts. With ``heads=1`` and no head or merge layer it *is* SMoE.

Per token, the expert MLPs of MH-MoE cost :math:`h \cdot 2\cdot(d/h)\cdot f = 2 d f` multiply-adds
for expert width ``f`` (SMoE's cost at the same ``f``), plus :math:`2d^2` for the head and merge
layers; matching FLOPs therefore needs a smaller expert width (measure it:
:mod:`reprobook.bench.flops`).

**Routing statistics.** After every forward, a routed block keeps the expert indices it chose,
``last_assignments`` (``[n_units, k]``, detached), and ``units_per_token`` (``h``).
:func:`routing_counts` collects them over an evaluation set, and the activation measures below
turn counts into numbers:

* :func:`activation_ratio` ``(counts, denominator, threshold)``: the fraction of experts with
  ``count / denominator >= threshold``. The denominator is the choice that matters: the *number of
  tokens* (an MH-MoE expert then collects up to ``h`` units per token, so every expert's share is
  inflated ``h``-fold) or the *number of routing decisions* (units times ``k``; the shares sum to 1
  for both architectures);
* :func:`load_entropy`: the entropy of the load distribution over ``log E`` (1: uniform);
* :func:`experts_per_token`: how many distinct experts one token's units reach.
"""
from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from .ffn import _activation, register_ffn

__all__ = ["SparseMoE", "MultiHeadMoE", "load_balancing_loss", "set_dispatch", "moe_layers", "routing_counts",
           "activation_ratio", "load_entropy", "experts_per_token"]


def _positive(name, v):
    if isinstance(v, bool) or not isinstance(v, int) or v < 1:
        raise ValueError(f"{name} must be a positive int, got {v!r}")
    return v


def load_balancing_loss(probs: torch.Tensor, assignments: torch.Tensor) -> torch.Tensor:
    r"""Switch Transformer's auxiliary loss :math:`E\sum_e f_e P_e` (1 when balanced).

    ``probs``: ``[N, E]`` router probabilities; ``assignments``: ``[N, k]`` chosen experts.
    :math:`f_e` (fractions of the ``N k`` assignments) is not differentiable; the gradient flows
    through :math:`P_e`, the mean probability.
    """
    if probs.ndim != 2 or assignments.ndim != 2 or assignments.shape[0] != probs.shape[0]:
        raise ValueError(f"probs must be [N, E] and assignments [N, k], got {tuple(probs.shape)} "
                         f"and {tuple(assignments.shape)}")
    E = probs.shape[1]
    frac = torch.bincount(assignments.reshape(-1), minlength=E).to(probs.dtype)
    frac = frac / assignments.numel()
    return E * (frac * probs.mean(0)).sum()


@register_ffn("moe")
class SparseMoE(nn.Module):
    """Top-k routed mixture of ``n_experts`` MLP experts of hidden width ``hidden`` (see the
    module docstring).

    Args:
        d_model: unit width. n_experts: ``E``. hidden: each expert's hidden width.
        top_k: experts per unit. activation: the experts' nonlinearity.
        group: route groups of ``group`` consecutive units together (default 1: every unit on its
            own). The router's logits are averaged over the group and the whole group goes to the
            group's top-k experts, each unit weighted by the group's gate. Used to *tie* the
            sub-tokens of one token in MH-MoE (a control that removes independent routing).
        init_std: normal init of router and expert weights.

    The experts' weights are stacked, ``w_in: [E, d, f]`` and ``w_out: [E, f, d]`` (no biases).
    Two dispatch modes compute the same outputs and gradients (attribute ``dispatch``):
    ``"padded"`` (default, fast on a CPU) gathers every expert's units into a ``[E, C, d]`` buffer
    padded to the busiest expert's load ``C`` and runs two batched products; ``"loop"`` runs each
    expert on exactly its own units, so a FLOP counter sees the ideal cost of ``k`` expert MLPs per
    unit and none of the padding (:func:`set_dispatch`).
    """

    def __init__(self, d_model: int, n_experts: int = 16, hidden: int | None = None,
                 top_k: int = 1, activation: str = "gelu", group: int = 1,
                 init_std: float = 0.02):
        super().__init__()
        _positive("d_model", d_model)
        _positive("n_experts", n_experts)
        hidden = 4 * d_model if hidden is None else hidden
        _positive("hidden", hidden)
        _positive("group", group)
        if not 1 <= _positive("top_k", top_k) <= n_experts:
            raise ValueError(f"top_k must be in 1..n_experts={n_experts}, got {top_k}")
        self.d_model, self.n_experts, self.hidden, self.top_k = d_model, n_experts, hidden, top_k
        self.group = group
        self.act_name = activation
        self.act = _activation(activation)
        self.router = nn.Linear(d_model, n_experts, bias=False)
        self.w_in = nn.Parameter(torch.empty(n_experts, d_model, hidden))
        self.w_out = nn.Parameter(torch.empty(n_experts, hidden, d_model))
        for w in (self.router.weight, self.w_in, self.w_out):
            nn.init.normal_(w, std=init_std)
        self.aux_loss = None
        self.last_assignments = None
        self.units_per_token = 1
        self.dispatch = "padded"

    def route(self, units: torch.Tensor):
        """``(probs [N, E], assignments [N, k], gates [N, k])`` for ``units: [N, d]``."""
        logits = self.router(units)
        if self.group > 1:
            N = units.shape[0]
            if N % self.group:
                raise ValueError(f"{N} units do not split into groups of {self.group}")
            logits = logits.view(N // self.group, self.group, -1).mean(1)
        probs = logits.softmax(-1) if logits.dtype in (torch.float32, torch.float64) \
            else logits.float().softmax(-1).to(units.dtype)
        gates, assignments = probs.topk(self.top_k, dim=-1)
        if self.top_k > 1:
            gates = gates / gates.sum(-1, keepdim=True)
        if self.group > 1:
            probs = probs.repeat_interleave(self.group, 0)
            gates = gates.repeat_interleave(self.group, 0)
            assignments = assignments.repeat_interleave(self.group, 0)
        return probs, assignments, gates

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[-1] != self.d_model:
            raise ValueError(f"expected inputs [..., {self.d_model}], got {tuple(x.shape)}")
        units = x.reshape(-1, self.d_model)
        probs, assignments, gates = self.route(units)
        self.aux_loss = load_balancing_loss(probs, assignments)
        self.last_assignments = assignments.detach()
        flat_expert = assignments.reshape(-1)
        flat_unit = torch.arange(units.shape[0], device=units.device)
        if self.top_k > 1:
            flat_unit = flat_unit.repeat_interleave(self.top_k)
        order = torch.argsort(flat_expert, stable=True)           # assignments grouped by expert
        expert, unit, gate = flat_expert[order], flat_unit[order], gates.reshape(-1)[order]
        counts = torch.bincount(flat_expert, minlength=self.n_experts)
        if self.dispatch == "loop":
            out = torch.zeros_like(units)
            start = 0
            for e, n in enumerate(counts.tolist()):
                if n:
                    idx = unit[start:start + n]
                    h = self.act(units[idx] @ self.w_in[e]) @ self.w_out[e]
                    out = out.index_add(0, idx, h * gate[start:start + n, None])
                    start += n
            return out.view_as(x)
        # "padded": one batched product over a [E, C, d] buffer, C = the busiest expert's load
        C = int(counts.max())
        slot = torch.arange(expert.numel(), device=units.device) - (counts.cumsum(0) - counts)[expert]
        pos = expert * C + slot
        buf = units.new_zeros(self.n_experts * C, self.d_model).index_copy(0, pos, units[unit])
        h = self.act(torch.bmm(buf.view(self.n_experts, C, self.d_model), self.w_in))
        y = torch.bmm(h, self.w_out).view(-1, self.d_model).index_select(0, pos)
        return units.new_zeros(units.shape).index_add(0, unit, y * gate[:, None]).view_as(x)

    def extra_repr(self) -> str:
        return (f"d_model={self.d_model}, n_experts={self.n_experts}, hidden={self.hidden}, "
                f"top_k={self.top_k}, group={self.group}")


@register_ffn("mh-moe")
class MultiHeadMoE(nn.Module):
    """Multi-head mixture of experts (see the module docstring).

    Args:
        d_model: token width ``d``. heads: sub-tokens per token ``h`` (``d % h == 0``).
        n_experts, hidden, top_k, activation: of the inner :class:`SparseMoE` over
            ``d/h``-dimensional sub-tokens (``hidden`` is each expert's hidden width).
        head_layers: use the head and merge projections (``d x d``, with bias). Without them
            (and ``heads=1``) the block is exactly :class:`SparseMoE`.
        tied_routing: route the ``h`` sub-tokens of a token together (one decision per token from
            their averaged router logits) instead of independently: a control that keeps every
            weight shape and FLOP of MH-MoE but removes its per-sub-token routing.
        init_std: normal init of all weights (biases start at zero).
    """

    def __init__(self, d_model: int, heads: int = 4, n_experts: int = 16, hidden: int | None = None,
                 top_k: int = 1, activation: str = "gelu", head_layers: bool = True,
                 tied_routing: bool = False, init_std: float = 0.02):
        super().__init__()
        _positive("d_model", d_model)
        _positive("heads", heads)
        if d_model % heads:
            raise ValueError(f"d_model={d_model} must be divisible by heads={heads}")
        self.d_model, self.heads = d_model, heads
        self.head = nn.Linear(d_model, d_model) if head_layers else None
        self.merge = nn.Linear(d_model, d_model) if head_layers else None
        for lin in (self.head, self.merge):
            if lin is not None:
                nn.init.normal_(lin.weight, std=init_std)
                nn.init.zeros_(lin.bias)
        self.moe = SparseMoE(d_model // heads, n_experts, hidden, top_k, activation,
                             group=heads if tied_routing else 1, init_std=init_std)
        self.units_per_token = heads

    @property
    def aux_loss(self):
        return self.moe.aux_loss

    @property
    def last_assignments(self):
        return self.moe.last_assignments

    @property
    def n_experts(self) -> int:
        return self.moe.n_experts

    @property
    def top_k(self) -> int:
        return self.moe.top_k

    def split(self, z: torch.Tensor) -> torch.Tensor:
        """``[..., d] -> [N h, d/h]``: rows ``n h .. n h + h - 1`` are token ``n``'s sub-tokens,
        in the order of its features."""
        return z.reshape(-1, self.d_model // self.heads)

    def merge_subtokens(self, o: torch.Tensor, shape) -> torch.Tensor:
        """Inverse of :meth:`split`: ``[N h, d/h] -> shape`` (``[..., d]``)."""
        return o.reshape(shape)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[-1] != self.d_model:
            raise ValueError(f"expected inputs [..., {self.d_model}], got {tuple(x.shape)}")
        z = self.head(x) if self.head is not None else x
        o = self.merge_subtokens(self.moe(self.split(z)), z.shape)
        return self.merge(o) if self.merge is not None else o


def set_dispatch(model: nn.Module, mode: str) -> None:
    """Set the dispatch mode (``"padded"`` or ``"loop"``) of every SMoE inside ``model``."""
    if mode not in ("padded", "loop"):
        raise ValueError(f"dispatch must be 'padded' or 'loop', got {mode!r}")
    for m in model.modules():
        if isinstance(m, SparseMoE):
            m.dispatch = mode


# ----------------------------------------------------------------------------- statistics
def moe_layers(model: nn.Module) -> list[nn.Module]:
    """The routed blocks of ``model`` (SMoE and MH-MoE, outermost only), in module order."""
    out = []
    for m in model.modules():
        if isinstance(m, MultiHeadMoE):
            out.append(m)
        elif isinstance(m, SparseMoE) and not any(isinstance(o, MultiHeadMoE) and o.moe is m
                                                  for o in out):
            out.append(m)
    return out


@torch.no_grad()
def routing_counts(model: nn.Module, inputs: torch.Tensor, batch_size: int = 64,
                   device="cpu") -> dict:
    """Route ``inputs`` (token ids ``[n, T]``) through ``model`` in eval mode and count, per routed
    layer: ``counts`` (``[L, E]`` assignments per expert), ``n_tokens``, ``n_units`` (tokens times
    units per token), ``top_k``, and ``per_token`` (``[L, n_tokens, units*k]`` expert ids of each
    token, for :func:`experts_per_token`)."""
    layers = moe_layers(model)
    if not layers:
        raise ValueError("the model has no routed (mixture-of-experts) layers")
    was = model.training
    model.eval()
    counts = [torch.zeros(m.n_experts, dtype=torch.long) for m in layers]
    per_token = [[] for _ in layers]
    n_tokens = 0
    try:
        for i in range(0, inputs.shape[0], batch_size):
            xb = inputs[i:i + batch_size].to(device)
            model(xb)
            n_tokens += xb.numel()
            for j, m in enumerate(layers):
                a = m.last_assignments.cpu()
                counts[j] += torch.bincount(a.reshape(-1), minlength=m.n_experts)
                per_token[j].append(a.reshape(xb.numel(), -1))
    finally:
        model.train(was)
    upt = layers[0].units_per_token
    return {"counts": torch.stack(counts), "n_tokens": n_tokens, "n_units": n_tokens * upt,
            "top_k": layers[0].top_k, "per_token": torch.stack([torch.cat(p) for p in per_token])}


def activation_ratio(counts: torch.Tensor, denominator: float, threshold: float) -> float:
    """Fraction of experts (over all rows of ``counts``, ``[E]`` or ``[L, E]``) whose
    ``count / denominator`` is at least ``threshold`` (see the module docstring for the choice of
    denominator)."""
    counts = torch.as_tensor(counts)
    if not (denominator > 0) or not (threshold >= 0):
        raise ValueError(f"need denominator > 0 and threshold >= 0, got {denominator}, {threshold}")
    return float((counts.double() / denominator >= threshold).double().mean())


def load_entropy(counts: torch.Tensor) -> float:
    """Mean over rows (layers) of the entropy of the load distribution ``counts / sum`` divided by
    ``log E``: 1 for a uniform load, 0 when one expert gets everything."""
    c = torch.as_tensor(counts).double()
    if c.ndim == 1:
        c = c[None]
    if c.shape[-1] < 2:
        raise ValueError("load_entropy needs at least two experts")
    p = c / c.sum(-1, keepdim=True).clamp_min(1)
    h = -(torch.where(p > 0, p * p.log(), torch.zeros_like(p))).sum(-1)
    return float((h / math.log(c.shape[-1])).mean())


def experts_per_token(per_token: torch.Tensor) -> float:
    """Mean number of distinct experts among each token's assignments (``[..., n, units*k]``)."""
    a = torch.as_tensor(per_token)
    s = a.sort(-1).values
    distinct = 1 + (s[..., 1:] != s[..., :-1]).sum(-1)
    return float(distinct.double().mean())
