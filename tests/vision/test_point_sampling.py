"""Space-filling-curve sampling and hash search against brute force and the baselines."""
import numpy as np
import pytest

from reprobook.vision.point_sampling import (adjacent_cells_brute, coverage_radius, curve_codes,
                                             farthest_point_sample, hash_query, hilbert_encode,
                                             knn_query, linearization_sample, morton_encode, cell_for_ratio,
                                             random_sample, voxel_coords)


def _grid(bits):
    return np.stack(np.meshgrid(*[np.arange(2 ** bits)] * 3, indexing="ij"), -1).reshape(-1, 3)


def _cloud(n=2000, seed=0):
    return np.random.default_rng(seed).random((n, 3))


@pytest.mark.parametrize("bits", [1, 2, 3])
def test_hilbert_is_a_bijection_whose_steps_are_face_adjacent(bits):
    cells = _grid(bits)
    h = hilbert_encode(cells, bits)
    assert np.array_equal(np.sort(h), np.arange(8 ** bits))
    steps = np.abs(np.diff(cells[np.argsort(h)], axis=0)).sum(1)
    assert (steps == 1).all()


def test_morton_matches_a_bit_by_bit_interleave():
    rng = np.random.default_rng(1)
    cells = rng.integers(0, 2 ** 21, size=(200, 3))
    want = []
    for x, y, z in cells:
        code = 0
        for b in range(20, -1, -1):
            code = (code << 3) | (((x >> b) & 1) << 2) | (((y >> b) & 1) << 1) | ((z >> b) & 1)
        want.append(code)
    assert np.array_equal(morton_encode(cells), np.array(want))
    # Morton steps are not all adjacent: it jumps between octants
    g = _grid(2)
    steps = np.abs(np.diff(g[np.argsort(morton_encode(g))], axis=0)).sum(1)
    assert steps.max() > 1


@pytest.mark.parametrize("curve", ["morton", "hilbert"])
def test_hash_query_sets_equal_brute_force(curve):
    p = _cloud(2000)
    q = p[::10] + 0.01
    indptr, ind = hash_query(p, q, 0.1, None, curve)
    brute = adjacent_cells_brute(p, q, 0.1)
    assert len(indptr) == len(q) + 1
    for i in range(len(q)):
        assert np.array_equal(ind[indptr[i]:indptr[i + 1]], brute[i])


def test_hash_query_contains_every_point_within_one_cell():
    p = _cloud(3000, 2)
    q = p[:300]
    v = 0.08
    indptr, ind = hash_query(p, q, v, None)
    d = np.sqrt(((q[:, None] - p[None]) ** 2).sum(-1))
    for i in range(len(q)):
        assert set(np.flatnonzero(d[i] <= v)) <= set(ind[indptr[i]:indptr[i + 1]])


def test_hash_query_top_k_is_exact_knn_when_the_k_nearest_lie_within_a_cell():
    p = _cloud(4000, 3)
    q = p[:200]
    idx, cnt = hash_query(p, q, 0.15, 8)
    kn = knn_query(p, q, 8)
    d = np.sqrt(((p[kn] - q[:, None]) ** 2).sum(-1))
    ok = d[:, -1] <= 0.15
    assert ok.mean() > 0.9
    assert np.array_equal(np.sort(idx[ok], 1), np.sort(kn[ok], 1))
    assert (cnt == 8).all()


def test_hash_query_pads_with_the_nearest_and_marks_empty():
    p = np.array([[0.0, 0, 0], [0.05, 0, 0], [5.0, 5, 5]])
    q = np.array([[0.01, 0, 0], [2.5, 2.5, 2.5]])
    idx, cnt = hash_query(p, q, 0.1, 4)
    assert cnt.tolist() == [2, 0]
    assert idx[0].tolist() == [0, 1, 0, 0]
    assert (idx[1] == -1).all()


@pytest.mark.parametrize("curve", ["morton", "hilbert"])
def test_linearization_sample_one_per_cell_nearest_centre_and_coverage(curve):
    p = _cloud(3000, 4)
    v = 0.1
    s = linearization_sample(p, v, curve)
    cells = voxel_coords(p, v)
    keys = {tuple(c) for c in cells}
    assert len(s) == len(keys) == len({tuple(c) for c in cells[s]})
    centre = p.min(0) + (cells + 0.5) * v
    d = ((p - centre) ** 2).sum(1)
    for i in s[:50]:
        same = (cells == cells[i]).all(1)
        assert d[i] == d[same].min()
    assert coverage_radius(p, s) <= np.sqrt(3) * v
    # in curve order
    assert (np.diff(curve_codes(cells[s], curve)) > 0).all()


def test_fps_is_greedy_max_min_and_covers_better_than_random():
    p = _cloud(1500, 5)
    f = farthest_point_sample(p, 60)
    assert len(set(f.tolist())) == 60
    chosen = p[f[:10]]
    d = np.sqrt(((p[:, None] - chosen[None]) ** 2).sum(-1)).min(1)
    assert f[10] == np.argmax(d)
    r = random_sample(p, 60, np.random.default_rng(0))
    assert coverage_radius(p, f) < coverage_radius(p, r)


def test_bad_inputs_are_named():
    with pytest.raises(ValueError, match="shape"):
        linearization_sample(np.zeros((5, 2)), 0.1)
    with pytest.raises(ValueError, match="size"):
        linearization_sample(_cloud(10), 0.0)
    with pytest.raises(ValueError, match="unknown curve"):
        linearization_sample(_cloud(10), 0.1, "peano")
    with pytest.raises(ValueError, match="k must"):
        hash_query(_cloud(10), _cloud(3), 0.1, 0)
    with pytest.raises(ValueError, match="m must"):
        farthest_point_sample(_cloud(10), 11)
    with pytest.raises(ValueError, match="non-finite"):
        knn_query(np.full((3, 3), np.nan), _cloud(2), 1)


def test_cell_for_ratio_hits_the_sample_share():
    p = _cloud(4000, 6)
    v = cell_for_ratio(p, 0.25)
    m = len(linearization_sample(p, v))
    assert 0.2 * len(p) <= m <= 0.25 * len(p)
    with pytest.raises(ValueError, match="ratio"):
        cell_for_ratio(p, 1.5)
