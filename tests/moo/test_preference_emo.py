"""Preference-based NSGA-II: the SOI, the preference density, the methods' plumbing."""
import numpy as np
import pytest

from reprobook.moo.preference_emo import (PreferenceDensity, quadratic_features, run_pbemo,
                                          solution_of_interest)


def test_solutions_of_interest_lie_on_the_true_fronts():
    z = solution_of_interest("zdt1")
    assert z[1] == pytest.approx(1 - np.sqrt(z[0]), abs=1e-9)
    z3 = solution_of_interest("dtlz2")
    assert np.linalg.norm(z3) == pytest.approx(1.0)
    with pytest.raises(ValueError, match="unknown problem"):
        solution_of_interest("zdt9")


def test_preference_density_ranks_by_distance_and_discounts_old_centres():
    d = PreferenceDensity(sigma=0.1, gamma=0.5, centres=[np.array([0.0, 0.0]), np.array([1.0, 1.0])])
    F = np.array([[0.0, 0.0], [1.0, 1.0], [0.5, 0.5]])
    p = d(F)
    assert p[1] > p[0] > p[2]  # the newest centre weighs twice the old one
    assert d.distribution(F).sum() == pytest.approx(1.0)


def test_quadratic_features_shape():
    X = quadratic_features(np.ones((4, 3)))
    assert X.shape == (4, 3 + 6)


def test_methods_run_and_bad_names_are_named():
    r = run_pbemo("zdt1", "dpbemo", seed=0, pop_size=12, generations=12, every=2, queries=40)
    assert r.F.shape == (12, 2) and r.consultations >= 1
    assert r.min_distance <= r.mean_distance
    n = run_pbemo("zdt1", "nsga2", seed=0, pop_size=12, generations=12)
    assert n.consultations == 0 and n.duel_regret == 0.0
    with pytest.raises(ValueError, match="unknown method"):
        run_pbemo("zdt1", "moead", seed=0)
    with pytest.raises(ValueError, match="feedback"):
        run_pbemo("zdt1", "dpbemo", seed=0, feedback="bogus")


def test_runs_are_deterministic_given_the_seed():
    a = run_pbemo("dtlz2", "reward-model", seed=3, pop_size=12, generations=10, every=2, queries=30)
    b = run_pbemo("dtlz2", "reward-model", seed=3, pop_size=12, generations=10, every=2, queries=30)
    np.testing.assert_array_equal(a.F, b.F)


def test_oracle_feedback_centres_the_density_on_the_truly_best_member():
    r = run_pbemo("dtlz2", "dpbemo", seed=1, pop_size=12, generations=14, every=2, queries=20,
                  feedback="oracle", max_rounds=2)
    assert r.consultations >= 1
    with pytest.raises(ValueError, match="oracle"):
        run_pbemo("zdt1", "dpbemo", seed=0, feedback="psychic")
