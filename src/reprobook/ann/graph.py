"""A Vamana-style proximity graph and the searches that run on it, counting distance computations.

**Build** (a "static" Vamana / DiskANN graph). For every point :math:`p` take its ``n_candidates``
exact nearest neighbours as candidates and keep at most ``R`` of them by *RobustPrune*: walk the
candidates from nearest to farthest; keep the nearest remaining one, :math:`p^*`, and discard every
candidate :math:`c` that :math:`p^*` already "covers",

.. math:: \\alpha \\, \\|p^* - c\\| \\le \\|p - c\\| ,

then repeat until ``R`` are kept or none remain. ``alpha > 1`` keeps some longer edges, which makes
the graph easier to navigate. Reverse edges are added and any node whose list then exceeds ``R``
is pruned again with the same rule. The entry point is the medoid (the point nearest the mean).
Finally every node is made reachable from the entry point (an edge from its nearest reachable node
is added where needed), so a search with an unbounded list visits everything.

**Search.** Two primitives, both counting every distance they compute:

* :func:`greedy_descent` (``GetClosestPoint`` in the CSPG code): from a start node move to the
  nearest neighbour while that improves; every neighbour of every node on the path is one
  distance computation.
* :func:`beam_search`: best-first search with a candidate min-heap and a result max-heap holding
  at most ``ef`` points; stop when the nearest unexpanded candidate is farther than the worst
  result and the result list is full.

:func:`two_stage_search` chains them (greedy descent from the entry point, then a beam search from
the node it found); it is the baseline the CSPG chapter compares with, because it is exactly the
two-stage procedure CSPG runs, on one unpartitioned graph.
"""
from __future__ import annotations

import heapq
from dataclasses import dataclass

import numpy as np

from ..threads import single_threaded_blas
from .exact import exact_knn

__all__ = ["ProximityGraph", "SearchResult", "medoid", "robust_prune", "build_graph",
           "reachable", "repair_reachability", "greedy_descent", "beam_search",
           "two_stage_search", "search_many"]


@dataclass
class ProximityGraph:
    """Vectors ``X`` (float32, n x d), out-neighbour lists ``adj`` and the ``entry`` node."""

    X: np.ndarray
    adj: list
    entry: int

    def __post_init__(self):
        self.X = np.ascontiguousarray(self.X, dtype=np.float32)
        if self.X.ndim != 2:
            raise ValueError(f"X must be 2-D, got shape {self.X.shape}")
        if len(self.adj) != self.X.shape[0]:
            raise ValueError(f"adj has {len(self.adj)} lists but X has {self.X.shape[0]} points")
        if not 0 <= int(self.entry) < self.X.shape[0]:
            raise ValueError(f"entry {self.entry} is not a node id in [0, {self.X.shape[0]})")
        self.adj = [np.asarray(a, dtype=np.int64) for a in self.adj]
        self.entry = int(self.entry)

    @property
    def n(self) -> int:
        return self.X.shape[0]

    def degrees(self) -> np.ndarray:
        return np.array([len(a) for a in self.adj])


@dataclass
class SearchResult:
    """Returned ids and squared distances (nearest first), distance computations, expansions.

    ``n_dist_parts`` (CSPG only): the stage-2 distance computations made in each partition."""

    ids: np.ndarray
    dists: np.ndarray
    n_dist: int
    n_hops: int
    n_dist_parts: tuple | None = None


def medoid(X) -> int:
    """The index of the point nearest the mean of ``X`` (DiskANN's entry point)."""
    X = np.asarray(X, dtype=np.float64)
    return int(np.argmin(((X - X.mean(0)) ** 2).sum(1)))


def _check_build_args(R, alpha, n_candidates, n):
    if isinstance(R, bool) or not isinstance(R, (int, np.integer)) or R < 1:
        raise ValueError(f"R (maximum out-degree) must be a positive int, got {R!r}")
    if not np.isfinite(alpha) or alpha < 1.0:
        raise ValueError(f"alpha must be a finite number >= 1, got {alpha!r}")
    if n_candidates is not None and (n_candidates < 1):
        raise ValueError(f"n_candidates must be >= 1, got {n_candidates!r}")
    if n < 2:
        raise ValueError(f"a proximity graph needs at least 2 points, got {n}")


