r"""The true cost of a district: the expected length of a depot-to-depot tour of its customers.

.. math:: c(D) = \mathbb E_\xi\big[\mathrm{TSP}(\{\text{depot}\} \cup \xi_D)\big],

where a scenario :math:`\xi` draws :math:`\mathrm{Poisson}(\lambda_b A_b)` customers uniformly in
every BU :math:`b`, and :math:`\xi_D` keeps those in the district's BUs. The expectation is a mean
over ``S`` scenarios and each TSP is solved by nearest neighbour followed by 2-opt (best
improvement, vectorised in numpy). A set of scenarios is drawn once per city and shared by every
method (common random numbers), so cost differences between methods are paired.
"""
from __future__ import annotations

import itertools

import numpy as np

from .district_instances import DistrictInstance

__all__ = ["tour_length", "nearest_neighbour_tour", "two_opt", "tsp_heuristic", "tsp_brute_force",
           "Scenarios", "sample_scenarios", "DistrictCost"]


def _as_points(points, name="points"):
    p = np.asarray(points, dtype=float)
    if p.ndim != 2 or p.shape[1] != 2:
        raise ValueError(f"{name} must have shape (m, 2), got {p.shape}")
    return p


def tour_length(points, tour) -> float:
    """Length of the closed tour visiting ``points[tour]`` in order."""
    p = _as_points(points)
    t = np.asarray(tour)
    if len(t) < 2:
        return 0.0
    q = p[t]
    return float(np.linalg.norm(q - np.roll(q, -1, axis=0), axis=1).sum())


def nearest_neighbour_tour(points, start: int = 0) -> np.ndarray:
    """Greedy tour from ``start``: always go to the closest unvisited point."""
    p = _as_points(points)
    m = len(p)
    if not 0 <= start < max(m, 1):
        raise ValueError(f"start must index a point, got {start} for {m} points")
    if m == 0:
        return np.zeros(0, dtype=np.int64)
    d = np.linalg.norm(p[:, None] - p[None], axis=-1)
    tour = [start]
    free = np.ones(m, dtype=bool)
    free[start] = False
    for _ in range(m - 1):
        row = np.where(free, d[tour[-1]], np.inf)
        j = int(np.argmin(row))
        tour.append(j)
        free[j] = False
    return np.array(tour, dtype=np.int64)


def two_opt(points, tour, max_iter: int = 1000) -> np.ndarray:
    """Best-improvement 2-opt: replace edges (a,b),(c,d) by (a,c),(b,d) while that shortens the
    tour. The tour is closed; position 0 stays first. Never lengthens the tour."""
    p = _as_points(points)
    t = np.array(tour, dtype=np.int64)
    m = len(t)
    if m < 4:
        return t
    d = np.linalg.norm(p[:, None] - p[None], axis=-1)
    i_idx, j_idx = np.triu_indices(m, k=2)
    keep = ~((i_idx == 0) & (j_idx == m - 1))   # those two tour edges are adjacent
    i_idx, j_idx = i_idx[keep], j_idx[keep]
    for _ in range(max_iter):
        nxt = np.roll(t, -1)
        a, b, c, e = t[i_idx], nxt[i_idx], t[j_idx], nxt[j_idx]
        delta = d[a, c] + d[b, e] - d[a, b] - d[c, e]
        k = int(np.argmin(delta))
        if delta[k] >= -1e-10:
            break
        i, j = i_idx[k], j_idx[k]
        t[i + 1:j + 1] = t[i + 1:j + 1][::-1].copy()
    return t


def tsp_heuristic(points) -> tuple[np.ndarray, float]:
    """Nearest neighbour from point 0 (the depot) then 2-opt; returns ``(tour, length)``."""
    p = _as_points(points)
    if len(p) <= 1:
        return np.arange(len(p)), 0.0
    t = two_opt(p, nearest_neighbour_tour(p, 0))
    return t, tour_length(p, t)


def tsp_brute_force(points) -> tuple[np.ndarray, float]:
    """Exact TSP by enumerating the orders of points ``1..m-1`` (only for ``m <= 9``)."""
    p = _as_points(points)
    m = len(p)
    if m > 9:
        raise ValueError(f"points: brute force is limited to 9 points, got {m}")
    if m <= 3:
        t = np.arange(m)
        return t, tour_length(p, t)
    best, best_t = np.inf, None
    for perm in itertools.permutations(range(1, m)):
        if perm[0] > perm[-1]:
            continue  # each cycle once (the reverse is the same tour)
        t = np.array((0,) + perm)
        length = tour_length(p, t)
        if length < best:
            best, best_t = length, t
    return best_t, best


class Scenarios:
    """``S`` customer scenarios of one city: ``points[s][b]`` is an ``(k, 2)`` array."""

    def __init__(self, inst: DistrictInstance, points: list[list[np.ndarray]]):
        self.inst = inst
        self.points = points

    def __len__(self):
        return len(self.points)

    def subset(self, n: int) -> "Scenarios":
        """The first ``n`` scenarios (a cheaper, nested estimate)."""
        if not 1 <= n <= len(self):
            raise ValueError(f"n must be in [1, {len(self)}], got {n}")
        return Scenarios(self.inst, self.points[:n])


def sample_scenarios(inst: DistrictInstance, n_scenarios: int, rng: np.random.Generator
                     ) -> Scenarios:
    """Draw ``n_scenarios`` Poisson customer scenarios for ``inst``."""
    if not isinstance(n_scenarios, (int, np.integer)) or n_scenarios < 1:
        raise ValueError(f"n_scenarios must be a positive integer, got {n_scenarios!r}")
    out = []
    for _ in range(n_scenarios):
        counts = rng.poisson(inst.expected_customers)
        pts = []
        for b, k in enumerate(counts):
            x0, x1, y0, y1 = inst.rects[b]
            pts.append(np.stack([rng.uniform(x0, x1, k), rng.uniform(y0, y1, k)], axis=1))
        out.append(pts)
    return Scenarios(inst, out)


class DistrictCost:
    """Mean tour length of a district over a fixed scenario set, cached by district."""

    def __init__(self, scenarios: Scenarios):
        self.scenarios = scenarios
        self.cache: dict[frozenset, float] = {}

    def __call__(self, district) -> float:
        key = frozenset(int(b) for b in district)
        if not key:
            raise ValueError("district must contain at least one BU")
        if key not in self.cache:
            n = self.scenarios.inst.n
            if min(key) < 0 or max(key) >= n:
                raise ValueError(f"district has BUs outside 0..{n - 1}: {sorted(key)}")
            depot = self.scenarios.inst.depot[None]
            order = sorted(key)
            total = 0.0
            for pts in self.scenarios.points:
                p = np.concatenate([depot] + [pts[b] for b in order])
                total += tsp_heuristic(p)[1]
            self.cache[key] = total / len(self.scenarios)
        return self.cache[key]

    def partition(self, partition) -> float:
        """Total cost of a districting (a list of districts)."""
        return float(sum(self(d) for d in partition))
