import numpy as np
import pytest

from reprobook import rng
from reprobook.ann.cspg import CSPGIndex, _restrict, build_cspg
from reprobook.ann.datasets import gaussian_mixture
from reprobook.ann.exact import exact_knn, recall_at_k
from reprobook.ann.graph import build_graph, search_many, two_stage_search


@pytest.fixture(scope="module")
def data():
    X, Q = gaussian_mixture(500, 20, 8, 5, 1.5, rng(7, 0))
    return X, Q


def test_single_partition_is_exactly_the_two_stage_baseline(data):
    X, Q = data
    g = build_graph(X, R=10, n_candidates=30)
    idx = CSPGIndex.single(g)
    for ef in (10, 25):
        for q in Q:
            a, b = idx.search(q, ef, k=10), two_stage_search(g, q, ef, k=10)
            assert np.array_equal(a.ids, b.ids) and a.n_dist == b.n_dist


def test_partition_layout(data):
    X, _ = data
    idx = build_cspg(X, 3, 0.3, rng(7, 1), R=10, n_candidates=30)
    r = idx.n_routing
    assert r == 150 and idx.m == 3
    routing = idx.to_global[0][:r]
    for t in idx.to_global:
        assert np.array_equal(t[:r], routing)
    rest = np.concatenate([t[r:] for t in idx.to_global])
    assert np.array_equal(np.sort(np.concatenate([routing, rest])), np.arange(500))
    assert idx.union_reachable().all()


def test_cspg_with_unbounded_list_is_exact(data):
    X, Q = data
    idx = build_cspg(X, 2, 0.5, rng(7, 2), R=10, n_candidates=30)
    truth, _ = exact_knn(X, Q, 10)
    ids, _ = search_many(lambda q, k: idx.search(q, ef=2 * X.shape[0], k=k), Q, 10)
    assert recall_at_k(ids, truth).min() == 1.0
    for i in ids:                               # de-duplicated across partitions
        assert len(set(i.tolist())) == len(i)


def test_cspg_search_reaches_every_partition(data):
    X, Q = data
    idx = build_cspg(X, 2, 0.5, rng(7, 3), R=10, n_candidates=30)
    truth, _ = exact_knn(X, Q, 10)
    for copies in (True, False):
        ids, _ = search_many(lambda q, k: idx.search(q, ef=40, k=k, copies_in_results=copies),
                             Q, 10)
        assert recall_at_k(ids, truth).mean() >= 0.95
    r = idx.search(Q[0], ef=40, k=10, ef1=8)
    assert r.ids.size == 10


def test_restricted_global_knn_equals_in_partition_knn(data):
    X, _ = data
    knn, _ = exact_knn(X, None, 120, exclude_self=True)
    members = rng(7, 4).permutation(500)[:350]
    local, _ = exact_knn(X[members], None, 30, exclude_self=True)
    np.testing.assert_array_equal(_restrict(knn, members, 500, 30), local)


def test_build_with_global_knn_matches_build_without(data):
    X, Q = data
    knn, _ = exact_knn(X, None, 100, exclude_self=True, dtype=np.float32)
    a = build_cspg(X, 2, 0.5, rng(7, 5), R=10, n_candidates=30)
    b = build_cspg(X, 2, 0.5, rng(7, 5), R=10, n_candidates=30, knn=knn)
    for ga, gb in zip(a.graphs, b.graphs):
        assert all(np.array_equal(x, y) for x, y in zip(ga.adj, gb.adj))


def test_bad_arguments(data):
    X, Q = data
    with pytest.raises(ValueError, match="m"):
        build_cspg(X, 0, 0.5, rng(0))
    with pytest.raises(ValueError, match="routing_ratio"):
        build_cspg(X, 2, 1.5, rng(0))
    with pytest.raises(ValueError, match="no routing vector"):
        build_cspg(X, 2, 0.0, rng(0))
    with pytest.raises(TypeError, match="Generator"):
        build_cspg(X, 2, 0.5, 0)
    idx = CSPGIndex.single(build_graph(X[:50], R=5, n_candidates=10))
    with pytest.raises(ValueError, match="ef"):
        idx.search(Q[0], ef=0)
    with pytest.raises(ValueError, match="dimension"):
        idx.search(np.zeros(3), ef=5)
