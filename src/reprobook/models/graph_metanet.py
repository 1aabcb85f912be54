r"""Graph metanetworks on MLP weights: GMN (permutation symmetry) and ScaleGMN (plus scalings).

An MLP with layer sizes :math:`(n_0, \dots, n_L)` is a graph: one node per neuron, an edge
:math:`j \to i` from every neuron of layer :math:`l-1` to every neuron of layer :math:`l`, with the
bias :math:`b_i` as node feature (the constant 1 for input neurons) and the weight :math:`W_{ij}` as
edge feature. Since every network of a batch has the same layout the graph is kept dense, layer by
layer: node states ``X[k]`` of shape ``(B, n_k, d)`` and edge states ``E[l]`` of shape
``(B, n_{l+1}, n_l, d)`` (receiver axis first), so message passing is a broadcast and a sum over
the sender axis. Node types: every input and output neuron has its own (they carry no symmetry),
the hidden neurons of one layer share one (they are interchangeable). As in the official ReLU
configurations, edges get no type embedding (their endpoints are typed).

**ScaleGMN** (forward variant; Kalogeropoulos, Bouritsas & Panagakis, NeurIPS 2024). Under the
symmetry hidden neuron :math:`i` scales by :math:`q_i` and edge :math:`j\to i` by :math:`q_i/q_j`
(:mod:`reprobook.data.weight_symmetries`); every block keeps that law, from
:mod:`reprobook.models.scale_equivariant`:

* embedding: bias-free linear maps of the scalars, then the type embedding :math:`p` multiplies
  hidden nodes (:math:`x \odot p`, equivariant) and is added to input/output nodes;
* message to :math:`i` from :math:`j`: :math:`z_{ij} = (W_e e_{ij}) \odot (W_v x_j)` scales by
  :math:`q_i`; then a scale-equivariant layer :math:`(Wz) \odot \phi(c(z))` for a hidden receiver,
  a plain MLP for an output receiver (its messages are invariant); aggregation is a sum;
* node update: a scale-equivariant layer on :math:`[x_i, \sum_j m_{ij}]` (both scale by
  :math:`q_i`) for hidden nodes, a plain MLP for input/output nodes;
* edge update (all layers but the last): :math:`e_{ij} \leftarrow (W e_{ij}) \odot
  \psi([c(x_i), c(x_j)])`;
* readout, ``readout="last"`` (the official configurations): an MLP of the output neurons' states,
  which carry no symmetry; ``readout="graph"``: :math:`\mathrm{MLP}\big([\sum_{i\ \text{hidden}}
  \phi(c(x_i)),\ x_{\text{in}},\ x_{\text{out}}]\big)`. Both are invariant to scalings and to
  hidden-neuron permutations.

**GMN** is the same graph, embedding, number of rounds and readout structure with plain MLPs for
the message :math:`\mathrm{MLP}([e_{ij}, x_j])`, the update :math:`\mathrm{MLP}([x_i, m_i])`, the
edge update :math:`\mathrm{MLP}([e_{ij}, x_i, x_j])` and the ``"graph"`` readout's local map, and
type embeddings added to the nodes: the official code's ``symmetry: permutation`` setting.

Both divide the weights and biases of layer :math:`l` by fixed constants (their root mean square
over a training set, :meth:`set_input_scales`); a fixed positive constant per layer commutes with
the symmetry, so ScaleGMN stays exactly invariant.
"""
from __future__ import annotations

import torch
from torch import nn

from ..data.sine_mlps import check_mlp_params
from .scale_equivariant import (Canonicalizer, InvariantMap, PairMLP, ScaleEquivariantLayer,
                                SYMMETRY_KINDS, mlp)

__all__ = ["GMN", "ScaleGMN", "count_parameters", "width_for_budget"]


