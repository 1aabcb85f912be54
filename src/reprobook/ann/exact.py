"""Exact nearest neighbours by brute force, and recall@k against them.

Distances are squared Euclidean, :math:`\\|q - x\\|^2 = \\|q\\|^2 - 2\\,q^\\top x + \\|x\\|^2`,
computed a block of queries at a time so memory stays bounded. Ground truth is computed in
float64 (ties and rounding then do not decide which neighbour counts as "true"); the candidate
lists a graph builder needs can use float32.
"""
from __future__ import annotations

import numpy as np
import torch

__all__ = ["sq_dists", "exact_knn", "recall_at_k"]


def _as_matrix(name: str, a) -> np.ndarray:
    a = np.asarray(a)
    if a.ndim != 2 or a.shape[0] == 0 or a.shape[1] == 0:
        raise ValueError(f"{name} must be a non-empty 2-D array (points x dims), got shape {a.shape}")
    if not np.issubdtype(a.dtype, np.number):
        raise TypeError(f"{name} must be numeric, got dtype {a.dtype}")
    return a


def sq_dists(Q, X, dtype=np.float64) -> np.ndarray:
    """All squared Euclidean distances between the rows of ``Q`` (m x d) and ``X`` (n x d)."""
    Q, X = _as_matrix("Q", Q), _as_matrix("X", X)
    if Q.shape[1] != X.shape[1]:
        raise ValueError(f"Q and X must have the same dimension, got {Q.shape[1]} and {X.shape[1]}")
    q = torch.from_numpy(np.ascontiguousarray(Q, dtype=dtype))
    x = torch.from_numpy(np.ascontiguousarray(X, dtype=dtype))
    d = (q * q).sum(1, keepdim=True) - 2.0 * q @ x.T + (x * x).sum(1)[None, :]
    return d.clamp_min_(0.0).numpy()


def exact_knn(X, Q, k: int, *, exclude_self: bool = False, block: int = 512,
              dtype=np.float64) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` nearest rows of ``X`` to each row of ``Q``, nearest first.

    Returns ``(ids, sq_distances)``, both ``(len(Q), k)``. With ``exclude_self=True`` the query set
    is ``X`` itself and each point's own index is left out (the builder's candidate lists).
    Ties are broken by the smaller index, so the answer is deterministic.
    """
    X = _as_matrix("X", X)
    Q = X if Q is None else _as_matrix("Q", Q)
    n = X.shape[0]
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise ValueError(f"k must be a positive int, got {k!r}")
    if k > n - int(exclude_self):
        raise ValueError(f"k={k} is larger than the number of candidate points "
                         f"({n - int(exclude_self)})")
    if exclude_self and Q.shape[0] != n:
        raise ValueError("exclude_self=True needs Q to be X itself (or None)")
    if block < 1:
        raise ValueError(f"block must be >= 1, got {block}")
    x = torch.from_numpy(np.ascontiguousarray(X, dtype=dtype))
    xn = (x * x).sum(1)
    ids = np.empty((Q.shape[0], k), dtype=np.int64)
    dist = np.empty((Q.shape[0], k), dtype=np.float64)
    kk = k + int(exclude_self)
    for s in range(0, Q.shape[0], block):
        q = torch.from_numpy(np.ascontiguousarray(Q[s:s + block], dtype=dtype))
        d = (q * q).sum(1, keepdim=True) - 2.0 * q @ x.T + xn[None, :]
        d.clamp_min_(0.0)
        if exclude_self:
            rows = torch.arange(q.shape[0])
            d[rows, rows + s] = float("inf")
        # topk is not guaranteed to break ties by index: take a few extra and sort stably.
        extra = min(n, kk + 8)
        val, idx = torch.topk(d, extra, dim=1, largest=False, sorted=True)
        val, idx = val.numpy(), idx.numpy()
        order = np.lexsort((idx, val), axis=1)
        idx = np.take_along_axis(idx, order, 1)[:, :k]
        val = np.take_along_axis(val, order, 1)[:, :k]
        ids[s:s + q.shape[0]], dist[s:s + q.shape[0]] = idx, val
    return ids, dist


def recall_at_k(found, truth, k: int | None = None) -> np.ndarray:
    """Per-query recall@k: the share of the true ``k`` nearest among the first ``k`` returned.

    ``found`` is a list (or 2-D array) of returned id lists, nearest first; ``truth`` is the
    ``(m, >=k)`` array of exact neighbour ids. Lists shorter than ``k`` count their misses.
    """
    truth = np.asarray(truth)
    if truth.ndim != 2:
        raise ValueError(f"truth must be 2-D (queries x neighbours), got shape {truth.shape}")
    k = truth.shape[1] if k is None else k
    if k < 1 or k > truth.shape[1]:
        raise ValueError(f"k must be in [1, {truth.shape[1]}], got {k}")
    if len(found) != truth.shape[0]:
        raise ValueError(f"found has {len(found)} queries but truth has {truth.shape[0]}")
    out = np.empty(truth.shape[0])
    for i, f in enumerate(found):
        out[i] = len(set(np.asarray(f)[:k].tolist()) & set(truth[i, :k].tolist())) / k
    return out

