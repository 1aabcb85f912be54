r"""The capacitated minimum spanning tree (CMST) with lower and upper subtree sizes.

Graph: BUs ``0..n-1`` with edges ``edges`` (``E x 2``) and a root (the depot) joined to every BU.
A weight vector ``theta`` has ``E + n`` entries: BU-BU edges first, then depot-BU edges. A
solution :math:`y \in \{0,1\}^{E+n}` is a spanning tree of this graph whose subtrees hanging off the
root each hold between ``lo`` and ``hi`` BUs; its cost is :math:`\theta^\top y`. Removing the root
decodes a tree into a districting: each root subtree is a connected district of admissible size.
The map from trees to districtings is onto, and for a fixed districting :math:`P` the cheapest
tree that decodes to it costs

.. math:: \sum_{D \in P} \Big(\mathrm{MST}_\theta(D) + \min_{b \in D} \theta_{0b}\Big),

so the CMST is a set-partitioning problem whose column costs are these tree costs. Solvers:

* :func:`solve_cmst_heuristic`: Esau-Williams savings with the upper capacity, a repair step
  for districts below ``lo`` (merge, steal a BU, or merge-and-split), then a local search that moves
  single boundary BUs between districts and re-districts groups of two or three adjacent
  districts exactly while it lowers the cost (:func:`improve_partition`). In the rare case the
  repair step is stuck, it starts from the exact column solution instead;
* :func:`solve_cmst_milp`: exact single-commodity-flow MILP (HiGHS), for tiny instances;
* :func:`solve_cmst_columns`: exact, by set partitioning over enumerated districts.
"""
from __future__ import annotations

import heapq

import numpy as np
from scipy.optimize import LinearConstraint, milp
from scipy.sparse import lil_matrix

from .set_partition import brute_force_partition, connected_subsets, solve_set_partition

__all__ = ["CMSTGraph", "check_districting", "is_feasible", "decode", "tree_of_partition",
           "improve_partition", "solve_cmst_heuristic", "solve_cmst_milp", "solve_cmst_columns"]


class CMSTGraph:
    """BUs ``0..n-1``, BU edges ``(E, 2)`` and the depot joined to all BUs."""

    def __init__(self, n: int, edges):
        if not isinstance(n, (int, np.integer)) or n < 1:
            raise ValueError(f"n must be a positive integer, got {n!r}")
        e = np.asarray(edges, dtype=np.int64).reshape(-1, 2)
        if e.size and (e.min() < 0 or e.max() >= n or np.any(e[:, 0] == e[:, 1])):
            raise ValueError(f"edges must join distinct BUs in 0..{n - 1}")
        self.n, self.edges = int(n), e
        self.adjacency = [set() for _ in range(n)]
        self.index = {}
        for k, (u, v) in enumerate(e.tolist()):
            self.adjacency[u].add(v)
            self.adjacency[v].add(u)
            self.index[(u, v)] = self.index[(v, u)] = k

    @property
    def dim(self) -> int:
        return len(self.edges) + self.n

    def check_theta(self, theta) -> np.ndarray:
        t = np.asarray(theta, dtype=float).reshape(-1)
        if t.shape[0] != self.dim:
            raise ValueError(f"theta must have E + n = {self.dim} entries, got {t.shape[0]}")
        if not np.all(np.isfinite(t)):
            raise ValueError("theta must be finite")
        return t

    def district_tree(self, district, theta) -> tuple[float, list[int]]:
        """Cheapest tree spanning ``district`` plus its cheapest depot edge: ``(cost, indices)``.
        ``inf`` if the district is not connected."""
        nodes = list(district)
        inside = set(nodes)
        ne = len(self.edges)
        start = min(nodes, key=lambda b: theta[ne + b])
        cost, used = theta[ne + start], [ne + start]
        seen = {start}
        heap = [(theta[self.index[(start, v)]], self.index[(start, v)], v)
                for v in self.adjacency[start] if v in inside]
        heapq.heapify(heap)
        while heap and len(seen) < len(nodes):
            w, k, v = heapq.heappop(heap)
            if v in seen:
                continue
            seen.add(v)
            cost += w
            used.append(k)
            for u in self.adjacency[v]:
                if u in inside and u not in seen:
                    kk = self.index[(v, u)]
                    heapq.heappush(heap, (theta[kk], kk, u))
        if len(seen) < len(nodes):
            return np.inf, used
        return float(cost), used


