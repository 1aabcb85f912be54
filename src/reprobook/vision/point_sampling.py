r"""Down-sampling and neighbour search on point clouds: space-filling curves against FPS and kNN.

LinNet (Deng et al., NeurIPS 2024) replaces the two quadratic steps of a point-based network,
farthest-point sampling and exact neighbour search, with steps built on a **space-filling curve**.

**Voxel keys.** A cloud :math:`P \subset \mathbb R^3` and a cell size :math:`v` give every point the
integer cell :math:`c(p) = \lfloor (p - p_{\min}) / v \rfloor \in \mathbb Z_{\ge 0}^3`. A curve code
:math:`h(c)` maps cells to one integer such that points of the same cell share one code:

* **Morton (Z-order)**: the bits of the three coordinates interleaved,
  :math:`h = \sum_b (x_b 2^{3b+2} + y_b 2^{3b+1} + z_b 2^{3b})`;
* **Hilbert**: Skilling's transpose algorithm (AIP Conf. Proc. 707, 2004): consecutive codes are
  face-adjacent cells, so a sorted code list keeps spatial neighbours closer in memory.

Sorting the points by code (:math:`O(N \log N)`, in practice linear-time on a GPU radix sort) makes
every occupied cell one contiguous *bucket*; the sorted unique codes are the hash table.

**Linearization sampling (LS).** Keep, in each occupied cell, the point closest to the cell's
centre: one sample per occupied cell, so every point lies within :math:`\sqrt 3\, v` of a sample.

**Hash query.** The neighbours of a query :math:`q` are the points of the :math:`3^3` cells around
:math:`c(q)`, each found by a binary search of its code in the sorted code list, then truncated to
the :math:`k` nearest. The candidate set contains every point within distance :math:`v` of
:math:`q` (a ball of radius :math:`v` never leaves the 27 cells), so the truncation is exact kNN
whenever the :math:`k` nearest lie within :math:`v`.

**Baselines.** Farthest-point sampling (greedy :math:`\max\min` distance, :math:`O(N M)` for
:math:`M` samples, so :math:`O(N^2)` at a fixed sampling ratio) and exact kNN with a k-d tree
(``scipy.spatial.cKDTree``, :math:`O(N \log N)` build and queries).

Everything here is NumPy on one thread and returns index arrays; the networks in
:mod:`reprobook.models.point_set_abstraction` only gather with them.
"""
from __future__ import annotations

import numpy as np
from scipy.spatial import cKDTree

__all__ = ["voxel_coords", "morton_encode", "hilbert_encode", "curve_codes", "linearization_sample",
           "farthest_point_sample", "random_sample", "hash_query", "adjacent_cells_brute",
           "knn_query", "coverage_radius", "cell_for_ratio", "CURVES"]

CURVES = ("morton", "hilbert")
_MAX_BITS = 21                              # 3 * 21 = 63 bits fit an int64


def _points(p, name="points") -> np.ndarray:
    p = np.asarray(p, dtype=np.float64)
    if p.ndim != 2 or p.shape[1] != 3:
        raise ValueError(f"{name} must have shape (N, 3), got {p.shape}")
    if len(p) == 0:
        raise ValueError(f"{name} is empty")
    if not np.isfinite(p).all():
        raise ValueError(f"{name} holds non-finite coordinates")
    return p


def _size(v, name="voxel") -> float:
    v = float(v)
    if not v > 0 or not np.isfinite(v):
        raise ValueError(f"{name} size must be a positive finite number, got {v!r}")
    return v


def voxel_coords(points, voxel: float, origin=None) -> np.ndarray:
    """Integer cell of each point, :math:`\\lfloor (p - o)/v \\rfloor` (``origin`` defaults to the
    cloud's minimum corner). Returns an int64 array (N, 3) of non-negative coordinates."""
    p = _points(points)
    v = _size(voxel)
    o = p.min(0) if origin is None else np.asarray(origin, dtype=np.float64)
    c = np.floor((p - o) / v).astype(np.int64)
    if c.min() < 0:
        raise ValueError("origin lies above some points: cell coordinates would be negative")
    if c.max() >= 1 << _MAX_BITS:
        raise ValueError(f"the cloud spans more than 2^{_MAX_BITS} cells along an axis: voxel {v} "
                         "is too small for its extent")
    return c