def robust_prune(X, nodes, cand, alpha: float, R: int, block: int = 512) -> list:
    """RobustPrune for many nodes at once.

    ``cand`` is an int array (len(nodes) x K) of candidate ids per node, padded with ``-1``; the
    node itself and duplicates may appear and are ignored. Returns one array of kept
    out-neighbours per node, nearest first. Works on squared distances, so the covering test is
    :math:`\\alpha^2 d^2(p^*, c) \\le d^2(p, c)`.
    """
    X = np.ascontiguousarray(X, dtype=np.float32)
    nodes = np.asarray(nodes, dtype=np.int64)
    cand = np.asarray(cand, dtype=np.int64)
    if cand.ndim != 2 or cand.shape[0] != nodes.shape[0]:
        raise ValueError(f"cand must be (len(nodes), K), got {cand.shape} for {nodes.shape[0]} nodes")
    if not np.isfinite(alpha) or alpha < 1.0:
        raise ValueError(f"alpha must be >= 1, got {alpha!r}")
    a2 = float(alpha) ** 2
    out = []
    for s in range(0, nodes.shape[0], block):
        nb, cb = nodes[s:s + block], cand[s:s + block]
        b, K = cb.shape
        valid = (cb >= 0) & (cb != nb[:, None])
        # drop repeated candidates (keep first occurrence)
        srt = np.sort(np.where(valid, cb, -1), axis=1)
        dup_vals = srt[:, 1:][(srt[:, 1:] == srt[:, :-1]) & (srt[:, 1:] >= 0)]
        if dup_vals.size:
            for i in range(b):
                _, first = np.unique(cb[i], return_index=True)
                keep = np.zeros(K, bool)
                keep[first] = True
                valid[i] &= keep
        safe = np.where(valid, cb, 0)
        diff = X[safe] - X[nb][:, None, :]                    # b x K x d
        dn = np.einsum("bkd,bkd->bk", diff, diff)
        dn[~valid] = np.inf
        order = np.argsort(dn, axis=1, kind="stable")
        cb = np.take_along_axis(safe, order, 1)
        dn = np.take_along_axis(dn, order, 1)
        alive = np.isfinite(dn)
        xc = X[cb]
        sq = np.einsum("bkd,bkd->bk", xc, xc)
        pair = sq[:, :, None] + sq[:, None, :] - 2.0 * np.matmul(xc, xc.transpose(0, 2, 1))
        pair *= a2                                            # alpha^2 d^2(c_i, c_j)
        kept = np.full((b, R), -1, dtype=np.int64)
        rows = np.arange(b)
        for t in range(R):
            has = alive.any(1)
            if not has.any():
                break
            j = np.argmax(alive, axis=1)                       # nearest still-alive candidate
            kept[:, t] = np.where(has, cb[rows, j], -1)
            alive &= pair[rows, j, :] > dn                     # drop what p* covers (and p* itself)
        out.extend(k[k >= 0] for k in kept)
    return out


def _split_by_source(src, dst, n) -> list:
    """Edge arrays (sorted by ``src``) -> one array of targets per node."""
    cuts = np.searchsorted(src, np.arange(1, n))
    return np.split(dst, cuts)


def _csr(adj):
    from scipy.sparse import csr_matrix

    n = len(adj)
    indptr = np.zeros(n + 1, dtype=np.int64)
    indptr[1:] = np.cumsum([len(a) for a in adj])
    indices = np.concatenate(adj) if n else np.zeros(0, dtype=np.int64)
    return csr_matrix((np.ones(indices.size, dtype=np.int8), indices, indptr), shape=(n, n))


def reachable(adj, sources) -> np.ndarray:
    """Boolean mask of the nodes reachable from any of ``sources`` along directed edges."""
    from scipy.sparse.csgraph import breadth_first_order

    n = len(adj)
    srcs = np.unique(np.atleast_1d(np.asarray(sources, dtype=np.int64)))
    if srcs.size and (srcs.min() < 0 or srcs.max() >= n):
        raise ValueError(f"sources must be node ids in [0, {n})")
    g = _csr(adj)
    seen = np.zeros(n, dtype=bool)
    for s in srcs:
        if not seen[s]:
            seen[breadth_first_order(g, int(s), directed=True, return_predecessors=False)] = True
    return seen


