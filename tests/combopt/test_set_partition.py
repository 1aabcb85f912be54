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
