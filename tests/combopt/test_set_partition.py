import itertools

import networkx as nx
import numpy as np
import pytest

from reprobook.combopt.district_instances import make_instance
from reprobook.combopt.set_partition import (brute_force_partition, connected_subsets,
                                             solve_set_partition)


def _all_connected_subsets_by_brute_force(g, lo, hi):
    out = []
    for k in range(lo, hi + 1):
        for s in itertools.combinations(range(g.number_of_nodes()), k):
            if nx.is_connected(g.subgraph(s)):
                out.append(s)
    return sorted(out, key=lambda s: (len(s), s))


def test_enumeration_matches_brute_force():
    inst = make_instance(3, 4, np.random.default_rng(2))
    assert connected_subsets(inst.adjacency, 2, 4) == \
        _all_connected_subsets_by_brute_force(inst.graph(), 2, 4)


def test_ilp_matches_brute_force_on_tiny_instances():
    for seed in range(4):
        inst = make_instance(3, 3, np.random.default_rng(seed))
        subs = connected_subsets(inst.adjacency, 2, 4)
        costs = np.random.default_rng(seed + 10).uniform(1, 3, len(subs))
        parts, value = solve_set_partition(inst.n, subs, costs)
        _, best = brute_force_partition(inst.n, subs, costs)
        assert value == pytest.approx(best, abs=1e-9)
        assert sorted(b for p in parts for b in p) == list(range(inst.n))


def test_infeasible_and_bad_inputs():
    with pytest.raises(ValueError, match="no partition"):
        solve_set_partition(3, [(0, 1), (1, 2)], [1.0, 1.0])
    with pytest.raises(ValueError, match="costs"):
        solve_set_partition(3, [(0, 1, 2)], [1.0, 2.0])
    with pytest.raises(ValueError, match="lo"):
        connected_subsets([set()], 3, 2)


@pytest.mark.parametrize("rows,cols,seed", [(3, 3, 0), (3, 4, 1), (4, 4, 2), (2, 5, 3)])
def test_dynamic_programme_matches_milp_and_brute_force(rows, cols, seed):
    inst = make_instance(rows, cols, np.random.default_rng(seed))
    subs = connected_subsets(inst.adjacency, inst.lo, inst.hi)
    costs = np.random.default_rng(seed + 20).uniform(1, 3, len(subs))
    parts, value = solve_set_partition(inst.n, subs, costs, method="dp")
    _, milp_value = solve_set_partition(inst.n, subs, costs, method="milp")
    assert value == pytest.approx(milp_value, abs=1e-9)
    assert sorted(b for p in parts for b in p) == list(range(inst.n))
    assert value == pytest.approx(sum(costs[subs.index(p)] for p in parts), abs=1e-12)
    if inst.n <= 9:
        assert value == pytest.approx(brute_force_partition(inst.n, subs, costs)[1], abs=1e-9)


def test_auto_method_and_dp_errors():
    inst = make_instance(3, 3, np.random.default_rng(0))
    subs = connected_subsets(inst.adjacency, 2, 4)
    costs = np.random.default_rng(1).uniform(1, 3, len(subs))
    assert solve_set_partition(inst.n, subs, costs)[1] == pytest.approx(
        solve_set_partition(inst.n, subs, costs, method="milp")[1], abs=1e-9)
    with pytest.raises(ValueError, match="no partition"):
        solve_set_partition(3, [(0, 1), (1, 2)], [1.0, 1.0], method="dp")
    with pytest.raises(ValueError, match="method"):
        solve_set_partition(3, [(0, 1, 2)], [1.0], method="greedy")
