r"""A small message-passing network that outputs one weight per edge of a graph with a root.

Nodes are the ``n`` BUs plus a root (the depot, index ``n``) joined to every BU. With node states
:math:`h_v` (initially an MLP of the node features) each layer computes

.. math:: h_v \leftarrow \mathrm{LayerNorm}\Big(h_v + \mathrm{ReLU}\big(W_s h_v +
          \tfrac{1}{|N(v)|}\textstyle\sum_{u \in N(v)} W_m [h_u, e_{uv}]\big)\Big),

over the BU-BU edges and the depot-BU edges. The edge weights are then

.. math:: \theta_{uv} = \mathrm{MLP}_{BU}([h_u + h_v, |h_u - h_v|, e_{uv}]) \quad (\text{symmetric}),
   \qquad \theta_{0b} = \mathrm{MLP}_{dep}([h_0, h_b, e_{0b}]),

returned in the order of :class:`reprobook.combopt.cmst.CMSTGraph` (BU edges, then depot edges).
"""
from __future__ import annotations

import torch
from torch import nn

__all__ = ["EdgeWeightGNN"]


def _mlp(i, h, o):
    return nn.Sequential(nn.Linear(i, h), nn.ReLU(), nn.Linear(h, o))


class EdgeWeightGNN(nn.Module):
    """``forward(x, edges, e_bu, e_dep) -> theta`` with ``x`` ``(n, F)`` BU features, ``edges``
    ``(E, 2)`` long, ``e_bu`` ``(E, G)`` and ``e_dep`` ``(n, G)`` edge features."""

    def __init__(self, node_dim: int, edge_dim: int, hidden: int = 32, layers: int = 3):
        super().__init__()
        for name, v in (("node_dim", node_dim), ("edge_dim", edge_dim), ("hidden", hidden),
                        ("layers", layers)):
            if not isinstance(v, int) or v < 1:
                raise ValueError(f"{name} must be a positive integer, got {v!r}")
        self.node_dim, self.edge_dim = node_dim, edge_dim
        self.embed = _mlp(node_dim + 1, hidden, hidden)     # +1: "is the depot" flag
        self.self_lin = nn.ModuleList(nn.Linear(hidden, hidden) for _ in range(layers))
        self.msg_lin = nn.ModuleList(nn.Linear(hidden + edge_dim, hidden) for _ in range(layers))
        self.norms = nn.ModuleList(nn.LayerNorm(hidden) for _ in range(layers))
        self.head_bu = _mlp(2 * hidden + edge_dim, hidden, 1)
        self.head_dep = _mlp(2 * hidden + edge_dim, hidden, 1)

    def forward(self, x, edges, e_bu, e_dep):
        n = x.shape[0]
        if x.dim() != 2 or x.shape[1] != self.node_dim:
            raise ValueError(f"x must have shape (n, {self.node_dim}), got {tuple(x.shape)}")
        edges = torch.as_tensor(edges, dtype=torch.long).reshape(-1, 2)
        if edges.numel() and (edges.min() < 0 or edges.max() >= n):
            raise ValueError(f"edges must index BUs 0..{n - 1}")
        if e_bu.shape != (edges.shape[0], self.edge_dim):
            raise ValueError(f"e_bu must have shape ({edges.shape[0]}, {self.edge_dim}), "
                             f"got {tuple(e_bu.shape)}")
        if e_dep.shape != (n, self.edge_dim):
            raise ValueError(f"e_dep must have shape ({n}, {self.edge_dim}), "
                             f"got {tuple(e_dep.shape)}")
        depot = torch.full((n,), n, dtype=torch.long)
        bus = torch.arange(n)
        src = torch.cat([edges[:, 0], edges[:, 1], depot, bus])
        dst = torch.cat([edges[:, 1], edges[:, 0], bus, depot])
        efeat = torch.cat([e_bu, e_bu, e_dep, e_dep])
        flag = torch.zeros(n + 1, 1, dtype=x.dtype)
        flag[n] = 1
        h = self.embed(torch.cat([torch.cat([x, x.new_zeros(1, x.shape[1])]), flag], 1))
        ones = torch.ones_like(dst, dtype=x.dtype)
        deg = torch.zeros(n + 1, dtype=x.dtype).index_add_(0, dst, ones)
        for lin_s, lin_m, norm in zip(self.self_lin, self.msg_lin, self.norms):
            m = lin_m(torch.cat([h[src], efeat], 1))
            agg = torch.zeros_like(h).index_add_(0, dst, m) / deg.clamp(min=1)[:, None]
            h = norm(h + torch.relu(lin_s(h) + agg))
        hu, hv = h[edges[:, 0]], h[edges[:, 1]]
        t_bu = self.head_bu(torch.cat([hu + hv, (hu - hv).abs(), e_bu], 1)).squeeze(1)
        t_dep = self.head_dep(torch.cat([h[n].expand(n, -1), h[:n], e_dep], 1)).squeeze(1)
        return torch.cat([t_bu, t_dep])
