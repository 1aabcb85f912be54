r"""LightGCN (He et al., SIGIR 2020) on a bipartite graph, with the BPR loss, in plain torch.

Nodes are ``n_left`` left nodes (users, patients) followed by ``n_right`` right nodes (items,
phenotypes, factors). With :math:`A` the symmetric bipartite adjacency and :math:`D` its degrees,
one layer is the parameter-free propagation

.. math:: E^{(l+1)} = D^{-1/2} A D^{-1/2} E^{(l)},

and the output is the mean over layers :math:`\frac{1}{L+1}\sum_{l=0}^{L} E^{(l)}`. A node without
edges keeps :math:`E^{(0)}/(L+1)` (its degree is treated as 1: nothing flows in or out). The only
parameters are the layer-0 embeddings :math:`E^{(0)}`; the score of a pair is the dot product.

BPR (Rendle et al. 2009) with one sampled negative per observed positive :math:`(u, i)`:

.. math:: \mathcal L = -\frac{1}{|\mathcal E|}\sum_{(u,i,j)} \log\sigma(s_{ui} - s_{uj}).
"""
from __future__ import annotations

import numpy as np
import torch
from torch import nn

__all__ = ["bipartite_adjacency", "propagate", "LightGCN", "bpr_loss", "sample_negatives"]


def _edges(edges, n_left, n_right) -> np.ndarray:
    e = np.asarray(edges, dtype=np.int64)
    if e.size == 0:
        return e.reshape(0, 2)
    if e.ndim != 2 or e.shape[1] != 2:
        raise ValueError(f"edges must have shape (E, 2), got {e.shape}")
    if e[:, 0].min() < 0 or e[:, 0].max() >= n_left:
        raise ValueError(f"left indices of edges must lie in 0..{n_left - 1}")
    if e[:, 1].min() < 0 or e[:, 1].max() >= n_right:
        raise ValueError(f"right indices of edges must lie in 0..{n_right - 1}")
    return e


def bipartite_adjacency(edges, n_left: int, n_right: int) -> torch.Tensor:
    """The normalised adjacency :math:`D^{-1/2} A D^{-1/2}` of the bipartite graph, as a sparse
    ``(n_left + n_right)`` square tensor (duplicate edges count once)."""
    e = _edges(edges, n_left, n_right)
    e = np.unique(e, axis=0) if len(e) else e
    n = n_left + n_right
    rows = np.concatenate([e[:, 0], e[:, 1] + n_left])
    cols = np.concatenate([e[:, 1] + n_left, e[:, 0]])
    deg = np.bincount(rows, minlength=n).astype(np.float64)
    inv = 1 / np.sqrt(np.maximum(deg, 1.0))
    vals = inv[rows] * inv[cols]
    idx = torch.from_numpy(np.stack([rows, cols]))
    return torch.sparse_coo_tensor(idx, torch.from_numpy(vals).float(), (n, n),
                                   check_invariants=False).coalesce()


def propagate(adj: torch.Tensor, emb0: torch.Tensor, layers: int) -> torch.Tensor:
    """Mean of :math:`E^{(0)}, \\dots, E^{(L)}` under ``adj``."""
    if emb0.shape[0] != adj.shape[0]:
        raise ValueError(f"emb0 has {emb0.shape[0]} rows but the graph has {adj.shape[0]} nodes")
    out, e = emb0, emb0
    for _ in range(layers):
        e = torch.sparse.mm(adj, e)
        out = out + e
    return out / (layers + 1)


class LightGCN(nn.Module):
    """Layer-0 embeddings of ``n_left + n_right`` nodes (N(0, 0.1²) init); ``forward(adj,
    left_extra=None)`` returns the propagated ``(left, right)`` embeddings. ``left_extra`` (``(n_left,
    dim)``) is added to the left nodes' layer-0 embeddings (early fusion of side features)."""

    def __init__(self, n_left: int, n_right: int, dim: int = 32, layers: int = 3,
                 generator: torch.Generator | None = None):
        super().__init__()
        for name, v, lo in (("n_left", n_left, 1), ("n_right", n_right, 1), ("dim", dim, 1),
                            ("layers", layers, 0)):
            if isinstance(v, bool) or not isinstance(v, int) or v < lo:
                raise ValueError(f"{name} must be an integer >= {lo}, got {v!r}")
        self.n_left, self.n_right, self.layers = n_left, n_right, layers
        self.emb = nn.Parameter(0.1 * torch.randn(n_left + n_right, dim, generator=generator))

    def forward(self, adj: torch.Tensor, left_extra: torch.Tensor | None = None):
        e0 = self.emb
        if left_extra is not None:
            if left_extra.shape != (self.n_left, e0.shape[1]):
                raise ValueError(f"left_extra must have shape ({self.n_left}, {e0.shape[1]}), "
                                 f"got {tuple(left_extra.shape)}")
            e0 = torch.cat([e0[:self.n_left] + left_extra, e0[self.n_left:]])
        out = propagate(adj, e0, self.layers)
        return out[:self.n_left], out[self.n_left:]


def bpr_loss(user: torch.Tensor, pos: torch.Tensor, neg: torch.Tensor) -> torch.Tensor:
    """Mean of :math:`-\\log\\sigma(u\\cdot p - u\\cdot n)` over rows."""
    if not (user.shape == pos.shape == neg.shape):
        raise ValueError(f"user, pos and neg must have the same shape, got {tuple(user.shape)}, "
                         f"{tuple(pos.shape)}, {tuple(neg.shape)}")
    return -torch.nn.functional.logsigmoid((user * pos).sum(-1) - (user * neg).sum(-1)).mean()


def sample_negatives(edges, positive: np.ndarray, generator: np.random.Generator,
                     max_tries: int = 20) -> np.ndarray:
    """One right node per edge, uniform among those not positive for the edge's left node
    (``positive`` is the ``(n_left, n_right)`` boolean matrix of known positives); rejection
    sampling, so a left node positive for every right node raises."""
    e = np.asarray(edges, dtype=np.int64)
    n_right = positive.shape[1]
    if positive[np.unique(e[:, 0])].all(1).any():
        raise ValueError("a left node is positive for every right node: no negative to sample")
    neg = generator.integers(0, n_right, len(e))
    for _ in range(max_tries):
        bad = positive[e[:, 0], neg]
        if not bad.any():
            return neg
        neg[bad] = generator.integers(0, n_right, int(bad.sum()))
    bad = np.nonzero(positive[e[:, 0], neg])[0]
    for i in bad:       # the rare leftovers: pick exactly among the negatives
        neg[i] = generator.choice(np.nonzero(~positive[e[i, 0]])[0])
    return neg
