import numpy as np
import pytest

from reprobook.combopt.cmst import (CMSTGraph, check_districting, decode, is_feasible,
                                    solve_cmst_columns, solve_cmst_heuristic, solve_cmst_milp,
                                    tree_of_partition)
from reprobook.combopt.district_instances import make_instance


def _graph(rows, cols, seed):
    inst = make_instance(rows, cols, np.random.default_rng(seed))
    return CMSTGraph(inst.n, inst.edges)


@pytest.mark.parametrize("rows,cols", [(3, 3), (4, 4), (5, 6)])
def test_heuristic_is_feasible(rows, cols):
    for seed in range(3):
        g = _graph(rows, cols, seed)
        theta = np.random.default_rng(seed).uniform(0, 1, g.dim)
        y, parts = solve_cmst_heuristic(g, theta, 3, 5, group_sizes=(2,))
        assert is_feasible(g.adjacency, parts, 3, 5)
        assert decode(g, y) == parts
        assert y.sum() == g.n   # a spanning tree on n BUs + the depot has n edges


def test_heuristic_matches_milp_on_tiny_instances():
    for seed in range(4):
        g = _graph(3, 3, seed)
        theta = np.random.default_rng(100 + seed).uniform(0, 1, g.dim)
        y_milp, v = solve_cmst_milp(g, theta, 3, 5)
        y_col, _ = solve_cmst_columns(g, theta, 3, 5)
        y_h, _ = solve_cmst_heuristic(g, theta, 3, 5)
        assert theta @ y_col == pytest.approx(v, abs=1e-7)
        assert theta @ y_h == pytest.approx(v, abs=1e-7)
        assert is_feasible(g.adjacency, decode(g, y_milp), 3, 5)


def test_target_embedding_is_cheapest_tree_of_the_partition():
    g = _graph(3, 3, 0)
    theta = np.random.default_rng(0).uniform(0, 1, g.dim)
    _, parts = solve_cmst_heuristic(g, theta, 3, 5)
    y = tree_of_partition(g, theta, parts)
    assert decode(g, y) == parts
    # the optimum's own tree is the cheapest tree of its partition
    y_opt, v = solve_cmst_milp(g, theta, 3, 5)
    assert theta @ tree_of_partition(g, theta, decode(g, y_opt)) == pytest.approx(v, abs=1e-7)


def test_dropping_the_capacity_breaks_feasibility():
    g = _graph(4, 4, 0)
    theta = np.concatenate([np.full(len(g.edges), 0.1), np.full(g.n, 5.0)])
    _, parts = solve_cmst_heuristic(g, theta, 3, 5, enforce_upper=False)
    assert not is_feasible(g.adjacency, parts, 3, 5)


def test_checker_rejects_bad_partitions():
    adj = [{1}, {0, 2}, {1, 3}, {2, 4}, {3, 5}, {4}]   # a path 0-1-2-3-4-5
    assert check_districting(adj, [(0, 1, 2), (3, 4, 5)], 3, 5) == []
    assert any("outside" in p for p in check_districting(adj, [(0, 1), (2, 3, 4, 5)], 3, 5))
    assert any("not connected" in p for p in check_districting(adj, [(0, 2, 4), (1, 3, 5)], 2, 5))
    assert any("in districts" in p for p in check_districting(adj, [(0, 1, 2), (2, 3, 4, 5)], 3, 5))
    assert any("no district" in p for p in check_districting(adj, [(0, 1, 2), (3, 4)], 2, 5))


def test_decode_rejects_non_trees_and_bad_inputs():
    g = CMSTGraph(3, [(0, 1), (1, 2)])
    with pytest.raises(ValueError, match="no depot edge"):
        decode(g, [1, 1, 0, 0, 0])
    with pytest.raises(ValueError, match="two depot edges"):
        decode(g, [1, 1, 1, 1, 0])
    with pytest.raises(ValueError, match="y must have"):
        decode(g, [1, 1])
    with pytest.raises(ValueError, match="theta"):
        solve_cmst_heuristic(g, [1.0, 2.0], 1, 3)
    with pytest.raises(ValueError, match="lo"):
        solve_cmst_heuristic(g, np.ones(5), 3, 2)
    with pytest.raises(ValueError, match="edges"):
        CMSTGraph(3, [(0, 5)])
    with pytest.raises(ValueError, match="n must"):
        CMSTGraph(0, [])