def repair_reachability(X, adj, sources) -> int:
    """Make every node reachable from ``sources``: for each unreachable node (in id order) add an
    edge from its nearest reachable node, then extend the reachable set. Mutates ``adj``; returns
    the number of edges added."""
    X = np.asarray(X, dtype=np.float64)
    seen = reachable(adj, sources)
    added = 0
    while not seen.all():
        u = int(np.flatnonzero(~seen)[0])
        reach = np.flatnonzero(seen)
        v = int(reach[np.argmin(((X[reach] - X[u]) ** 2).sum(1))])
        adj[v] = np.append(adj[v], u)
        added += 1
        # BFS from u only: everything it reaches joins the reachable set
        seen |= reachable(adj, [u])
    return added


def build_graph(X, R: int = 24, alpha: float = 1.2, n_candidates: int = 64,
                repair: bool = True, block: int = 512, candidates=None) -> ProximityGraph:
    """Build the static Vamana-style graph described in the module docstring.

    ``candidates`` (optional, n x K ids padded with -1) replaces the exact ``n_candidates``-NN
    lists, e.g. when they were already computed for a larger set (see
    :func:`reprobook.ann.cspg.build_cspg`).
    """
    X = np.ascontiguousarray(X, dtype=np.float32)
    if X.ndim != 2:
        raise ValueError(f"X must be a 2-D array (points x dims), got shape {X.shape}")
    n = X.shape[0]
    _check_build_args(R, alpha, n_candidates, n)
    if candidates is None:
        K = min(int(n_candidates), n - 1)
        cand, _ = exact_knn(X, None, K, exclude_self=True, block=block, dtype=np.float32)
    else:
        cand = np.asarray(candidates, dtype=np.int64)
        if cand.ndim != 2 or cand.shape[0] != n or cand.max() >= n:
            raise ValueError(f"candidates must be (n={n}, K) ids in [-1, n), got {cand.shape}")
    with single_threaded_blas():
        return _build(X, cand, R, alpha, repair, block)