def count_parameters(model: nn.Module) -> int:
    """The number of trainable parameters."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


class _MLPGraphMetanet(nn.Module):
    """Shared skeleton: input scaling, embedding, rounds of message passing, readout.

    All nodes of a network sit in one tensor ``X`` of shape ``(B, n_nodes, d)`` (layer by layer,
    so the hidden neurons are one contiguous block) and all edges in one tensor ``E`` of shape
    ``(B, n_edges, d)`` (weight layer by weight layer, each receiver-major, i.e. ``W.flatten()``),
    with the sender and receiver of every edge in the buffers ``src`` and ``dst``. A round of
    message passing is then a fixed, small number of tensor operations whatever the depth of the
    MLPs read (the cost of a step is dominated by the number of operations at these sizes).
    """

    product_on_hidden = False           # type embedding multiplies hidden nodes/edges (ScaleGMN)

    def __init__(self, layout, d: int, n_layers: int, readout: str):
        super().__init__()
        layout = tuple(layout)
        if readout not in ("last", "graph"):
            raise ValueError(f"unknown readout {readout!r}; use 'last' or 'graph'")
        self.readout = readout
        if len(layout) < 3 or any(isinstance(n, bool) or not isinstance(n, int) or n < 1
                                  for n in layout):
            raise ValueError(f"layout must list >= 3 positive layer sizes (input, hidden..., "
                             f"output), got {layout!r}")
        if isinstance(d, bool) or not isinstance(d, int) or d < 1:
            raise ValueError(f"d must be a positive int, got {d!r}")
        if isinstance(n_layers, bool) or not isinstance(n_layers, int) or n_layers < 0:
            raise ValueError(f"n_layers must be an int >= 0, got {n_layers!r}")
        self.layout, self.d, self.n_layers = layout, d, n_layers
        L, n0, nL = len(layout) - 1, layout[0], layout[-1]
        offsets = [0]
        for n in layout:
            offsets.append(offsets[-1] + n)
        self.node_offsets = tuple(offsets)                    # layer k: [offsets[k], offsets[k+1])
        self.n_nodes = offsets[-1]
        self.hidden = (offsets[1], offsets[L])                # hidden neurons: one block
        src, dst, sizes = [], [], []
        for l in range(L):
            n_in, n_out = layout[l], layout[l + 1]
            dst.append(offsets[l + 1] + torch.arange(n_out).repeat_interleave(n_in))
            src.append(offsets[l] + torch.arange(n_in).repeat(n_out))
            sizes.append(n_in * n_out)
        self.edge_sizes = tuple(sizes)
        self.n_hidden_receiver_edges = sum(sizes[:-1])        # edges into hidden neurons come first
        self.register_buffer("src", torch.cat(src), persistent=False)
        self.register_buffer("dst", torch.cat(dst), persistent=False)
        # every input and output neuron has its own type; a hidden layer's neurons share one
        ntype = torch.cat([torch.arange(n0)] + [torch.full((layout[k],), n0 + k - 1)
                                                 for k in range(1, L)]
                          + [n0 + L - 1 + torch.arange(nL)])
        self.register_buffer("node_type", ntype, persistent=False)
        is_hidden = torch.zeros(self.n_nodes, 1, dtype=torch.bool)
        is_hidden[self.hidden[0]:self.hidden[1]] = True
        self.register_buffer("is_hidden", is_hidden, persistent=False)
        self.register_buffer("w_scale", torch.ones(L))
        self.register_buffer("b_scale", torch.ones(L))
        self.embed_v = nn.Linear(1, d, bias=False)
        self.embed_e = nn.Linear(1, d, bias=False)
        self.node_pos = nn.Parameter(torch.randn(n0 + (L - 1) + nL, d))

    @torch.no_grad()
    def set_input_scales(self, weights, biases) -> None:
        """Fix the per-layer input scales to the root mean squares of a (training) set of MLPs."""
        self._check(weights, biases)
        for l, (w, b) in enumerate(zip(weights, biases)):
            self.w_scale[l] = w.double().pow(2).mean().sqrt().clamp_min(1e-12)
            self.b_scale[l] = b.double().pow(2).mean().sqrt().clamp_min(1e-12)

    def _check(self, weights, biases):
        layout = check_mlp_params(weights, biases)
        if layout != self.layout:
            raise ValueError(f"this metanetwork reads MLPs of layout {self.layout}, got {layout}")

    def _embed(self, weights, biases):
        B, n0 = weights[0].shape[0], self.layout[0]
        ones = torch.ones(B, n0, dtype=weights[0].dtype, device=weights[0].device)
        scalars = torch.cat([ones] + [b / s for b, s in zip(biases, self.b_scale)], dim=1)
        X = self.embed_v(scalars[..., None])
        pos = self.node_pos[self.node_type]
        if self.product_on_hidden:          # x * p on hidden neurons, x + p on input/output ones
            X = torch.where(self.is_hidden, X * pos, X + pos)
        else:
            X = X + pos
        w = torch.cat([w.flatten(1) / s for w, s in zip(weights, self.w_scale)], dim=1)
        return X, self.embed_e(w[..., None])

    def aggregate(self, messages):
        """Sum the messages (``(B, n_edges, d)``, receiver-major per layer) into their receivers;
        the input neurons receive nothing. A reshape and a sum per layer: exact and deterministic,
        where a scatter-add would sum in a device-dependent order."""
        B, _, d = messages.shape
        parts = [messages.new_zeros(B, self.layout[0], d)]
        for l, m in enumerate(messages.split(self.edge_sizes, dim=1)):
            parts.append(m.view(B, self.layout[l + 1], self.layout[l], d).sum(2))
        return torch.cat(parts, dim=1)

    def split_nodes(self, X):
        """``(hidden, input_and_output)`` blocks of the node tensor."""
        a, b = self.hidden
        return X[:, a:b], torch.cat([X[:, :a], X[:, b:]], dim=1)

    def join_nodes(self, hidden, io):
        n0 = self.layout[0]
        return torch.cat([io[:, :n0], hidden, io[:, n0:]], dim=1)

    def forward(self, weights, biases) -> torch.Tensor:
        """One prediction per MLP of the batch: shape ``(B,)``."""
        self._check(weights, biases)
        X, E = self._embed(weights, biases)
        for layer in self.layers:
            X, E = layer(self, X, E)
        if self.readout == "last":
            return self.read_global(X[:, -self.layout[-1]:].flatten(1)).squeeze(-1)
        hidden, io = self.split_nodes(X)
        pooled = self.read_local(hidden).sum(1)
        return self.read_global(torch.cat([pooled, io.flatten(1)], dim=1)).squeeze(-1)

    def _make_readout(self, read_local):
        d, n0, nL = self.d, self.layout[0], self.layout[-1]
        if self.readout == "last":
            self.read_global = mlp(nL * d, d, 1)
        else:
            self.read_local = read_local
            self.read_global = mlp(d + (n0 + nL) * d, d, 1)


class _ScaleGMNLayer(nn.Module):
    def __init__(self, d, symmetry, canonicalize, update_edges):
        super().__init__()
        self.W_v = nn.Linear(d, d, bias=False)
        self.W_e = nn.Linear(d, d, bias=False)
        self.msg_hidden = ScaleEquivariantLayer(d, d, symmetry, canonicalize)
        self.msg_io = mlp(d, d, d)
        self.upd_hidden = ScaleEquivariantLayer(2 * d, d, symmetry, canonicalize)
        self.upd_io = mlp(2 * d, d, d)
        self.update_edges = update_edges
        if update_edges:
            self.edge_W = nn.Linear(d, d, bias=False)
            self.edge_canon = Canonicalizer(d, symmetry, canonicalize)
            self.edge_psi = PairMLP((d, d), d, d)

    def forward(self, g, X, E):
        z = self.W_e(E) * self.W_v(X).index_select(1, g.src)     # scales as the receiver
        k = g.n_hidden_receiver_edges
        m = torch.cat([self.msg_hidden(z[:, :k]), self.msg_io(z[:, k:])], dim=1)
        hidden, io = g.split_nodes(torch.cat([X, g.aggregate(m)], dim=-1))
        X_new = g.join_nodes(self.upd_hidden(hidden), self.upd_io(io))
        if not self.update_edges:
            return X_new, E
        C = self.edge_canon(X)
        h = (self.edge_psi.project(0, C).index_select(1, g.dst)
             + self.edge_psi.project(1, C).index_select(1, g.src))
        return X_new, self.edge_W(E) * self.edge_psi.finish(h)


class _GMNLayer(nn.Module):
    def __init__(self, d, update_edges):
        super().__init__()
        self.msg = PairMLP((d, d), d, d)              # [e_ij, x_j]
        self.upd = mlp(2 * d, d, d)                   # [x_i, sum_j m_ij]
        self.update_edges = update_edges
        if update_edges:
            self.edge = PairMLP((d, d, d), d, d)      # [e_ij, x_i, x_j]

    def forward(self, g, X, E):
        m = self.msg.finish(self.msg.project(0, E) + self.msg.project(1, X).index_select(1, g.src))
        X_new = self.upd(torch.cat([X, g.aggregate(m)], dim=-1))
        if not self.update_edges:
            return X_new, E
        h = (self.edge.project(0, E) + self.edge.project(1, X).index_select(1, g.dst)
             + self.edge.project(2, X).index_select(1, g.src))
        return X_new, self.edge.finish(h)


class ScaleGMN(_MLPGraphMetanet):
    """Scale- and permutation-invariant graph metanetwork (see the module).

    ``symmetry="scale"`` for ReLU networks (positive scalings), ``"sign"`` for tanh networks.
    ``n_layers`` rounds of message passing (0: the readout sees the embedding only).
    Two switches break it, for controls: ``canonicalize=False`` removes the canonicalisation from
    every block, ``hidden_pos="add"`` adds the hidden neurons' type embedding instead of multiplying
    it (the GMN's choice; an added constant does not scale with the neuron). Either way the model is
    no longer exactly invariant.
    """

    def __init__(self, layout, d: int = 32, n_layers: int = 3, symmetry: str = "scale",
                 canonicalize: bool = True, readout: str = "last", hidden_pos: str = "multiply"):
        super().__init__(layout, d, n_layers, readout)
        if symmetry not in SYMMETRY_KINDS:
            raise ValueError(f"unknown symmetry {symmetry!r}; use one of {SYMMETRY_KINDS}")
        if hidden_pos not in ("multiply", "add"):
            raise ValueError(f"hidden_pos must be 'multiply' or 'add', got {hidden_pos!r}")
        self.product_on_hidden = hidden_pos == "multiply"
        self.symmetry, self.canonicalize = symmetry, bool(canonicalize)
        self.layers = nn.ModuleList(_ScaleGMNLayer(d, symmetry, canonicalize, i < n_layers - 1)
                                    for i in range(n_layers))
        self._make_readout(InvariantMap(d, d, d, symmetry, canonicalize))


class GMN(_MLPGraphMetanet):
    """Permutation-invariant graph metanetwork with plain MLPs (see the module)."""

    def __init__(self, layout, d: int = 32, n_layers: int = 3, readout: str = "last"):
        super().__init__(layout, d, n_layers, readout)
        self.layers = nn.ModuleList(_GMNLayer(d, i < n_layers - 1) for i in range(n_layers))
        self._make_readout(mlp(d, d, d))


def width_for_budget(make, budget: int, max_width: int = 1024) -> int:
    """The width ``d`` whose model ``make(d)`` has the parameter count closest to ``budget`` (ties
    to the larger), so that two architectures are compared at equal size. The count grows with
    ``d``, so a bisection finds it."""
    if isinstance(budget, bool) or not isinstance(budget, int) or budget < 1:
        raise ValueError(f"budget must be a positive int, got {budget!r}")
    lo, hi = 1, max_width                       # smallest d with count >= budget, by bisection
    if count_parameters(make(hi)) < budget:
        raise ValueError(f"no width up to {max_width} reaches {budget} parameters")
    while lo < hi:
        mid = (lo + hi) // 2
        if count_parameters(make(mid)) >= budget:
            hi = mid
        else:
            lo = mid + 1
    if lo > 1 and budget - count_parameters(make(lo - 1)) < count_parameters(make(lo)) - budget:
        return lo - 1
    return lo
