r"""The bottom layer of an HNSW index built by ``hnswlib``, as a :class:`ProximityGraph`.

HNSW (Malkov & Yashunin) inserts points one at a time; each new point *searches* the graph built so
far (``ef_construction`` candidates) and keeps up to :math:`M` neighbours chosen by a pruning rule
like RobustPrune with :math:`\alpha = 1`; layer 0 allows :math:`2M`. Its layer 0 is therefore a
*search-built* proximity graph, the kind the CSPG paper wraps (its HNSW variant). We read the
links out of ``hnswlib``'s serialised state (``Index.__getstate__``: per element, a 4-byte link
count, :math:`2M` 4-byte link slots, the vector, the 8-byte label) and hand them to our own counted
searches. The upper layers are not kept: the entry point is the medoid, as for our other graphs, so
every graph is searched by the same code and counted the same way.
"""
from __future__ import annotations

import numpy as np

from .graph import ProximityGraph, medoid

__all__ = ["hnswlib_layer0"]


def hnswlib_layer0(X, M: int = 16, ef_construction: int = 128, seed: int = 0) -> ProximityGraph:
    """Build ``hnswlib``'s HNSW on ``X`` (single-threaded, so deterministic given ``seed``) and
    return its layer-0 graph (out-degree at most ``2 M``) with the medoid as entry point."""
    import hnswlib

    X = np.ascontiguousarray(X, dtype=np.float32)
    if X.ndim != 2 or X.shape[0] < 2:
        raise ValueError(f"X must be 2-D with at least 2 points, got shape {X.shape}")
    if not isinstance(M, (int, np.integer)) or M < 2:
        raise ValueError(f"M must be an int >= 2, got {M!r}")
    if not isinstance(ef_construction, (int, np.integer)) or ef_construction < 1:
        raise ValueError(f"ef_construction must be a positive int, got {ef_construction!r}")
    n, d = X.shape
    index = hnswlib.Index(space="l2", dim=d)
    index.init_index(max_elements=n, ef_construction=int(ef_construction), M=int(M),
                     random_seed=int(seed))
    index.set_num_threads(1)
    index.add_items(X, np.arange(n))
    st = index.__getstate__()[0]
    size, m0 = st["size_data_per_element"], st["max_M0"]
    raw = np.asarray(st["data_level0"], dtype=np.uint8)[: n * size].reshape(n, size)
    counts = raw[:, :4].copy().view(np.uint32)[:, 0] & 0xFFFF
    links = raw[:, 4:4 + 4 * m0].copy().view(np.uint32).astype(np.int64)
    lab = st["label_offset"]
    label_at = raw[:, lab:lab + 8].copy().view(np.uint64)[:, 0].astype(np.int64)  # internal -> label
    if not np.array_equal(np.sort(label_at), np.arange(n)):
        raise RuntimeError("hnswlib state: the stored labels are not a permutation of 0..n-1")
    adj = [np.empty(0, np.int64)] * n
    for i in range(n):
        adj[label_at[i]] = label_at[links[i, :counts[i]]]
    return ProximityGraph(X=X, adj=adj, entry=medoid(X))
