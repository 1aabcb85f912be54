import numpy as np
import pytest

from reprobook import rng
from reprobook.ann.datasets import gaussian_mixture
from reprobook.ann.exact import exact_knn, recall_at_k
from reprobook.ann.graph import (ProximityGraph, beam_search, build_graph, greedy_descent, medoid,
                                 reachable, repair_reachability, robust_prune, search_many,
                                 two_stage_search)


@pytest.fixture(scope="module")
def data():
    X, Q = gaussian_mixture(600, 30, 8, 6, 1.5, rng(3, 0))
    return X, Q, build_graph(X, R=12, alpha=1.2, n_candidates=32)


def test_robust_prune_on_a_line_keeps_one_neighbour_per_side():
    X = np.arange(10, dtype=np.float32)[:, None]
    cand = np.array([[4, 6, 3, 7, 2, 8, -1]])          # node 5, padded with -1
    kept = robust_prune(X, [5], cand, alpha=1.0, R=5)[0]
    assert sorted(kept.tolist()) == [4, 6]             # everything farther is covered
    kept = robust_prune(X, [5], cand, alpha=1.0, R=1)[0]
    assert kept.size == 1
    # a large alpha keeps longer edges: 3 is no longer covered by 4 when 2*|4-3| > |5-3|
    assert 3 in robust_prune(X, [5], cand, alpha=2.5, R=5)[0].tolist()


def test_robust_prune_ignores_self_and_duplicates():
    X = np.random.default_rng(0).normal(size=(20, 3)).astype(np.float32)
    cand = np.array([[0, 1, 1, 2, 2, 3]])
    kept = robust_prune(X, [0], cand, 1.0, 10)[0]
    assert 0 not in kept.tolist() and len(set(kept.tolist())) == kept.size


def test_build_graph_structure(data):
    X, _, g = data
    assert g.entry == medoid(X)
    assert reachable(g.adj, [g.entry]).all()
    deg = g.degrees()
    assert deg.max() <= 12 + 2 and deg.mean() > 4      # R plus a few repair edges at most
    for v in range(0, g.n, 37):                          # lists are sorted nearest first
        d = ((X[g.adj[v]] - X[v]) ** 2).sum(1)
        assert np.all(np.diff(d) >= 0) and v not in g.adj[v].tolist()


def test_build_graph_is_permutation_equivariant():
    X, _ = gaussian_mixture(200, 1, 6, 3, 1.0, rng(5, 0))
    perm = rng(5, 1).permutation(200)
    g1 = build_graph(X, R=8, n_candidates=24)
    g2 = build_graph(X[perm], R=8, n_candidates=24)
    assert perm[g2.entry] == g1.entry
    for i in range(200):
        assert sorted(perm[g2.adj[i]].tolist()) == sorted(g1.adj[perm[i]].tolist())


def test_repair_reachability_connects_isolated_nodes():
    X = np.array([[0.0], [1.0], [2.0], [10.0]])
    adj = [np.array([1]), np.array([0]), np.array([1]), np.array([2])]
    added = repair_reachability(X, adj, [0])
    # nothing points at 2 or 3: 2 gets an edge from its nearest reachable node (1), then 3 from 2
    assert added == 2 and reachable(adj, [0]).all()
    assert 2 in adj[1].tolist() and 3 in adj[2].tolist()


def test_greedy_descent_counts_every_neighbour_on_the_path():
    X = np.array([[0.0], [1.0], [2.0], [3.0], [-1.0]], dtype=np.float32)
    adj = [np.array([1, 4]), np.array([0, 2]), np.array([1, 3]), np.array([2]), np.array([0])]
    g = ProximityGraph(X=X, adj=adj, entry=0)
    node, d, count = greedy_descent(g, np.array([2.9]))
    assert node == 3 and d == pytest.approx(0.01, abs=1e-6)
    assert count == 1 + 2 + 2 + 2 + 1           # start, then the lists of 0, 1, 2, 3


def test_beam_search_with_unbounded_list_is_exact(data):
    X, Q, g = data
    truth, _ = exact_knn(X, Q, 10)
    ids, counts = search_many(lambda q, k: beam_search(g, q, ef=g.n, k=k), Q, 10)
    assert recall_at_k(ids, truth).min() == 1.0
    assert counts.max() <= g.n                  # every node at most once


def test_beam_search_is_accurate_and_counts_grow_with_ef(data):
    X, Q, g = data
    truth, _ = exact_knn(X, Q, 10)
    small = search_many(lambda q, k: beam_search(g, q, ef=10, k=k), Q, 10)
    large = search_many(lambda q, k: beam_search(g, q, ef=40, k=k), Q, 10)
    assert recall_at_k(large[0], truth).mean() >= 0.97
    assert large[1].mean() > small[1].mean()
    r = beam_search(g, Q[0], ef=20, k=5)
    assert r.ids.size == 5 and np.all(np.diff(r.dists) >= 0)


def test_two_stage_count_is_greedy_plus_beam(data):
    _, Q, g = data
    for q in Q[:5]:
        node, _, c1 = greedy_descent(g, q)
        b = beam_search(g, q, ef=16, k=10, start=node)
        t = two_stage_search(g, q, ef=16, k=10)
        assert t.n_dist == c1 + b.n_dist and np.array_equal(t.ids, b.ids)


def test_search_bad_input(data):
    _, Q, g = data
    with pytest.raises(ValueError, match="ef"):
        beam_search(g, Q[0], ef=0)
    with pytest.raises(ValueError, match="dimension"):
        beam_search(g, np.zeros(3), ef=5)
    with pytest.raises(ValueError, match="R"):
        build_graph(np.zeros((10, 2)), R=0)
    with pytest.raises(ValueError, match="alpha"):
        build_graph(np.zeros((10, 2)), alpha=0.5)
    with pytest.raises(ValueError, match="entry"):
        ProximityGraph(X=np.zeros((2, 2)), adj=[np.array([1]), np.array([0])], entry=5)