def _connected(adjacency, nodes) -> bool:
    nodes = set(nodes)
    if not nodes:
        return False
    stack, seen = [next(iter(nodes))], set()
    while stack:
        v = stack.pop()
        if v in seen:
            continue
        seen.add(v)
        stack.extend(u for u in adjacency[v] if u in nodes and u not in seen)
    return len(seen) == len(nodes)


def check_districting(adjacency, partition, lo: int, hi: int) -> list[str]:
    """Problems of a districting (empty list = feasible): every BU exactly once, districts
    connected, sizes in ``[lo, hi]``."""
    n = len(adjacency)
    problems = []
    seen = {}
    for i, d in enumerate(partition):
        d = list(d)
        if not d:
            problems.append(f"district {i} is empty")
            continue
        if not lo <= len(d) <= hi:
            problems.append(f"district {i} has {len(d)} BUs, outside [{lo}, {hi}]")
        for b in d:
            if not 0 <= b < n:
                problems.append(f"district {i} holds unknown BU {b}")
            elif b in seen:
                problems.append(f"BU {b} is in districts {seen[b]} and {i}")
            else:
                seen[b] = i
        if all(0 <= b < n for b in d) and not _connected(adjacency, d):
            problems.append(f"district {i} is not connected")
    missing = sorted(set(range(n)) - set(seen))
    if missing:
        problems.append(f"BUs {missing} are in no district")
    return problems


def is_feasible(adjacency, partition, lo: int, hi: int) -> bool:
    return not check_districting(adjacency, partition, lo, hi)


def decode(graph: CMSTGraph, y) -> list[tuple[int, ...]]:
    """Districts of a CMST solution ``y`` (root subtrees). Raises if ``y`` is not a spanning tree
    with exactly one depot edge per subtree."""
    y = np.asarray(y).reshape(-1)
    if y.shape[0] != graph.dim:
        raise ValueError(f"y must have E + n = {graph.dim} entries, got {y.shape[0]}")
    ne, n = len(graph.edges), graph.n
    parent = list(range(n))

    def find(a):
        while parent[a] != a:
            parent[a] = parent[parent[a]]
            a = parent[a]
        return a

    for k in np.flatnonzero(y[:ne] > 0.5):
        u, v = graph.edges[k]
        ru, rv = find(u), find(v)
        if ru == rv:
            raise ValueError("y is not a tree: its BU edges contain a cycle")
        parent[ru] = rv
    comps: dict[int, list[int]] = {}
    for b in range(n):
        comps.setdefault(find(b), []).append(b)
    gates = {}
    for b in np.flatnonzero(y[ne:] > 0.5):
        r = find(int(b))
        if r in gates:
            raise ValueError("y is not a tree: a subtree has two depot edges")
        gates[r] = b
    if len(gates) != len(comps):
        raise ValueError("y is not a tree: a subtree has no depot edge")
    return sorted(tuple(sorted(c)) for c in comps.values())


def tree_of_partition(graph: CMSTGraph, theta, partition) -> np.ndarray:
    """The theta-cheapest CMST solution that decodes to ``partition`` (the target embedding)."""
    theta = graph.check_theta(theta)
    y = np.zeros(graph.dim)
    for d in partition:
        cost, used = graph.district_tree(d, theta)
        if not np.isfinite(cost):
            raise ValueError(f"partition: district {tuple(d)} is not connected")
        y[used] = 1.0
    return y


