r"""1-WL colour refinement and Tinhofer individualisation-refinement, canonical colour names.

A graph here is ``(n, edges)``: ``n`` nodes ``0..n-1`` and an ``(E, 2)`` integer array of
undirected edges (each listed once; self-loops and repeats are refused).

**Colour refinement (1-WL).** Starting from initial colours :math:`c^{(0)}` (constant by default),

.. math:: c^{(t+1)}_v = \mathrm{rank}\big(c^{(t)}_v,\ \{\!\{c^{(t)}_u : u \in N(v)\}\!\}\big),

where the new colour is the rank of the node's *signature* (its colour and the sorted multiset of
its neighbours' colours) among all signatures, in lexicographic order. Ranking sorted signatures
instead of hashing them or numbering them in order of appearance makes the colouring
**canonical**: an isomorphism of graphs maps colours to the same colours. Refinement stops when
the number of colours stops growing (the stable colouring). Two graphs can only be told apart by
1-WL if their stable colour histograms differ when refined *together* (on their disjoint union),
so that colour names are shared (:func:`wl_histograms`). Message-passing networks are at most as
discriminative as 1-WL (Xu et al. 2019; Morris et al. 2019).

**Tinhofer individualisation-refinement.** While the stable colouring is not discrete: take the
non-singleton colour class with the smallest colour, give one of its nodes, the one with the
smallest index, a colour of its own (placed just before the rest of its class), and refine again.
The final discrete colouring ranks the nodes ``0..n-1``. The choice of node within the class is
the only step that depends on how the nodes are numbered. If every chosen class is an orbit of
the automorphism group (Tinhofer graphs, e.g. vertex-transitive graphs such as the circulant CSL
graphs), every choice gives the same individualised graph up to automorphism: the ranks are
permutation-equivariant, and the graph with its nodes sorted by rank is a canonical form.

**Tinhofer_W** (Pellizzoni et al. 2024) keeps only a node's rank *within its stable 1-WL class*,
so that identifiers of nodes in different classes are not tied together.
"""
from __future__ import annotations

import numpy as np

__all__ = ["check_graph", "neighbour_table", "refine", "wl_histograms", "tinhofer_ranks",
           "tinhofer_w_ranks", "sorted_adjacency", "is_discrete"]


def check_graph(n, edges) -> tuple[int, np.ndarray]:
    """Validate ``(n, edges)`` and return them as ``(int, (E, 2) int64 array)``."""
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"n (the number of nodes) must be a positive int, got {n!r}")
    e = np.asarray(edges, dtype=np.int64)
    if e.size == 0:
        return int(n), e.reshape(0, 2)
    if e.ndim != 2 or e.shape[1] != 2:
        raise ValueError(f"edges must have shape (E, 2), got {e.shape}")
    if e.min() < 0 or e.max() >= n:
        raise ValueError(f"edges must name nodes 0..{n - 1}, got values {e.min()}..{e.max()}")
    if np.any(e[:, 0] == e[:, 1]):
        raise ValueError("self-loops are not supported")
    key = np.sort(e, axis=1)
    if len(np.unique(key, axis=0)) != len(key):
        raise ValueError("an edge is listed twice (list each undirected edge once)")
    return int(n), e


def neighbour_table(n: int, edges) -> np.ndarray:
    """``(n, max degree)`` array of each node's neighbours, padded with -1."""
    n, e = check_graph(n, edges)
    src = np.concatenate([e[:, 0], e[:, 1]])
    dst = np.concatenate([e[:, 1], e[:, 0]])
    deg = np.bincount(src, minlength=n)
    table = np.full((n, max(1, int(deg.max()) if deg.size else 1)), -1, dtype=np.int64)
    order = np.argsort(src, kind="stable")
    src, dst = src[order], dst[order]
    start = np.concatenate([[0], np.cumsum(deg)[:-1]])
    table[src, np.arange(len(src)) - start[src]] = dst
    return table


def _rename(rows: np.ndarray) -> np.ndarray:
    """Canonical colours: the rank of each row among the distinct rows (lexicographic)."""
    return np.unique(rows, axis=0, return_inverse=True)[1].reshape(-1).astype(np.int64)


