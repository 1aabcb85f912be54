r"""A graph isomorphism network (GIN; Xu et al. 2019) for graph classification, in plain torch.

Graphs are batched as one disjoint union: node features ``x`` (N, F), directed message edges
``src -> dst`` (both directions of every undirected edge) and ``batch`` (N,), the graph of each
node. Each of the ``layers`` layers computes

.. math:: h_v \leftarrow \mathrm{MLP}\Big((1+\epsilon)\,h_v + \sum_{u \in N(v)} h_u\Big)

with a two-layer ReLU MLP, and the graph's representation is the sum over its nodes of the last
layer's states, fed to a two-layer MLP head that returns class logits. Sum aggregation and sum
readout make GIN as discriminative as 1-WL and no more: without node identifiers it gives every
pair of 1-WL-equivalent graphs the same output.
"""
from __future__ import annotations

import math

import numpy as np
import torch
from torch import nn

__all__ = ["GIN", "GraphBatch", "batch_graphs"]


class GraphBatch:
    """A disjoint union of graphs: ``x`` (N, F) float32, ``src``/``dst`` (2E,) long, ``batch``
    (N,) long, ``n_graphs``."""

    def __init__(self, x, src, dst, batch, n_graphs):
        self.x, self.src, self.dst, self.batch, self.n_graphs = x, src, dst, batch, int(n_graphs)

    def to(self, device):
        return GraphBatch(self.x.to(device), self.src.to(device), self.dst.to(device),
                          self.batch.to(device), self.n_graphs)


def batch_graphs(graphs, features) -> GraphBatch:
    """Batch ``graphs`` (a list of ``(n, edges)``) with per-graph node ``features`` (a list of
    ``(n, F)`` arrays, the same F for all)."""
    if len(graphs) != len(features) or not graphs:
        raise ValueError(f"give one feature array per graph (got {len(graphs)} graphs and "
                         f"{len(features)} feature arrays)")
    xs, srcs, dsts, bs = [], [], [], []
    offset = 0
    width = np.asarray(features[0]).shape[1]
    for i, ((n, edges), f) in enumerate(zip(graphs, features)):
        f = np.asarray(f, dtype=np.float32)
        if f.shape != (n, width):
            raise ValueError(f"features of graph {i} must have shape ({n}, {width}), got {f.shape}")
        e = np.asarray(edges, dtype=np.int64).reshape(-1, 2) + offset
        xs.append(f)
        srcs += [e[:, 0], e[:, 1]]
        dsts += [e[:, 1], e[:, 0]]
        bs.append(np.full(n, i, dtype=np.int64))
        offset += n
    return GraphBatch(torch.from_numpy(np.concatenate(xs)),
                      torch.from_numpy(np.concatenate(srcs)), torch.from_numpy(np.concatenate(dsts)),
                      torch.from_numpy(np.concatenate(bs)), len(graphs))


def _mlp(i, h, o):
    return nn.Sequential(nn.Linear(i, h), nn.ReLU(), nn.Linear(h, o), nn.ReLU())


class GIN(nn.Module):
    """``GIN(in_dim, hidden, layers, n_classes)``; ``forward(batch) -> logits (n_graphs, n_classes)``.

    ``generator``: a ``torch.Generator`` for the initial weights (torch's default initialisation
    of ``nn.Linear``, drawn from it), so that a chapter seeds each model from its ledger seed.
    """

    def __init__(self, in_dim: int, hidden: int = 64, layers: int = 4, n_classes: int = 2,
                 generator: torch.Generator | None = None):
        super().__init__()
        for name, v in (("in_dim", in_dim), ("hidden", hidden), ("layers", layers),
                        ("n_classes", n_classes)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{name} must be a positive int, got {v!r}")
        self.in_dim = in_dim
        self.eps = nn.Parameter(torch.zeros(layers))
        self.mlps = nn.ModuleList(_mlp(in_dim if i == 0 else hidden, hidden, hidden)
                                  for i in range(layers))
        self.head = nn.Sequential(nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, n_classes))
        if generator is not None:
            self.reset_parameters(generator)

    @torch.no_grad()
    def reset_parameters(self, generator: torch.Generator) -> None:
        """Re-draw every linear layer as ``nn.Linear`` does (Kaiming-uniform weights, uniform
        biases in :math:`\\pm 1/\\sqrt{\\text{fan in}}`), from ``generator``; epsilon back to 0."""
        for mod in self.modules():
            if isinstance(mod, nn.Linear):
                nn.init.kaiming_uniform_(mod.weight, a=math.sqrt(5), generator=generator)
                bound = 1 / math.sqrt(mod.in_features)
                nn.init.uniform_(mod.bias, -bound, bound, generator=generator)
        self.eps.zero_()

    def embed(self, g: GraphBatch) -> torch.Tensor:
        """The graph representations (n_graphs, hidden): sums of the last layer's node states."""
        if g.x.dim() != 2 or g.x.shape[1] != self.in_dim:
            raise ValueError(f"node features must have shape (N, {self.in_dim}), got "
                             f"{tuple(g.x.shape)}")
        h = g.x
        for eps, mlp in zip(self.eps, self.mlps):
            agg = torch.zeros_like(h).index_add_(0, g.dst, h[g.src])
            h = mlp((1 + eps) * h + agg)
        return torch.zeros(g.n_graphs, h.shape[1], dtype=h.dtype, device=h.device).index_add_(
            0, g.batch, h)

    def forward(self, g: GraphBatch) -> torch.Tensor:
        return self.head(self.embed(g))