def improve_partition(adjacency, lo: int, hi: int, cost, partition, max_passes: int = 200,
                      group_sizes=(2, 3)) -> list[tuple[int, ...]]:
    """Local search over feasible districtings: move one boundary BU to a neighbouring district
    (sizes stay in bounds, the donor stays connected) while the total ``cost(district)`` falls.
    Best improvement per pass. When no single move helps, the union
    of ``k`` adjacent districts, for ``k`` in ``group_sizes`` in turn, is re-districted exactly
    (this can change the number of districts). Deterministic."""
    parts = [frozenset(d) for d in partition]
    where = {b: i for i, d in enumerate(parts) for b in d}
    value = [cost(d) for d in parts]
    memo = {}   # union of a group -> its optimal re-districting (cost is fixed in this call)
    for _ in range(max_passes):
        best = (-1e-9, None)
        for b in sorted(where):
            i = where[b]
            if len(parts[i]) <= lo:
                continue
            targets = {where[u] for u in adjacency[b]} - {i}
            if not targets:
                continue
            rest = parts[i] - {b}
            if not _connected(adjacency, rest):
                continue
            c_rest = cost(rest)
            for j in sorted(targets):
                if len(parts[j]) >= hi:
                    continue
                grown = parts[j] | {b}
                delta = c_rest + cost(grown) - value[i] - value[j]
                if delta < best[0]:
                    best = (delta, (b, i, j, rest, grown))
        if best[1] is None:
            if not any(_group_move(adjacency, lo, hi, cost, parts, value, k, memo)
                       for k in group_sizes):
                break
            where = {b: i for i, d in enumerate(parts) for b in d}
            continue
        b, i, j, rest, grown = best[1]
        parts[i], parts[j] = rest, grown
        value[i], value[j] = cost(rest), cost(grown)
        where[b] = j
    return sorted(tuple(sorted(d)) for d in parts if d)


def _group_move(adjacency, lo, hi, cost, parts, value, size: int, memo=None) -> bool:
    """Re-district the union of ``size`` (2 or 3) mutually connected districts optimally (exact,
    by enumeration) into any number of districts; applies the best improving group in place and
    says whether it found one."""
    where = {b: i for i, d in enumerate(parts) for b in d}
    nbr = [sorted({where[u] for b in d for u in adjacency[b]} - {i}) for i, d in enumerate(parts)]
    groups = set()
    for i in range(len(parts)):
        for j in nbr[i]:
            if size == 2:
                groups.add(tuple(sorted((i, j))))
            else:
                for l in set(nbr[i]) | set(nbr[j]):
                    if l not in (i, j):
                        groups.add(tuple(sorted((i, j, l))))
    memo = {} if memo is None else memo
    best = (-1e-9, None)
    for grp in sorted(groups):
        key = frozenset().union(*(parts[g] for g in grp))
        if key not in memo:
            union = sorted(key)
            local = {b: k for k, b in enumerate(union)}
            sub_adj = [{local[u] for u in adjacency[b] if u in local} for b in union]
            subs = connected_subsets(sub_adj, lo, hi)
            costs = [cost(frozenset(union[k] for k in s)) for s in subs]
            try:
                chosen, total = brute_force_partition(len(union), subs, costs)
                memo[key] = (total, [frozenset(union[k] for k in s) for s in chosen])
            except ValueError:
                memo[key] = None
        if memo[key] is None:
            continue
        total, new = memo[key]
        delta = total - sum(value[g] for g in grp)
        if delta < best[0]:
            best = (delta, (grp, new))
    if best[1] is None:
        return False
    grp, new = best[1]
    for k in sorted(grp, reverse=True):
        parts.pop(k)
        value.pop(k)
    parts.extend(new)
    value.extend(cost(d) for d in new)
    return True


