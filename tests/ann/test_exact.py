import numpy as np
import pytest

from reprobook import rng
from reprobook.ann.datasets import digits, gaussian_mixture
from reprobook.ann.evaluate import cost_at_recall
from reprobook.ann.exact import exact_knn, recall_at_k, sq_dists


def test_exact_knn_matches_brute_force():
    X, Q = gaussian_mixture(300, 20, 8, 5, 1.0, rng(0, 0))
    ids, d = exact_knn(X, Q, 7, block=6)
    D = ((Q[:, None, :].astype(np.float64) - X[None].astype(np.float64)) ** 2).sum(-1)
    ref = np.argsort(D, axis=1, kind="stable")[:, :7]
    np.testing.assert_array_equal(ids, ref)
    np.testing.assert_allclose(d, np.take_along_axis(D, ref, 1), rtol=1e-10, atol=1e-9)
    np.testing.assert_allclose(sq_dists(Q, X), D, rtol=1e-10, atol=1e-9)


def test_exact_knn_excludes_self_and_breaks_ties_by_index():
    X = np.array([[0.0], [1.0], [-1.0], [2.0]])
    ids, _ = exact_knn(X, None, 2, exclude_self=True)
    assert ids[0].tolist() == [1, 2]          # tie at distance 1: smaller index first
    assert all(i not in row for i, row in enumerate(ids))


def test_exact_knn_bad_input():
    X = np.zeros((5, 2))
    with pytest.raises(ValueError, match="k must be"):
        exact_knn(X, X, 0)
    with pytest.raises(ValueError, match="larger than"):
        exact_knn(X, None, 5, exclude_self=True)
    with pytest.raises(ValueError, match="same dimension"):
        sq_dists(np.zeros((2, 3)), X)
    with pytest.raises(ValueError, match="X must be"):
        exact_knn(np.zeros(4), X, 1)


def test_recall_at_k():
    truth = np.array([[0, 1, 2], [3, 4, 5]])
    r = recall_at_k([np.array([0, 9, 2]), np.array([5])], truth)
    np.testing.assert_allclose(r, [2 / 3, 1 / 3])
    with pytest.raises(ValueError, match="queries"):
        recall_at_k([np.array([0])], truth)


def test_cost_at_recall_interpolates_and_refuses_to_extrapolate():
    recall = [0.5, 0.8, 0.9, 1.0]
    cost = [10, 20, 30, 40]
    assert cost_at_recall(recall, cost, 0.85) == pytest.approx(25.0)
    assert cost_at_recall(recall, cost, 0.9) == pytest.approx(30.0)
    assert np.isnan(cost_at_recall(recall, cost, 0.4))      # cheapest point already above
    assert np.isnan(cost_at_recall([0.5, 0.6], [1, 2], 0.9))
    # a non-monotone sweep is made monotone: the dip at cost 30 does not count
    assert cost_at_recall([0.5, 0.9, 0.8, 0.95], [10, 20, 30, 40], 0.85) == pytest.approx(18.75)
    with pytest.raises(ValueError, match="target"):
        cost_at_recall(recall, cost, 1.5)


def test_datasets_are_deterministic_and_shaped():
    a = gaussian_mixture(50, 5, 4, 3, 2.0, rng(1, 0))
    b = gaussian_mixture(50, 5, 4, 3, 2.0, rng(1, 0))
    assert a[0].shape == (50, 4) and a[1].shape == (5, 4) and a[0].dtype == np.float32
    np.testing.assert_array_equal(a[0], b[0])
    base, q = digits(100, rng(0, 0))
    assert base.shape == (1697, 64) and q.shape == (100, 64)
    with pytest.raises(ValueError, match="rng"):
        gaussian_mixture(5, 1, 2)
    with pytest.raises(ValueError, match="n must"):
        gaussian_mixture(0, 1, 2, rng=rng(0))


def test_sweep_and_ratio_of_a_method_with_itself_is_one():
    from reprobook.ann.evaluate import cost_at_recall, cost_ratio, sweep
    from reprobook.ann.graph import beam_search, build_graph

    X, Q = gaussian_mixture(400, 30, 8, 5, 1.0, rng(2, 0))
    g = build_graph(X, R=8, n_candidates=24)
    truth, _ = exact_knn(X, Q, 10)
    s = sweep(lambda q, ef, k: beam_search(g, q, ef, k), Q, truth, [10, 12, 16, 24, 48])
    assert s.recall.shape == (5, 30) and s.cost.shape == (5, 30)
    target = float(s.curve()[0][1] + s.curve()[0][2]) / 2
    assert cost_ratio([s], [s], target) == pytest.approx(1.0)
    assert cost_at_recall(*s.curve(), target) == pytest.approx(
        cost_at_recall(*s.curve(what="cost"), target))
    # doubling the method's cost halves the ratio
    s2 = type(s)(ef=s.ef, recall=s.recall, cost=2 * s.cost, hops=s.hops, seconds=s.seconds)
    assert cost_ratio([s], [s2], target) == pytest.approx(0.5)