def _spread3(x: np.ndarray) -> np.ndarray:
    """Insert two zero bits between the 21 low bits of ``x`` (the Morton bit spread)."""
    x = x.astype(np.uint64) & np.uint64(0x1FFFFF)
    x = (x | (x << np.uint64(32))) & np.uint64(0x1F00000000FFFF)
    x = (x | (x << np.uint64(16))) & np.uint64(0x1F0000FF0000FF)
    x = (x | (x << np.uint64(8))) & np.uint64(0x100F00F00F00F00F)
    x = (x | (x << np.uint64(4))) & np.uint64(0x10C30C30C30C30C3)
    x = (x | (x << np.uint64(2))) & np.uint64(0x1249249249249249)
    return x


def _check_cells(cells) -> np.ndarray:
    c = np.asarray(cells)
    if c.ndim != 2 or c.shape[1] != 3 or not np.issubdtype(c.dtype, np.integer):
        raise ValueError(f"cells must be an integer array of shape (N, 3), got {c.dtype} {c.shape}")
    if len(c) and (c.min() < 0 or c.max() >= 1 << _MAX_BITS):
        raise ValueError(f"cell coordinates must lie in [0, 2^{_MAX_BITS})")
    return c.astype(np.int64)


def morton_encode(cells) -> np.ndarray:
    """Z-order code of integer cells (N, 3): x's bits highest, then y's, then z's, interleaved."""
    c = _check_cells(cells)
    code = (_spread3(c[:, 0]) << np.uint64(2)) | (_spread3(c[:, 1]) << np.uint64(1)) | _spread3(c[:, 2])
    return code.astype(np.int64)


def hilbert_encode(cells, bits: int | None = None) -> np.ndarray:
    """Hilbert code of integer cells (N, 3) on a :math:`2^{bits}` grid (Skilling's algorithm:
    axes to transpose form, then the transpose's bits interleaved). ``bits`` defaults to the fewest
    that hold the largest coordinate."""
    c = _check_cells(cells)
    need = max(1, int(c.max()).bit_length()) if len(c) else 1
    bits = need if bits is None else int(bits)
    if not need <= bits <= _MAX_BITS:
        raise ValueError(f"bits must lie in [{need}, {_MAX_BITS}] for these cells, got {bits}")
    x = [c[:, i].copy() for i in range(3)]
    q = 1 << (bits - 1)
    while q > 1:                                   # inverse undo of the excess work
        p = q - 1
        for i in range(3):
            hi = (x[i] & q) != 0
            x[0] = np.where(hi, x[0] ^ p, x[0])
            t = np.where(hi, 0, (x[0] ^ x[i]) & p)
            x[0] ^= t
            x[i] ^= t
        q >>= 1
    for i in (1, 2):                               # Gray encode
        x[i] ^= x[i - 1]
    t = np.zeros_like(x[0])
    q = 1 << (bits - 1)
    while q > 1:
        t = np.where((x[2] & q) != 0, t ^ (q - 1), t)
        q >>= 1
    for i in range(3):
        x[i] ^= t
    code = np.zeros(len(c), dtype=np.int64)
    for b in range(bits - 1, -1, -1):              # interleave: x[0]'s bit highest at each level
        for i in range(3):
            code = (code << 1) | ((x[i] >> b) & 1)
    return code


def curve_codes(cells, curve: str = "hilbert", bits: int | None = None) -> np.ndarray:
    """Codes of integer cells on the named curve (``"morton"`` or ``"hilbert"``). A Hilbert code
    depends on the grid's order ``bits``: codes that are compared must share it."""
    if curve == "morton":
        return morton_encode(cells)
    if curve == "hilbert":
        return hilbert_encode(cells, bits)
    raise ValueError(f"unknown curve {curve!r}; choose one of {CURVES}")