def _esau_williams(graph: CMSTGraph, theta, lo: int, hi: int, enforce_upper: bool = True):
    """Savings merges of root subtrees (capacity ``hi``), then repair of subtrees below ``lo``."""
    n, ne = graph.n, len(graph.edges)
    comp = list(range(n))
    members = {b: {b} for b in range(n)}
    gate = {b: theta[ne + b] for b in range(n)}
    cap = hi if enforce_upper else n
    order = np.argsort(theta[:ne], kind="stable")

    def merge(a, b):
        for v in members[b]:
            comp[v] = a
        members[a] |= members.pop(b)
        gate[a] = min(gate[a], gate.pop(b))

    while True:   # Esau-Williams: the best positive saving max(gate) - theta_uv
        best, pair = 1e-12, None
        for k in order:
            u, v = graph.edges[k]
            a, b = comp[u], comp[v]
            if a == b or len(members[a]) + len(members[b]) > cap:
                continue
            s = max(gate[a], gate[b]) - theta[k]
            if s > best:
                best, pair = s, (a, b)
        if pair is None:
            break
        merge(*pair)
    if not enforce_upper:
        return [sorted(m) for m in members.values()]
    tree = lambda nodes: graph.district_tree(nodes, theta)[0]
    for _ in range(4 * n):   # repair districts below lo
        small = [a for a in members if len(members[a]) < lo]
        if not small:
            break
        a = min(small, key=lambda c: (len(members[c]), min(members[c])))
        nbrs = sorted({comp[u] for v in members[a] for u in graph.adjacency[v]} - {a})
        fits = [b for b in nbrs if len(members[a]) + len(members[b]) <= hi]
        if fits:   # cheapest merge
            b = min(fits, key=lambda c: tree(members[a] | members[c]) - tree(members[c]))
            merge(b, a)
            continue
        steals = []   # take one BU from a neighbour that can spare it
        for b in nbrs:
            if len(members[b]) <= lo:
                continue
            for w in sorted(members[b]):
                if graph.adjacency[w] & members[a] and _connected(graph.adjacency,
                                                                  members[b] - {w}):
                    steals.append((tree(members[a] | {w}) + tree(members[b] - {w}), b, w))
        if steals:
            _, b, w = min(steals)
            members[b].discard(w)
            members[a].add(w)
            comp[w] = a
            continue
        split = None   # merge with a neighbour, then cut the joint tree into two admissible parts
        for b in nbrs:
            union = members[a] | members[b]
            if not 2 * lo <= len(union) <= 2 * hi:
                continue
            for part in _tree_cuts(graph, theta, union):
                if lo <= len(part) <= hi and lo <= len(union) - len(part) <= hi:
                    split = (b, part, union - part)
                    break
            if split:
                break
        if split is None:
            return None   # the caller falls back to an exact start
        b, p1, p2 = split
        for v in p1:
            comp[v] = a
        for v in p2:
            comp[v] = b
        members[a], members[b] = set(p1), set(p2)
        gate[a] = min(theta[ne + v] for v in p1)
        gate[b] = min(theta[ne + v] for v in p2)
    return [sorted(m) for m in members.values()]


def _tree_cuts(graph, theta, nodes):
    """Node sets on one side of each edge of the MST of ``nodes``."""
    _, used = graph.district_tree(nodes, theta)
    ne = len(graph.edges)
    tree_edges = [tuple(graph.edges[k]) for k in used if k < ne]
    for cut in tree_edges:
        adj = {v: set() for v in nodes}
        for u, v in tree_edges:
            if (u, v) != cut:
                adj[u].add(v)
                adj[v].add(u)
        side, stack = set(), [cut[0]]
        while stack:
            v = stack.pop()
            if v not in side:
                side.add(v)
                stack.extend(adj[v] - side)
        yield frozenset(side)


