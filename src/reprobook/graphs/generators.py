"""Graph families with known ground truth, built with networkx and returned as ``(n, edges)``.

**CSL** (circular skip links; Murphy et al. 2019, used by Dwivedi et al.'s GNN benchmark): the
circulant graph :math:`C_n(1, s)` with nodes ``0..n-1`` on a cycle, each also joined to the node
``s`` steps ahead. The benchmark's 41-node graphs use the skips
``(2, 3, 4, 5, 6, 9, 11, 12, 13, 16)``, one class per skip. Every CSL graph is 4-regular, so 1-WL
(and every message-passing network without identifiers) gives all of them the same colouring.
"""
from __future__ import annotations

import networkx as nx
import numpy as np

from .wl import check_graph

__all__ = ["CSL_SKIPS", "csl_graph", "csl_graphs", "relabel", "relabelled_copies",
           "random_regular_graphs"]

#: The skip lengths of the CSL benchmark (41 nodes), one class each.
CSL_SKIPS = (2, 3, 4, 5, 6, 9, 11, 12, 13, 16)


def _edges(g: nx.Graph) -> np.ndarray:
    e = np.array(sorted(tuple(sorted(x)) for x in g.edges()), dtype=np.int64)
    return e.reshape(-1, 2)


def csl_graph(n: int, skip: int) -> tuple[int, np.ndarray]:
    """:math:`C_n(1, s)`: ``networkx.circulant_graph(n, [1, skip])``."""
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 5:
        raise ValueError(f"n must be an int >= 5, got {n!r}")
    if isinstance(skip, bool) or not isinstance(skip, (int, np.integer)) or not 1 < skip < n / 2:
        raise ValueError(f"skip must be an int with 1 < skip < n/2 (n = {n}), got {skip!r}")
    return int(n), _edges(nx.circulant_graph(int(n), [1, int(skip)]))


def csl_graphs(n: int = 41, skips=CSL_SKIPS) -> list[tuple[int, np.ndarray]]:
    """The CSL base graphs, one per skip (class ``i`` is ``skips[i]``)."""
    return [csl_graph(n, s) for s in skips]


def relabel(n: int, edges, perm) -> np.ndarray:
    """The edges of the same graph with node ``i`` renamed ``perm[i]``."""
    n, e = check_graph(n, edges)
    perm = np.asarray(perm, dtype=np.int64)
    if perm.shape != (n,) or sorted(perm.tolist()) != list(range(n)):
        raise ValueError(f"perm must be a permutation of 0..{n - 1}")
    return perm[e]


def relabelled_copies(base, per_class: int, rng: np.random.Generator):
    """``per_class`` copies of every base graph, each under a uniformly random node relabelling
    (the sample space of the CSL task: the class is which base graph it is). Returns the list of
    ``(n, edges)`` and the labels (the base graph's index), in class order."""
    if isinstance(per_class, bool) or not isinstance(per_class, (int, np.integer)) or per_class < 1:
        raise ValueError(f"per_class must be a positive int, got {per_class!r}")
    graphs, labels = [], []
    for label, (n, edges) in enumerate(base):
        for _ in range(int(per_class)):
            graphs.append((n, relabel(n, edges, rng.permutation(n))))
            labels.append(label)
    return graphs, np.array(labels, dtype=np.int64)


def random_regular_graphs(count: int, degree: int, n: int, rng: np.random.Generator):
    """``count`` pairwise non-isomorphic random ``degree``-regular graphs on ``n`` nodes."""
    out: list[nx.Graph] = []
    tries = 0
    while len(out) < count:
        tries += 1
        if tries > 100 * count:
            raise RuntimeError(f"could not draw {count} non-isomorphic {degree}-regular graphs "
                               f"on {n} nodes")
        g = nx.random_regular_graph(degree, n, seed=int(rng.integers(2**31)))
        if nx.is_connected(g) and not any(nx.is_isomorphic(g, h) for h in out):
            out.append(g)
    return [(n, _edges(g)) for g in out]