def _buckets(points, voxel, curve, origin=None, bits=None):
    """Sort order, sorted codes, unique codes with bucket starts and counts, and the cells."""
    cells = voxel_coords(points, voxel, origin)
    codes = curve_codes(cells, curve, bits)
    order = np.argsort(codes, kind="stable")
    sc = codes[order]
    uniq, start, count = np.unique(sc, return_index=True, return_counts=True)
    return order, sc, uniq, start, count, cells


def linearization_sample(points, voxel: float, curve: str = "hilbert") -> np.ndarray:
    """LS: indices of one point per occupied cell of size ``voxel`` (the one nearest the cell's
    centre; ties to the lower index), in curve order."""
    p = _points(points)
    v = _size(voxel)
    o = p.min(0)
    order, sc, uniq, start, count, cells = _buckets(p, v, curve, o)
    centre = o + (cells[order] + 0.5) * v
    d = ((p[order] - centre) ** 2).sum(1)
    # sort each bucket by distance (lexsort: last key primary), take the bucket's first element
    inner = np.lexsort((order, d, sc))
    return order[inner[start]]


def farthest_point_sample(points, m: int, start: int = 0) -> np.ndarray:
    """FPS: ``m`` indices chosen greedily, each the point farthest from those already chosen
    (the first is ``start``). :math:`O(N m)` time."""
    p = _points(points)
    n = len(p)
    if not 1 <= int(m) <= n:
        raise ValueError(f"m must lie in [1, {n}], got {m}")
    if not 0 <= int(start) < n:
        raise ValueError(f"start must index a point, got {start}")
    m = int(m)
    idx = np.empty(m, dtype=np.int64)
    idx[0] = start
    dist = ((p - p[start]) ** 2).sum(1)
    for i in range(1, m):
        j = int(np.argmax(dist))
        idx[i] = j
        np.minimum(dist, ((p - p[j]) ** 2).sum(1), out=dist)
    return idx


def random_sample(points, m: int, rng: np.random.Generator) -> np.ndarray:
    """``m`` indices drawn uniformly without replacement (a broken sampler, for controls)."""
    n = len(_points(points))
    if not 1 <= int(m) <= n:
        raise ValueError(f"m must lie in [1, {n}], got {m}")
    return np.sort(rng.choice(n, size=int(m), replace=False))


_OFFSETS = np.stack(np.meshgrid([-1, 0, 1], [-1, 0, 1], [-1, 0, 1], indexing="ij"), -1).reshape(-1, 3)


def hash_query(points, queries, cell: float, k: int | None, curve: str = "hilbert"):
    """Neighbours of each query among ``points``: the points of the 27 cells (size ``cell``)
    around the query's cell, looked up by binary search of their curve codes.

    ``k=None`` returns the full candidate sets as CSR ``(indptr, indices)`` with indices sorted
    within each query. Otherwise returns ``(idx, count)``: ``idx`` (M, k) holds the ``k`` nearest
    candidates by distance (ties to the lower index), padded with the query's nearest candidate
    where fewer than ``k`` exist, or with -1 where none exist; ``count`` (M,) is the number of real
    neighbours (at most ``k``).
    """
    p = _points(points)
    q = _points(queries, "queries")
    c = _size(cell, "cell")
    if k is not None and (isinstance(k, bool) or int(k) != k or k < 1):
        raise ValueError(f"k must be a positive int or None, got {k!r}")
    o = np.minimum(p.min(0), q.min(0)) - 2 * c  # a margin: the -1 neighbour cell stays >= 0 (rounding)
    qc = voxel_coords(q, c, o)
    top = max(int(voxel_coords(p, c, o).max()), int(qc.max()) + 1)
    bits = max(1, top.bit_length())             # one grid order for the table and the lookups
    if bits > _MAX_BITS:
        raise ValueError(f"the cloud spans more than 2^{_MAX_BITS} cells: cell {c} is too small")
    order, sc, uniq, start, count, _ = _buckets(p, c, curve, o, bits)
    nb = (qc[:, None, :] + _OFFSETS[None]).reshape(-1, 3)
    codes = curve_codes(nb, curve, bits)
    pos = np.searchsorted(uniq, codes)
    pos_c = np.minimum(pos, len(uniq) - 1)
    hit = uniq[pos_c] == codes
    s = np.where(hit, start[pos_c], 0)
    n = np.where(hit, count[pos_c], 0)
    qid = np.repeat(np.arange(len(q)), 27)
    # expand the (query, cell) buckets into one flat list of candidates
    total = int(n.sum())
    first = np.cumsum(n) - n
    flat = np.repeat(s - first, n) + np.arange(total)
    cand = order[flat]
    cq = np.repeat(qid, n)
    per_q = np.bincount(cq, minlength=len(q))
    if k is None:
        srt = np.lexsort((cand, cq))
        return np.concatenate([[0], np.cumsum(per_q)]), cand[srt]
    k = int(k)
    d = ((p[cand] - q[cq]) ** 2).sum(1)
    srt = np.lexsort((cand, d, cq))
    cand, cq = cand[srt], cq[srt]
    qstart = np.cumsum(per_q) - per_q
    rank = np.arange(total) - qstart[cq]
    keep = rank < k
    idx = np.full((len(q), k), -1, dtype=np.int64)
    idx[cq[keep], rank[keep]] = cand[keep]
    cnt = np.minimum(per_q, k)
    nearest = np.where(cnt > 0, idx[:, 0], -1)
    idx = np.where(np.arange(k)[None] < cnt[:, None], idx, nearest[:, None])
    return idx, cnt


