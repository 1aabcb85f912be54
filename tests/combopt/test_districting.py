import numpy as np
import pytest

from reprobook.combopt.district_instances import make_instance
from reprobook.combopt.districting import (BDRegression, bd_partition, co_assignment_agreement,
                                           districtnet_partition, districtnet_weights,
                                           euclidean_partition, make_city,
                                           make_model, target_partition, train_districtnet)
from reprobook.combopt.routing_cost import sample_scenarios


def _city(rows, cols, seed, scenarios=2):
    inst = make_instance(rows, cols, np.random.default_rng(seed))
    return make_city(inst, sample_scenarios(inst, scenarios, np.random.default_rng(seed + 50)))


def test_bd_regression_recovers_a_known_formula():
    city = _city(3, 3, 0)
    beta = np.array([0.5, 1.2, 2.0])
    y = BDRegression.features(city.inst, city.subsets) @ beta
    bd = BDRegression().fit([city.inst], [city.subsets], [y])
    assert np.allclose(bd.beta, beta) and bd.r2 == pytest.approx(1.0)


def test_every_method_returns_a_feasible_districting():
    train = _city(3, 3, 1)
    target, costs = target_partition(train)
    assert not train.problems(target)
    bd = BDRegression().fit([train.inst], [train.subsets], [costs])
    test = _city(4, 4, 2)
    model = make_model(0, hidden=8, layers=1)
    for part in (bd_partition(test, bd), bd_partition(test, bd, exact_max_n=0),
                 euclidean_partition(test), districtnet_partition(model, test)):
        assert test.problems(part) == []


def test_bd_local_search_close_to_exact():
    train = _city(3, 3, 1)
    _, costs = target_partition(train)
    bd = BDRegression().fit([train.inst], [train.subsets], [costs])
    test = _city(4, 4, 3)
    exact = bd.predict(test.inst, bd_partition(test, bd)).sum()
    local = bd.predict(test.inst, bd_partition(test, bd, exact_max_n=0)).sum()
    assert exact <= local + 1e-9 and local <= 1.02 * exact


def test_training_fits_one_target():
    city = _city(3, 3, 4)
    target, _ = target_partition(city)
    model = make_model(0, hidden=8, layers=1)
    hist = train_districtnet(model, [city], [target], epochs=12, lr=1e-2, eps=0.3, n_samples=2)
    assert len(hist["loss"]) == 12 and min(hist["loss"]) >= -1e-9
    assert hist["agreement"][-1] == 1.0


def test_agreement_and_bad_inputs():
    assert co_assignment_agreement([(0, 1), (2, 3)], [(1, 0), (3, 2)], 4) == 1.0
    assert co_assignment_agreement([(0, 1), (2, 3)], [(0, 2), (1, 3)], 4) == 0.0
    with pytest.raises(ValueError, match="inst"):
        make_city("not an instance")
    city = _city(3, 3, 0)
    with pytest.raises(ValueError, match="epochs"):
        train_districtnet(make_model(0, hidden=4, layers=1), [city], [[(0, 1, 2)]], epochs=0)
    with pytest.raises(ValueError, match="cities"):
        train_districtnet(make_model(0, hidden=4, layers=1), [city], [], epochs=1)
    with pytest.raises(ValueError, match="fit"):
        BDRegression().predict(city.inst, [(0, 1, 2)])
    with pytest.raises(ValueError, match="scenarios"):
        target_partition(make_city(city.inst))


def test_districtnet_weights_drive_its_partition():
    from reprobook.combopt.cmst import solve_cmst_heuristic
    city = _city(3, 4, 5)
    model = make_model(1, hidden=8, layers=1)
    th = districtnet_weights(model, city)
    assert th.shape == (city.graph.dim,) and th.dtype == np.float64
    part = solve_cmst_heuristic(city.graph, th, city.inst.lo, city.inst.hi)[1]
    assert part == districtnet_partition(model, city)
    with pytest.raises(ValueError, match="City"):
        districtnet_weights(model, city.inst)
