import numpy as np
import pytest

from reprobook.combopt.district_instances import make_instance
from reprobook.combopt.routing_cost import (DistrictCost, nearest_neighbour_tour, sample_scenarios,
                                            tour_length, tsp_brute_force, tsp_heuristic, two_opt)


def test_two_opt_never_worse_than_nearest_neighbour():
    g = np.random.default_rng(0)
    for m in (5, 12, 30):
        for _ in range(10):
            p = g.uniform(size=(m, 2))
            nn = nearest_neighbour_tour(p)
            t = two_opt(p, nn)
            assert sorted(t) == list(range(m)) and t[0] == 0
            assert tour_length(p, t) <= tour_length(p, nn) + 1e-12


def test_heuristic_is_exact_on_tiny_point_sets():
    g = np.random.default_rng(1)
    gaps = []
    for m in (3, 4, 5, 6, 7):
        for _ in range(8):
            p = g.uniform(size=(m, 2))
            gaps.append(tsp_heuristic(p)[1] / tsp_brute_force(p)[1] - 1)
    assert max(gaps) < 1e-9


def test_square_tour():
    p = np.array([[0, 0], [1, 1], [1, 0], [0, 1.0]])
    assert tsp_heuristic(p)[1] == pytest.approx(4.0)


def test_district_cost_uses_common_scenarios_and_caches():
    inst = make_instance(3, 3, np.random.default_rng(0))
    a = DistrictCost(sample_scenarios(inst, 4, np.random.default_rng(5)))
    b = DistrictCost(sample_scenarios(inst, 4, np.random.default_rng(5)))
    assert a([0, 1, 2]) == b([2, 1, 0]) > 0
    assert len(a.cache) == 1
    assert a.partition([[0, 1, 2], [3, 4, 5], [6, 7, 8]]) > a([0, 1, 2])


def test_bad_inputs_are_named():
    with pytest.raises(ValueError, match="points"):
        tsp_heuristic(np.zeros((3, 3)))
    with pytest.raises(ValueError, match="points"):
        tsp_brute_force(np.zeros((12, 2)))
    inst = make_instance(3, 3, np.random.default_rng(0))
    with pytest.raises(ValueError, match="n_scenarios"):
        sample_scenarios(inst, 0, np.random.default_rng(0))
    cost = DistrictCost(sample_scenarios(inst, 1, np.random.default_rng(0)))
    with pytest.raises(ValueError, match="district"):
        cost([])
    with pytest.raises(ValueError, match="district"):
        cost([0, 99])