def _build(X, cand, R, alpha, repair, block):
    n = X.shape[0]
    adj = robust_prune(X, np.arange(n), cand, alpha, R, block)
    # reverse edges: u -> v gives v a candidate u; re-prune the lists that grew past R
    src = np.concatenate([np.full(len(a), u, dtype=np.int64) for u, a in enumerate(adj)])
    dst = np.concatenate(adj).astype(np.int64)
    key = np.unique(np.concatenate([src * n + dst, dst * n + src]))
    merged = _split_by_source(key // n, key % n, n)
    sizes = np.array([len(m) for m in merged])
    final = [m if len(m) <= R else None for m in merged]
    # prune in blocks of similar list length, so the padding (and the K x K work) stays small
    over = np.flatnonzero(sizes > R)
    over = over[np.argsort(sizes[over], kind="stable")]
    for s in range(0, over.size, block):
        vs = over[s:s + block]
        pad = np.full((vs.size, sizes[vs].max()), -1, dtype=np.int64)
        for i, v in enumerate(vs):
            pad[i, :sizes[v]] = merged[v]
        for v, kept in zip(vs, robust_prune(X, vs, pad, alpha, R, block)):
            final[v] = kept
    # neighbours nearest first, so greedy steps and tests see a canonical order
    src = np.concatenate([np.full(len(a), u, dtype=np.int64) for u, a in enumerate(final)])
    dst = np.concatenate(final).astype(np.int64)
    dd = np.einsum("ij,ij->i", X[src] - X[dst], X[src] - X[dst])
    order = np.lexsort((dst, dd, src))
    adj = _split_by_source(src[order], dst[order], n)
    entry = medoid(X)
    if repair:
        repair_reachability(X, adj, [entry])
    return ProximityGraph(X=X, adj=adj, entry=entry)


def _check_query(g: ProximityGraph, q) -> np.ndarray:
    q = np.asarray(q, dtype=np.float32).reshape(-1)
    if q.shape[0] != g.X.shape[1]:
        raise ValueError(f"query has dimension {q.shape[0]} but the graph's vectors have "
                         f"{g.X.shape[1]}")
    return q


def greedy_descent(g: ProximityGraph, q, start: int | None = None) -> tuple[int, float, int]:
    """Greedy walk to a local minimum of the distance to ``q``.

    Returns ``(node, squared distance, distance computations)``. Every neighbour of every node on
    the walk is counted, as in the reference implementation (no visited set in this stage).
    """
    q = _check_query(g, q)
    X, adj = g.X, g.adj
    cur = g.entry if start is None else int(start)
    dcur = float(((X[cur] - q) ** 2).sum())
    count = 1
    while True:
        nb = adj[cur]
        if nb.size == 0:
            break
        d = ((X[nb] - q) ** 2).sum(1)
        count += nb.size
        j = int(np.argmin(d))
        if d[j] < dcur:
            cur, dcur = int(nb[j]), float(d[j])
        else:
            break
    return cur, dcur, count


def _check_ef_k(ef, k):
    if isinstance(ef, bool) or not isinstance(ef, (int, np.integer)) or ef < 1:
        raise ValueError(f"ef (result list size) must be a positive int, got {ef!r}")
    if k is not None and (isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1):
        raise ValueError(f"k must be a positive int, got {k!r}")


def beam_search(g: ProximityGraph, q, ef: int, k: int | None = None,
                start: int | None = None) -> SearchResult:
    """Best-first search with a result list of size ``ef`` from ``start`` (default: the entry).

    Counts one distance computation for the start node and one per newly visited neighbour.
    Returns the ``k`` (default ``ef``) best points found, nearest first.
    """
    _check_ef_k(ef, k)
    q = _check_query(g, q)
    X, adj = g.X, g.adj
    s = g.entry if start is None else int(start)
    visited = np.zeros(g.n, dtype=bool)
    visited[s] = True
    d0 = float(((X[s] - q) ** 2).sum())
    count, hops = 1, 0
    cand = [(d0, s)]              # min-heap of (dist, id)
    res = [(-d0, s)]              # max-heap (negated) of the best ef
    bound = d0
    while cand:
        d, v = heapq.heappop(cand)
        if d > bound and len(res) >= ef:
            break
        hops += 1
        nb = adj[v]
        new = nb[~visited[nb]]
        if new.size == 0:
            continue
        visited[new] = True
        dn = ((X[new] - q) ** 2).sum(1)
        count += new.size
        for dd, u in zip(dn.tolist(), new.tolist()):
            if len(res) < ef or dd < bound:
                heapq.heappush(cand, (dd, u))
                heapq.heappush(res, (-dd, u))
                if len(res) > ef:
                    heapq.heappop(res)
                bound = -res[0][0]
    best = sorted((-nd, u) for nd, u in res)
    k = ef if k is None else k
    best = best[:k]
    return SearchResult(ids=np.array([u for _, u in best], dtype=np.int64),
                        dists=np.array([d for d, _ in best]), n_dist=count, n_hops=hops)


def two_stage_search(g: ProximityGraph, q, ef: int, k: int | None = None) -> SearchResult:
    """Greedy descent from the entry, then :func:`beam_search` from the node it reached.

    The beam search recomputes the distance of its start node (as the CSPG reference code does),
    so this is the exact single-graph special case of the CSPG search.
    """
    _check_ef_k(ef, k)
    node, _, c1 = greedy_descent(g, q)
    r = beam_search(g, q, ef, k, start=node)
    return SearchResult(ids=r.ids, dists=r.dists, n_dist=r.n_dist + c1, n_hops=r.n_hops)


def search_many(search, Q, k: int, **kwargs) -> tuple[list, np.ndarray]:
    """Run ``search(q, k=k, **kwargs)`` for every row of ``Q``; return (id lists, counts)."""
    ids, counts = [], np.empty(len(Q), dtype=np.int64)
    for i, q in enumerate(Q):
        r = search(q, k=k, **kwargs)
        ids.append(r.ids)
        counts[i] = r.n_dist
    return ids, counts
