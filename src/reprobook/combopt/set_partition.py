r"""Districting as set partitioning over enumerated connected BU subsets.

Every feasible district is a connected set of BUs with ``lo <= |D| <= hi``. With the candidate
districts :math:`D_1..D_m` enumerated and a cost :math:`c_j` for each, the best districting solves

.. math:: \min_{z \in \{0,1\}^m} \sum_j c_j z_j \quad\text{s.t.}\quad
          \sum_{j:\, b \in D_j} z_j = 1 \;\; \forall b,

solved exactly: by dynamic programming over the set of covered BUs on small instances (at most
:data:`DP_MAX_N` BUs; each state covers the smallest uncovered BU with a district whose smallest BU it
is), and by ``scipy.optimize.milp`` (HiGHS branch and cut) above that. On the tiny instances of
training, a HiGHS call costs tens of milliseconds of set-up, the dynamic programme a fraction of
that. Enumeration uses Wernicke's ESU
scheme: each connected subset is grown from its smallest vertex, only adding vertices larger than
it that are not already neighbours of the current subset, so each subset is produced exactly once.
"""
from __future__ import annotations


import numpy as np
from scipy.optimize import LinearConstraint, milp
from scipy.sparse import csr_matrix

__all__ = ["connected_subsets", "solve_set_partition", "brute_force_partition", "DP_MAX_N"]

#: Up to this many BUs, ``solve_set_partition(method="auto")`` uses the dynamic programme.
DP_MAX_N = 20


def connected_subsets(adjacency: list[set[int]], lo: int, hi: int,
                      limit: int = 200_000) -> list[tuple[int, ...]]:
    """All connected vertex subsets with ``lo <= size <= hi`` (sorted tuples, sorted list)."""
    if lo < 1 or hi < lo:
        raise ValueError(f"lo and hi must satisfy 1 <= lo <= hi, got lo={lo}, hi={hi}")
    n = len(adjacency)
    out = []

    def extend(sub, ext, v):
        if len(sub) >= lo:
            out.append(tuple(sorted(sub)))
            if len(out) > limit:
                raise ValueError(f"limit: more than {limit} connected subsets; use smaller hi")
        if len(sub) == hi:
            return
        nbhd_sub = set().union(*(adjacency[u] for u in sub)) | set(sub)
        ext = list(ext)
        while ext:
            w = ext.pop()
            new_ext = ext + [u for u in adjacency[w] if u > v and u not in nbhd_sub
                             and u not in ext]
            extend(sub + [w], new_ext, v)

    for v in range(n):
        extend([v], [u for u in adjacency[v] if u > v], v)
    return sorted(out, key=lambda s: (len(s), s))


def solve_set_partition(n: int, subsets, costs, time_limit: float = 60.0, method: str = "auto"
                        ) -> tuple[list[tuple[int, ...]], float]:
    """Exact minimum-cost partition of ``0..n-1`` into the given subsets.

    ``method``: ``"dp"`` (dynamic programme over covered sets), ``"milp"`` (HiGHS), or ``"auto"``
    (the dynamic programme up to :data:`DP_MAX_N` elements, HiGHS above). Returns
    ``(chosen subsets, total cost)``; raises ``ValueError`` if no partition exists.
    """
    if method not in ("auto", "dp", "milp"):
        raise ValueError(f"method must be 'auto', 'dp' or 'milp', got {method!r}")
    costs = np.asarray(costs, dtype=float)
    if len(subsets) != len(costs):
        raise ValueError(f"costs must have one entry per subset: {len(costs)} != {len(subsets)}")
    if not np.all(np.isfinite(costs)):
        raise ValueError("costs must be finite")
    if len(subsets) == 0:
        raise ValueError("subsets is empty: no partition exists")
    rows = np.concatenate([np.asarray(s, dtype=np.int64) for s in subsets])
    if rows.min() < 0 or rows.max() >= n:
        raise ValueError(f"subsets must hold elements of 0..{n - 1}")
    if method == "dp" or (method == "auto" and n <= DP_MAX_N):
        return _dp_partition(n, subsets, costs)
    cols = np.repeat(np.arange(len(subsets)), [len(s) for s in subsets])
    a = csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(n, len(subsets)))
    res = milp(costs, constraints=LinearConstraint(a, 1, 1), integrality=np.ones(len(costs)),
               bounds=(0, 1), options={"time_limit": time_limit})
    if res.x is None or res.status not in (0,):
        raise ValueError(f"subsets admit no partition of 0..{n - 1} (HiGHS: {res.message})")
    chosen = [tuple(subsets[j]) for j in np.flatnonzero(res.x > 0.5)]
    return chosen, float(costs[res.x > 0.5].sum())


def _dp_partition(n: int, subsets, costs) -> tuple[list[tuple[int, ...]], float]:
    """Exact partition by memoised recursion on the bitmask of covered elements: the smallest
    uncovered element must be covered by a subset whose smallest element it is."""
    masks = [sum(1 << int(b) for b in s) for s in subsets]
    by_low: list[list[int]] = [[] for _ in range(n)]
    for j, s in enumerate(subsets):
        by_low[int(min(s))].append(j)
    full = (1 << n) - 1
    memo: dict[int, tuple[float, tuple[int, ...] | None]] = {full: (0.0, ())}
    cost = [float(c) for c in costs]

    def best(mask: int) -> tuple[float, tuple[int, ...] | None]:
        if mask in memo:
            return memo[mask]
        low = (~mask & (mask + 1)).bit_length() - 1      # the smallest uncovered element
        out: tuple[float, tuple[int, ...] | None] = (np.inf, None)
        for j in by_low[low]:
            if masks[j] & mask:
                continue
            rest, chosen = best(mask | masks[j])
            if chosen is not None and cost[j] + rest < out[0]:
                out = (cost[j] + rest, (j, *chosen))
        memo[mask] = out
        return out

    value, chosen = best(0)
    if chosen is None:
        raise ValueError(f"subsets admit no partition of 0..{n - 1}")
    return [tuple(subsets[j]) for j in chosen], float(value)


def brute_force_partition(n: int, subsets, costs) -> tuple[list[tuple[int, ...]], float]:
    """Exact partition by recursion on the smallest uncovered element (tests; tiny ``n``)."""
    costs = np.asarray(costs, dtype=float)
    by_min: dict[int, list[int]] = {}
    for j, s in enumerate(subsets):
        by_min.setdefault(min(s), []).append(j)
    best = [np.inf, None]

    def rec(covered, chosen, total):
        if total >= best[0]:
            return
        free = [b for b in range(n) if b not in covered]
        if not free:
            best[0], best[1] = total, list(chosen)
            return
        for j in by_min.get(free[0], []):
            s = set(subsets[j])
            if s & covered:
                continue
            rec(covered | s, chosen + [j], total + costs[j])

    rec(set(), [], 0.0)
    if best[1] is None:
        raise ValueError(f"subsets admit no partition of 0..{n - 1}")
    return [tuple(subsets[j]) for j in best[1]], float(best[0])


