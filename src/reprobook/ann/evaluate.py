"""Recall-versus-cost sweeps and the comparison of two searches at equal recall.

A *sweep* runs a search over a list of result-list sizes ``ef`` and keeps, per ``ef`` and per
query, recall@k and the number of distance computations. Two methods are compared at equal recall:
for each, the mean cost needed to reach a target recall is interpolated along its sweep
(:func:`cost_at_recall`), and the ratio baseline / method is the speed-up (> 1: the method needs
fewer distance computations). Its uncertainty belongs to the replicates the chapter varies
(independent graph builds): compute one cost at the target per build with :func:`cost_at_recall`
and pass the two lists to :func:`reprobook.intervals.ratio`.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from .exact import recall_at_k

__all__ = ["Sweep", "sweep", "cost_at_recall", "cost_ratio"]


@dataclass
class Sweep:
    """Per ``ef`` (rows) and per query (columns): recall@k, distance computations, expansions,
    and (CSPG) the distance computations made outside partition 0 (``cross``; zero otherwise).
    ``seconds`` is the wall time of each row (for speed *ratios* within one run only)."""

    ef: np.ndarray
    recall: np.ndarray
    cost: np.ndarray
    hops: np.ndarray
    seconds: np.ndarray
    cross: np.ndarray | None = None

    def curve(self, cols=None, what: str = "cost") -> tuple[np.ndarray, np.ndarray]:
        """Mean recall and mean ``what`` (cost or hops) per ``ef`` over the queries ``cols``."""
        cols = slice(None) if cols is None else cols
        return self.recall[:, cols].mean(1), getattr(self, what)[:, cols].mean(1)


def sweep(search, Q, truth, ef_list, k: int = 10) -> Sweep:
    """Run ``search(q, ef=ef, k=k)`` (returning a :class:`~reprobook.ann.graph.SearchResult`) for
    every query and every ``ef`` in ``ef_list``."""
    ef_list = [int(e) for e in ef_list]
    if not ef_list or min(ef_list) < 1:
        raise ValueError(f"ef_list must be non-empty positive ints, got {ef_list}")
    truth = np.asarray(truth)
    if truth.shape[0] != len(Q):
        raise ValueError(f"truth has {truth.shape[0]} rows for {len(Q)} queries")
    E, nq = len(ef_list), len(Q)
    rec, cost, hops, cross = (np.empty((E, nq)) for _ in range(4))
    secs = np.empty(E)
    for i, ef in enumerate(ef_list):
        t0 = time.perf_counter()
        found = []
        for j, q in enumerate(Q):
            r = search(q, ef=ef, k=k)
            found.append(r.ids)
            cost[i, j], hops[i, j] = r.n_dist, r.n_hops
            cross[i, j] = sum(r.n_dist_parts[1:]) if r.n_dist_parts else 0
        secs[i] = time.perf_counter() - t0
        rec[i] = recall_at_k(found, truth, k)
    return Sweep(ef=np.array(ef_list), recall=rec, cost=cost, hops=hops, seconds=secs,
                 cross=cross)


def cost_at_recall(recall, cost, target: float) -> float:
    """The cost needed to reach ``target`` recall on a sweep of operating points.

    ``recall`` and ``cost`` are the mean recall and mean cost of each point of a sweep. Points are
    put in order of cost, recall is made non-decreasing (a larger budget can always fall back to
    a smaller one's answer), and the cost is interpolated linearly between the two points that
    bracket ``target``. Returns ``nan`` when the sweep never reaches the target *or already
    exceeds it at its cheapest point* (then the cost at the target is only bounded, not measured).
    """
    recall = np.asarray(recall, dtype=np.float64)
    cost = np.asarray(cost, dtype=np.float64)
    if recall.shape != cost.shape or recall.ndim != 1 or recall.size == 0:
        raise ValueError(f"recall and cost must be 1-D of the same length, got {recall.shape} "
                         f"and {cost.shape}")
    if not 0.0 < target <= 1.0:
        raise ValueError(f"target recall must be in (0, 1], got {target!r}")
    order = np.argsort(cost, kind="stable")
    c, r = cost[order], np.maximum.accumulate(recall[order])
    hit = np.flatnonzero(r >= target)
    if hit.size == 0 or hit[0] == 0:
        return float("nan")
    i = hit[0]
    return float(c[i - 1] + (target - r[i - 1]) * (c[i] - c[i - 1]) / (r[i] - r[i - 1]))


def _pooled(sweeps, cols, what):
    rec = np.concatenate([s.recall[:, c] for s, c in zip(sweeps, cols)], axis=1).mean(1)
    val = np.concatenate([getattr(s, what)[:, c] for s, c in zip(sweeps, cols)], axis=1).mean(1)
    return rec, val


def cost_ratio(base, method, target: float, what: str = "cost", cols=None) -> float:
    """Baseline cost / method cost at ``target`` recall, pooling the queries of all seeds.

    ``base`` and ``method`` are lists of :class:`Sweep` (one per seed, same queries pairwise);
    ``cols`` optionally picks query columns per seed."""
    if len(base) != len(method) or not base:
        raise ValueError("base and method need the same, non-zero number of sweeps (one a seed)")
    cols = cols or [slice(None)] * len(base)
    cb = cost_at_recall(*_pooled(base, cols, what), target)
    cm = cost_at_recall(*_pooled(method, cols, what), target)
    return cb / cm
