r"""Synthetic districting instances: a planar, grid-like graph of basic units (BUs).

A city of ``rows x cols`` BUs is built row by row. Row ``i`` spans ``[y_i, y_{i+1}]`` with random
row heights, and each row has its own jittered column boundaries, so the BUs are rectangles of
varying size laid out like bricks. Two BUs are adjacent when they share a side of positive length
(same row and consecutive, or consecutive rows with overlapping x-ranges), which keeps the graph
planar. About ``drop_frac`` of the edges are then removed, never a bridge, so the graph stays
connected.

Demand: BU ``b`` has a customer density :math:`\lambda_b = \bar\lambda \exp(\sigma g(c_b))`, where
:math:`g` is a smooth random field (a sum of Gaussian bumps, standardised) evaluated at the
centroid :math:`c_b`; a routing scenario places :math:`\mathrm{Poisson}(\lambda_b A_b)` customers
uniformly in the rectangle of area :math:`A_b`. The depot sits at a random point of the city's
boundary. Districts must hold between ``lo`` and ``hi`` BUs.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

__all__ = ["DistrictInstance", "make_instance", "bu_features", "N_BU_FEATURES"]


@dataclass(frozen=True, eq=False)
class DistrictInstance:
    """A districting instance. BUs are ``0..n-1``; the depot is a separate point.

    ``rects`` is ``(n, 4)``: ``x0, x1, y0, y1`` of each BU; ``edges`` is ``(E, 2)`` with ``u < v``,
    sorted; ``density`` is :math:`\\lambda_b` (customers per unit area).
    """

    rects: np.ndarray
    edges: np.ndarray
    density: np.ndarray
    depot: np.ndarray
    lo: int
    hi: int
    name: str = ""
    _adj: list = field(default=None, repr=False)

    @property
    def n(self) -> int:
        return int(self.rects.shape[0])

    @property
    def centroids(self) -> np.ndarray:
        return np.stack([(self.rects[:, 0] + self.rects[:, 1]) / 2,
                         (self.rects[:, 2] + self.rects[:, 3]) / 2], axis=1)

    @property
    def areas(self) -> np.ndarray:
        return (self.rects[:, 1] - self.rects[:, 0]) * (self.rects[:, 3] - self.rects[:, 2])

    @property
    def expected_customers(self) -> np.ndarray:
        return self.density * self.areas

    @property
    def adjacency(self) -> list[set[int]]:
        if self._adj is None:
            adj = [set() for _ in range(self.n)]
            for u, v in self.edges:
                adj[u].add(int(v))
                adj[v].add(int(u))
            object.__setattr__(self, "_adj", adj)
        return self._adj

    def graph(self):
        """The BU graph as a ``networkx.Graph`` (imported here: the rest does not need it)."""
        import networkx as nx

        g = nx.Graph()
        g.add_nodes_from(range(self.n))
        g.add_edges_from(map(tuple, self.edges.tolist()))
        return g

    def depot_distance(self) -> np.ndarray:
        return np.linalg.norm(self.centroids - self.depot, axis=1)


def _check_int(name, value, low):
    if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < low:
        raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")


def _is_connected(adj) -> bool:
    seen, stack = {0}, [0]
    while stack:
        for u in adj[stack.pop()]:
            if u not in seen:
                seen.add(u)
                stack.append(u)
    return len(seen) == len(adj)


def make_instance(rows: int, cols: int, rng: np.random.Generator, *, lo: int = 3, hi: int = 5,
                  mean_density: float = 3.0, density_sigma: float = 0.6,
                  drop_frac: float = 0.1, jitter: float = 0.3, name: str = "") -> DistrictInstance:
    """Generate one city (see the module docstring). BU sides are about 1 on average."""
    _check_int("rows", rows, 1)
    _check_int("cols", cols, 1)
    _check_int("lo", lo, 1)
    _check_int("hi", hi, 1)
    if lo > hi:
        raise ValueError(f"lo must be <= hi, got lo={lo}, hi={hi}")
    if rows * cols < lo:
        raise ValueError(f"rows * cols = {rows * cols} BUs cannot hold one district of lo={lo}")
    if not 0 <= drop_frac < 1:
        raise ValueError(f"drop_frac must be in [0, 1), got {drop_frac}")
    if not 0 <= jitter < 1:
        raise ValueError(f"jitter must be in [0, 1), got {jitter}")
    if mean_density <= 0:
        raise ValueError(f"mean_density must be > 0, got {mean_density}")
    heights = 1 + jitter * rng.uniform(-1, 1, rows)
    ys = np.concatenate([[0.0], np.cumsum(heights)])
    width = float(cols)
    rects, row_of = [], []
    for i in range(rows):
        w = 1 + jitter * rng.uniform(-1, 1, cols)
        xs = np.concatenate([[0.0], np.cumsum(w / w.sum() * width)])
        for j in range(cols):
            rects.append((xs[j], xs[j + 1], ys[i], ys[i + 1]))
            row_of.append(i)
    rects = np.array(rects)
    n = len(rects)
    adj = [set() for _ in range(n)]
    for a in range(n):
        for b in range(a + 1, n):
            touching = row_of[a] == row_of[b] and b == a + 1
            if row_of[b] == row_of[a] + 1:
                touching = min(rects[a, 1], rects[b, 1]) - max(rects[a, 0], rects[b, 0]) > 0.05
            if touching:
                adj[a].add(b)
                adj[b].add(a)
    n_drop = int(round(drop_frac * sum(map(len, adj)) / 2))
    candidates = sorted((a, b) for a in range(n) for b in adj[a] if a < b)
    rng.shuffle(candidates)
    for a, b in candidates:
        if n_drop == 0:
            break
        if len(adj[a]) <= 2 or len(adj[b]) <= 2:
            continue  # keep every BU reasonably connected
        adj[a].discard(b)
        adj[b].discard(a)
        if _is_connected(adj):
            n_drop -= 1
        else:
            adj[a].add(b)
            adj[b].add(a)
    edges = np.array(sorted((a, b) for a in range(n) for b in adj[a] if a < b), dtype=np.int64)
    edges = edges.reshape(-1, 2)
    # smooth log-density field: standardised sum of Gaussian bumps
    cent = np.stack([(rects[:, 0] + rects[:, 1]) / 2, (rects[:, 2] + rects[:, 3]) / 2], 1)
    k = 4
    mus = rng.uniform([0, 0], [width, ys[-1]], size=(k, 2))
    amp = rng.normal(size=k)
    scale = 0.35 * max(width, ys[-1]) + 0.5
    field_ = (amp * np.exp(-((cent[:, None, :] - mus) ** 2).sum(-1) / (2 * scale**2))).sum(1)
    field_ = (field_ - field_.mean()) / (field_.std() + 1e-12) if n > 1 else field_ * 0
    density = mean_density * np.exp(density_sigma * field_ - density_sigma**2 / 2)
    # depot: a random point on the boundary of the bounding box
    side, t = rng.integers(4), rng.uniform()
    depot = {0: (t * width, -0.5), 1: (t * width, ys[-1] + 0.5),
             2: (-0.5, t * ys[-1]), 3: (width + 0.5, t * ys[-1])}[int(side)]
    return DistrictInstance(rects=rects, edges=edges, density=density, depot=np.array(depot),
                            lo=lo, hi=hi, name=name)


N_BU_FEATURES = 7


def bu_features(inst: DistrictInstance) -> np.ndarray:
    """Scale-free BU features ``(n, 7)``: position relative to the depot (2), distance to the depot,
    area, density, expected customers (log), degree. Lengths are in units of the mean BU side so a
    model trained on small cities applies to larger ones."""
    unit = np.sqrt(inst.areas.mean())
    rel = (inst.centroids - inst.depot) / unit
    dist = np.linalg.norm(rel, axis=1)
    deg = np.array([len(a) for a in inst.adjacency], dtype=float)
    return np.stack([rel[:, 0] / 5, rel[:, 1] / 5, dist / 5, inst.areas / unit**2,
                     inst.density / inst.density.mean(), np.log(inst.expected_customers + 1e-9),
                     deg / 4], axis=1)
