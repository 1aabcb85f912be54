"""Crossing sparse proximity graphs (CSPG; Yang, Cai & Zheng, NeurIPS 2024).

**Index.** Shuffle the ``n`` points; the first :math:`\\lfloor \\lambda n \\rfloor` become
*routing vectors* and go into **every** one of the ``m`` partitions, every other point goes to one
partition chosen uniformly at random. Each partition gets its own (sparser) proximity graph, built
by the same builder as the unpartitioned baseline. Inside every partition the routing vectors hold
the local ids ``0 .. r-1`` in the same order, so "local id < r" identifies a routing vector and
its copies in the other partitions have the same local id.

**Search** (two stages).

1. *Fast approaching*: a greedy descent (``ef1 = 1``) or a small beam search (``ef1 > 1``) on
   partition 0 only, from its entry point.
2. *Cross-partition precise search*: a best-first beam search with a result list of size ``ef``
   over all partitions at once, seeded with the point stage 1 found. Neighbours are expanded
   inside their own partition; whenever a routing vector enters the result list, its copies in
   every other partition are pushed too, with the distance already known (no new distance
   computation) and marked visited there. That is how the search crosses partitions.

As in the reference code, the copies also enter the result list, so the same point can appear
there once per partition; the returned ids are de-duplicated (``copies_in_results=False`` keeps the
copies out of the result list instead, a variant we also measure).

With one partition and no routing vectors the search is exactly
:func:`reprobook.ann.graph.two_stage_search` (same results, same distance count).
"""
from __future__ import annotations

import heapq
from dataclasses import dataclass

import numpy as np

from .graph import (ProximityGraph, SearchResult, beam_search, build_graph, greedy_descent,
                    reachable, repair_reachability)

__all__ = ["CSPGIndex", "build_cspg"]


@dataclass
class CSPGIndex:
    """Partition graphs, their local-to-global id maps and the number of routing vectors."""

    graphs: list
    to_global: list
    n_routing: int

    def __post_init__(self):
        if not self.graphs:
            raise ValueError("graphs must hold at least one partition graph")
        if len(self.graphs) != len(self.to_global):
            raise ValueError(f"{len(self.graphs)} graphs but {len(self.to_global)} id maps")
        self.to_global = [np.asarray(t, dtype=np.int64) for t in self.to_global]
        for i, (g, t) in enumerate(zip(self.graphs, self.to_global)):
            if not isinstance(g, ProximityGraph):
                raise TypeError(f"graphs[{i}] must be a ProximityGraph, got {type(g).__name__}")
            if t.shape != (g.n,):
                raise ValueError(f"to_global[{i}] has shape {t.shape}, graph {i} has {g.n} nodes")
        r = int(self.n_routing)
        if r < 0 or any(r > g.n for g in self.graphs):
            raise ValueError(f"n_routing={r} must be in [0, smallest partition size]")
        ref = self.to_global[0][:r]
        if any(not np.array_equal(t[:r], ref) for t in self.to_global[1:]):
            raise ValueError("routing vectors must hold local ids 0..n_routing-1, in the same "
                             "order, in every partition")
        if len(self.graphs) > 1 and r == 0:
            raise ValueError("with more than one partition, n_routing must be > 0 (otherwise the "
                             "search cannot leave partition 0)")
        self.n_routing = r

    @classmethod
    def single(cls, graph: ProximityGraph) -> "CSPGIndex":
        """One partition, no routing vectors: the unpartitioned graph seen as a CSPG."""
        return cls(graphs=[graph], to_global=[np.arange(graph.n)], n_routing=0)

    @property
    def m(self) -> int:
        return len(self.graphs)

    @property
    def n(self) -> int:
        return int(max(t.max() for t in self.to_global)) + 1

    def search(self, q, ef: int, k: int | None = None, ef1: int = 1,
               copies_in_results: bool = True) -> SearchResult:
        """Two-stage CSPG search (module docstring). Returns global ids, nearest first, the
        number of distance computations of both stages, and (``n_dist_parts``) how many of the
        stage-2 ones each partition took."""
        for name, v in (("ef", ef), ("ef1", ef1)):
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
                raise ValueError(f"{name} must be a positive int, got {v!r}")
        if k is not None and (isinstance(k, bool) or not isinstance(k, (int, np.integer))
                              or k < 1):
            raise ValueError(f"k must be a positive int, got {k!r}")
        g0 = self.graphs[0]
        q = np.asarray(q, dtype=np.float32).reshape(-1)
        if q.shape[0] != g0.X.shape[1]:
            raise ValueError(f"query has dimension {q.shape[0]}, the index {g0.X.shape[1]}")
        # stage 1: fast approach on partition 0
        if ef1 > 1:
            r1 = beam_search(g0, q, ef1, k=1)
            start, count = int(r1.ids[0]), r1.n_dist
        else:
            start, _, count = greedy_descent(g0, q)
        # stage 2: cross-partition best-first search
        m, r = self.m, self.n_routing
        visited = [np.zeros(g.n, dtype=bool) for g in self.graphs]
        d0 = float(((g0.X[start] - q) ** 2).sum())
        count += 1
        visited[0][start] = True
        cand = [(d0, 0, start)]
        res = [(-d0, 0, start)]
        bound = d0
        hops = 0
        parts = [0] * m
        while cand:
            d, p, v = heapq.heappop(cand)
            if d > bound and len(res) >= ef:
                break
            hops += 1
            g, vis = self.graphs[p], visited[p]
            nb = g.adj[v]
            new = nb[~vis[nb]]
            if new.size == 0:
                continue
            vis[new] = True
            dn = ((g.X[new] - q) ** 2).sum(1)
            count += new.size
            parts[p] += new.size
            for dd, u in zip(dn.tolist(), new.tolist()):
                if len(res) < ef or dd < bound:
                    heapq.heappush(cand, (dd, p, u))
                    heapq.heappush(res, (-dd, p, u))
                    if u < r:  # a routing vector: continue in every other partition for free
                        for o in range(m):
                            if o != p:
                                visited[o][u] = True
                                heapq.heappush(cand, (dd, o, u))
                                if copies_in_results:
                                    heapq.heappush(res, (-dd, o, u))
                    while len(res) > ef:
                        heapq.heappop(res)
                    bound = -res[0][0]
        best = sorted((-nd, p, u) for nd, p, u in res)
        ids, dists, seen = [], [], set()
        for d, p, u in best:
            gid = int(self.to_global[p][u])
            if gid not in seen:
                seen.add(gid)
                ids.append(gid)
                dists.append(d)
        k = ef if k is None else k
        return SearchResult(ids=np.array(ids[:k], dtype=np.int64), dists=np.array(dists[:k]),
                            n_dist=count, n_hops=hops, n_dist_parts=tuple(parts))

    def union_reachable(self) -> np.ndarray:
        """Per partition, which nodes a search from partition 0's entry can reach (following
        edges, and jumping between copies of routing vectors). Returns one concatenated mask."""
        offs = np.cumsum([0] + [g.n for g in self.graphs])
        adj = []
        for p, g in enumerate(self.graphs):
            for u, a in enumerate(g.adj):
                extra = [offs[o] + u for o in range(self.m) if o != p] if u < self.n_routing else []
                adj.append(np.concatenate([a + offs[p], np.asarray(extra, dtype=np.int64)]))
        return reachable(adj, [self.graphs[0].entry])