def refine(table: np.ndarray, colours=None, max_rounds: int | None = None) -> np.ndarray:
    """The stable 1-WL colouring of the graph with neighbour ``table`` (see :func:`neighbour_table`),
    from ``colours`` (constant if None), with canonical colour names ``0..k-1``."""
    n = table.shape[0]
    c = np.zeros(n, dtype=np.int64) if colours is None else _rename(
        np.asarray(colours).reshape(n, -1))
    pad = table < 0
    rounds = n if max_rounds is None else int(max_rounds)
    for _ in range(rounds):
        nb = np.where(pad, -1, c[np.where(pad, 0, table)])
        nb.sort(axis=1)
        new = _rename(np.column_stack([c, nb]))
        if new.max() == c.max():          # no class split: stable (refinement only ever splits)
            return new
        c = new
    return c


def wl_histograms(graphs, colours=None) -> list[tuple]:
    """The stable 1-WL colour histogram of each graph, refined *together* so that colours are
    comparable across graphs: ``graphs`` is a list of ``(n, edges)``; ``colours`` an optional list
    of initial colour arrays. Equal histograms mean 1-WL cannot tell the graphs apart."""
    offsets, all_edges, init = 0, [], []
    sizes = []
    for i, (n, edges) in enumerate(graphs):
        n, e = check_graph(n, edges)
        all_edges.append(e + offsets)
        init.append(np.zeros(n, dtype=np.int64) if colours is None else np.asarray(colours[i]))
        sizes.append(n)
        offsets += n
    table = neighbour_table(offsets, np.concatenate(all_edges))
    c = refine(table, np.concatenate(init))
    out, start = [], 0
    for n in sizes:
        vals, counts = np.unique(c[start:start + n], return_counts=True)
        out.append(tuple(zip(vals.tolist(), counts.tolist())))
        start += n
    return out


def is_discrete(colours) -> bool:
    return len(np.unique(colours)) == len(colours)


def tinhofer_ranks(n: int, edges, colours=None, *, choose="first",
                   refinement: bool = True) -> np.ndarray:
    """Tinhofer individualisation-refinement: a rank ``0..n-1`` for every node (see the module).

    ``choose`` picks the node to individualise within the target class: ``"first"`` (the
    smallest index: the algorithm) or ``"last"`` (the largest index; tests use it to show that
    the choice does not matter on Tinhofer graphs). ``refinement=False`` removes the refinement
    steps (a broken variant for controls): nodes are then individualised one by one in the order
    of their indices within each initial colour class, and the ranks follow the input numbering.
    """
    if choose not in ("first", "last"):
        raise ValueError(f"choose must be 'first' or 'last', got {choose!r}")
    table = neighbour_table(n, edges)
    if not refinement:
        c0 = np.zeros(n, dtype=np.int64) if colours is None else _rename(
            np.asarray(colours).reshape(n, -1))
        order = np.lexsort((np.arange(n) if choose == "first" else -np.arange(n), c0))
        out = np.empty(n, dtype=np.int64)
        out[order] = np.arange(n)
        return out
    c = refine(table, colours)
    while not is_discrete(c):
        counts = np.bincount(c)
        target = int(np.flatnonzero(counts > 1)[0])       # smallest non-singleton colour
        members = np.flatnonzero(c == target)
        v = members[0] if choose == "first" else members[-1]
        split = 2 * c + 1
        split[v] = 2 * c[v]                               # v's own colour, just before its class
        c = refine(table, split)
    return c


def tinhofer_w_ranks(n: int, edges, colours=None) -> np.ndarray:
    """Tinhofer_W: each node's rank, by Tinhofer order, within its stable 1-WL colour class."""
    table = neighbour_table(n, edges)
    stable = refine(table, colours)
    rank = tinhofer_ranks(n, edges, colours)
    out = np.empty(n, dtype=np.int64)
    for cls in np.unique(stable):
        idx = np.flatnonzero(stable == cls)
        out[idx] = np.argsort(np.argsort(rank[idx]))
    return out


def sorted_adjacency(n: int, edges, ranks) -> np.ndarray:
    """The adjacency matrix with the nodes put in the order of ``ranks`` (a permutation of
    ``0..n-1``): equal for two graphs iff the rank-respecting map is an isomorphism."""
    n, e = check_graph(n, edges)
    ranks = np.asarray(ranks, dtype=np.int64)
    if sorted(ranks.tolist()) != list(range(n)):
        raise ValueError("ranks must be a permutation of 0..n-1")
    A = np.zeros((n, n), dtype=np.int8)
    A[ranks[e[:, 0]], ranks[e[:, 1]]] = 1
    A[ranks[e[:, 1]], ranks[e[:, 0]]] = 1
    return A