def adjacent_cells_brute(points, queries, cell: float):
    """Reference for :func:`hash_query` with ``k=None``: for each query, every point whose cell
    (same origin) differs from the query's by at most one along each axis, by brute force
    (:math:`O(NM)`). Returns a list of sorted index arrays."""
    p = _points(points)
    q = _points(queries, "queries")
    c = _size(cell, "cell")
    o = np.minimum(p.min(0), q.min(0)) - 2 * c
    pc, qc = voxel_coords(p, c, o), voxel_coords(q, c, o)
    return [np.flatnonzero(np.abs(pc - qq).max(1) <= 1) for qq in qc]


def knn_query(points, queries, k: int, tree: cKDTree | None = None) -> np.ndarray:
    """Exact k nearest neighbours (M, k) of each query among ``points`` with a k-d tree
    (``scipy.spatial.cKDTree``, one worker)."""
    p = _points(points)
    q = _points(queries, "queries")
    if isinstance(k, bool) or int(k) != k or not 1 <= k <= len(p):
        raise ValueError(f"k must be an int in [1, {len(p)}], got {k!r}")
    tree = cKDTree(p) if tree is None else tree
    _, idx = tree.query(q, k=int(k), workers=1)
    return np.asarray(idx, dtype=np.int64).reshape(len(q), int(k))


def coverage_radius(points, sample_idx) -> float:
    """:math:`\\max_p \\min_s \\lVert p - s \\rVert`: how far the worst-covered point lies from
    the nearest sample."""
    p = _points(points)
    s = np.asarray(sample_idx, dtype=np.int64)
    if s.ndim != 1 or len(s) == 0 or s.min() < 0 or s.max() >= len(p):
        raise ValueError("sample_idx must be a non-empty 1-D array of point indices")
    d, _ = cKDTree(p[s]).query(p, k=1, workers=1)
    return float(d.max())


def cell_for_ratio(points, ratio: float, curve: str = "morton", iters: int = 16) -> float:
    """The cell size at which :func:`linearization_sample` keeps about ``ratio`` of the points
    (bisection on the log of the cell size; the sample count falls as the cell grows)."""
    p = _points(points)
    if not 0 < ratio < 1:
        raise ValueError(f"ratio must lie in (0, 1), got {ratio!r}")
    target = ratio * len(p)
    ext = float((p.max(0) - p.min(0)).max()) or 1.0
    lo, hi = np.log(ext * 1e-4), np.log(ext)
    for _ in range(int(iters)):
        mid = 0.5 * (lo + hi)
        if len(linearization_sample(p, float(np.exp(mid)), curve)) > target:
            lo = mid
        else:
            hi = mid
    return float(np.exp(hi))