def solve_cmst_heuristic(graph: CMSTGraph, theta, lo: int, hi: int, *, local_search: bool = True,
                         group_sizes=(2, 3), enforce_upper: bool = True, starts=()
                         ) -> tuple[np.ndarray, list[tuple[int, ...]]]:
    """Esau-Williams + repair + boundary-move local search; returns ``(y, districts)``.

    ``group_sizes`` are the group re-districting moves (``()``: single moves only; ``(2,)`` is
    faster than the default). ``starts``: further feasible districtings to run the local search
    from; the cheapest result wins (training warm-starts from the target). ``enforce_upper=False``
    drops the capacity (a deliberately broken variant for the chapter)."""
    theta = graph.check_theta(theta)
    if not 1 <= lo <= hi:
        raise ValueError(f"lo and hi must satisfy 1 <= lo <= hi, got lo={lo}, hi={hi}")
    if graph.n < lo:
        raise ValueError(f"n = {graph.n} BUs cannot form a district of at least lo = {lo}")
    parts = _esau_williams(graph, theta, lo, hi, enforce_upper)
    if parts is None:   # repair failed (rare): start from the exact column solution instead
        return solve_cmst_columns(graph, theta, lo, hi)
    if local_search and enforce_upper:
        cache = {}

        def cost(d):
            key = frozenset(d)
            if key not in cache:
                cache[key] = graph.district_tree(key, theta)[0]
            return cache[key]

        found = [improve_partition(graph.adjacency, lo, hi, cost, p, group_sizes=group_sizes)
                 for p in [parts, *starts]]
        parts = min(found, key=lambda p: (sum(cost(d) for d in p), sorted(p)))
    parts = sorted(tuple(sorted(d)) for d in parts)
    return tree_of_partition(graph, theta, parts), parts


def solve_cmst_milp(graph: CMSTGraph, theta, lo: int, hi: int, time_limit: float = 60.0
                    ) -> tuple[np.ndarray, float]:
    r"""Exact CMST by a single-commodity flow MILP: one unit of flow from the root to every BU,
    arcs chosen with in-degree one per BU, flow on a chosen root arc (= subtree size) in
    ``[lo, hi]``, on other chosen arcs at most ``hi - 1``. Returns ``(y, optimal cost)``."""
    theta = graph.check_theta(theta)
    n, ne = graph.n, len(graph.edges)
    arcs = [(int(u), int(v), k) for k, (u, v) in enumerate(graph.edges)]
    arcs += [(v, u, k) for u, v, k in arcs]
    arcs += [(n, b, ne + b) for b in range(n)]         # root arcs
    na = len(arcs)
    c = np.concatenate([[theta[k] for _, _, k in arcs], np.zeros(na)])   # x then f
    lb, ub = [], []
    a = lil_matrix((2 * n + 2 * na, 2 * na))
    r = 0
    for b in range(n):   # in-degree one and flow conservation at every BU
        for i, (u, v, _) in enumerate(arcs):
            if v == b:
                a[r, i] = 1
                a[r + 1, na + i] = 1
            if u == b:
                a[r + 1, na + i] = -1
        lb += [1, 1]
        ub += [1, 1]
        r += 2
    for i, (u, _, _) in enumerate(arcs):   # flow only on chosen arcs, with the size bounds
        top = hi if u == n else hi - 1
        a[r, na + i], a[r, i] = 1, -top
        lb.append(-np.inf)
        ub.append(0)
        a[r + 1, na + i], a[r + 1, i] = 1, -(lo if u == n else 0)
        lb.append(0)
        ub.append(np.inf)
        r += 2
    res = milp(c, constraints=LinearConstraint(a.tocsr(), lb, ub),
               integrality=np.concatenate([np.ones(na), np.zeros(na)]),
               bounds=(np.zeros(2 * na), np.concatenate([np.ones(na), np.full(na, hi)])),
               options={"time_limit": time_limit})
    if res.x is None or res.status != 0:
        raise ValueError(f"no feasible CMST (HiGHS: {res.message})")
    y = np.zeros(graph.dim)
    for i, (_, _, k) in enumerate(arcs):
        if res.x[i] > 0.5:
            y[k] = 1.0
    return y, float(theta @ y)


def solve_cmst_columns(graph: CMSTGraph, theta, lo: int, hi: int, subsets=None
                       ) -> tuple[np.ndarray, list[tuple[int, ...]]]:
    """Exact CMST as set partitioning with tree-cost columns (enumerable instances)."""
    theta = graph.check_theta(theta)
    subsets = connected_subsets(graph.adjacency, lo, hi) if subsets is None else subsets
    costs = [graph.district_tree(s, theta)[0] for s in subsets]
    parts, _ = solve_set_partition(graph.n, subsets, costs)
    parts = sorted(tuple(sorted(d)) for d in parts)
    return tree_of_partition(graph, theta, parts), parts
