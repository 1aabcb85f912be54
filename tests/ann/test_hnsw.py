import numpy as np
import pytest

from reprobook import rng
from reprobook.ann.datasets import gaussian_mixture
from reprobook.ann.exact import exact_knn, recall_at_k
from reprobook.ann.graph import beam_search
from reprobook.ann.hnsw import hnswlib_layer0


def test_layer0_links_are_a_navigable_graph():
    X, Q = gaussian_mixture(800, 20, 8, 10, 1.0, rng(0, 1))
    g = hnswlib_layer0(X, M=6, ef_construction=64, seed=3)
    assert g.n == 800 and g.degrees().max() <= 12 and g.degrees().min() >= 1
    assert all(not np.any(a == i) for i, a in enumerate(g.adj))       # no self-loops
    truth, _ = exact_knn(X, Q, 5)
    found = [beam_search(g, q, 64, 5).ids for q in Q]
    assert recall_at_k(found, truth).mean() > 0.95
    # deterministic given the seed (single-threaded insertion)
    h = hnswlib_layer0(X, M=6, ef_construction=64, seed=3)
    assert all(np.array_equal(a, b) for a, b in zip(g.adj, h.adj))


def test_layer0_bad_input():
    with pytest.raises(ValueError, match="M"):
        hnswlib_layer0(np.zeros((10, 2)), M=1)
    with pytest.raises(ValueError, match="2-D"):
        hnswlib_layer0(np.zeros(10))


def test_cspg_with_hnswlib_partitions_is_exact_with_an_unbounded_list():
    from reprobook.ann.cspg import build_cspg
    X, Q = gaussian_mixture(600, 5, 8, 10, 1.0, rng(1, 1))
    idx = build_cspg(X, 2, 0.3, rng(1, 2),
                     graph_builder=lambda Xp, p: hnswlib_layer0(Xp, M=6, ef_construction=32, seed=p))
    assert [g.n for g in idx.graphs] == [len(t) for t in idx.to_global]
    truth, _ = exact_knn(X, Q, 5)
    found = [idx.search(q, 2 * len(X), 5).ids for q in Q]
    assert recall_at_k(found, truth).min() == 1.0
    with pytest.raises(ValueError, match="graph_builder"):
        build_cspg(X, 2, 0.3, rng(1, 2), graph_builder=lambda Xp, p: hnswlib_layer0(Xp[:-1], M=4))


def test_low_dim_clusters_have_low_intrinsic_dimension():
    from reprobook.ann.datasets import low_dim_clusters
    X, Q = low_dim_clusters(3000, 10, 32, n_clusters=5, intrinsic=3, noise=0.0, rng=rng(0, 0))
    assert X.shape == (3000, 32) and Q.shape == (10, 32) and X.dtype == np.float32
    # within one cluster (points near the first), 3 principal directions carry almost all variance
    near = X[np.argsort(((X - X[0]) ** 2).sum(1))[:200]]
    sv = np.linalg.svd(near - near.mean(0), compute_uv=False) ** 2
    assert sv[:3].sum() / sv.sum() > 0.999
    with pytest.raises(ValueError, match="intrinsic"):
        low_dim_clusters(10, 2, 3, intrinsic=4, rng=rng(0, 0))