def build_cspg(X, m: int, routing_ratio: float, rng: np.random.Generator, *, R: int = 24,
               alpha: float = 1.2, n_candidates: int = 64, repair: bool = True,
               knn=None, graph_builder=None) -> CSPGIndex:
    """Randomly partition ``X`` into ``m`` parts sharing :math:`\\lfloor\\lambda n\\rfloor`
    routing vectors and build one graph per part with :func:`~reprobook.ann.graph.build_graph`.

    With ``repair`` each partition is made reachable: partition 0 from its entry point, the others
    from their routing vectors (which the search reaches through partition 0).

    ``knn`` (optional): the exact neighbour ids of every point in the *whole* set, nearest first
    (n x K_all, no self). A partition's candidate list is then the first ``n_candidates`` of those
    that fall in the partition, which are exactly its in-partition nearest neighbours; the list is
    shorter where fewer than ``n_candidates`` of the ``K_all`` fall in it. This saves one
    brute-force pass per partition.

    ``graph_builder`` (optional): ``graph_builder(X_part, p) -> ProximityGraph`` builds partition
    ``p``'s graph instead (e.g. :func:`~reprobook.ann.hnsw.hnswlib_layer0`, search-built); ``R``,
    ``alpha``, ``n_candidates`` and ``knn`` are then unused. The graph must keep the partition's
    local ids (routing vectors first).
    """
    X = np.ascontiguousarray(X, dtype=np.float32)
    if X.ndim != 2:
        raise ValueError(f"X must be 2-D (points x dims), got shape {X.shape}")
    n = X.shape[0]
    if knn is not None:
        knn = np.asarray(knn, dtype=np.int64)
        if knn.ndim != 2 or knn.shape[0] != n:
            raise ValueError(f"knn must be (n={n}, K) neighbour ids, got shape {knn.shape}")
    if isinstance(m, bool) or not isinstance(m, (int, np.integer)) or m < 1:
        raise ValueError(f"m (number of partitions) must be a positive int, got {m!r}")
    if not 0.0 <= routing_ratio <= 1.0:
        raise ValueError(f"routing_ratio must be in [0, 1], got {routing_ratio!r}")
    if not isinstance(rng, np.random.Generator):
        raise TypeError("rng must be a numpy Generator (use reprobook.rng(seed, stream))")
    r = int(np.floor(routing_ratio * n))
    if m > 1 and r == 0:
        raise ValueError(f"routing_ratio={routing_ratio} gives no routing vector for n={n}; "
                         "the partitions would not be connected")
    perm = rng.permutation(n)
    routing, rest = perm[:r], perm[r:]
    owner = rng.integers(0, m, size=rest.size)
    graphs, maps = [], []
    for p in range(m):
        members = np.concatenate([routing, rest[owner == p]])
        if members.size < 2:
            raise ValueError(f"partition {p} has {members.size} point(s); use fewer partitions")
        if graph_builder is not None:
            g = graph_builder(X[members], p)
            if not isinstance(g, ProximityGraph) or g.n != members.size:
                raise ValueError(f"graph_builder must return a ProximityGraph on the partition's "
                                 f"{members.size} points")
        else:
            cand = None if knn is None else _restrict(knn, members, n, n_candidates)
            g = build_graph(X[members], R=R, alpha=alpha, n_candidates=n_candidates, repair=False,
                            candidates=cand)
        if repair:
            sources = [g.entry] if p == 0 else np.arange(r)
            repair_reachability(g.X, g.adj, sources)
        graphs.append(g)
        maps.append(members)
    return CSPGIndex(graphs=graphs, to_global=maps, n_routing=r)


def _restrict(knn, members, n, K):
    """Global neighbour lists -> the first ``K`` in-partition neighbours, in local ids (-1 pad)."""
    g2l = np.full(n, -1, dtype=np.int64)
    g2l[members] = np.arange(members.size)
    loc = g2l[knn[members]]
    order = np.argsort(loc < 0, axis=1, kind="stable")       # members first, order kept
    return np.take_along_axis(loc, order, 1)[:, :K]
