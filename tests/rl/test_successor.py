"""Successor measures: rows are distributions, agree with Monte Carlo, and the coverage maths."""
import numpy as np
import pytest

from reprobook.rl.envs import garnet
from reprobook.rl.gridworld import maze
from reprobook.rl.mdp import sample_next_states
from reprobook.rl.successor import (entropy, expected_coverage, mutual_information, occupancy,
                                    successor_measure, visit_probabilities, with_discount)


def random_policy(mdp, seed=0):
    x = np.random.default_rng(seed).random((mdp.n_states, mdp.n_actions)) ** 3
    return x / x.sum(axis=1, keepdims=True)


def rollouts(mdp, pi, s0, n, rng):
    """n rollouts stopped at an independent Geometric(1 - gamma) time: (final states, visited)."""
    S = mdp.n_states
    s = np.full(n, s0)
    visited = np.zeros((n, S), dtype=bool)
    visited[:, s0] = True
    alive = np.ones(n, dtype=bool)
    final = np.full(n, -1)
    cdf = np.cumsum(pi, axis=1)
    while alive.any():
        stop = alive & (rng.random(n) > mdp.gamma)
        final[stop] = s[stop]
        alive &= ~stop
        a = (rng.random(n)[:, None] > cdf[s]).sum(axis=1).clip(0, mdp.n_actions - 1)
        s = np.where(alive, sample_next_states(mdp, s, a, rng), s)
        visited[np.arange(n)[alive], s[alive]] = True
    return final, visited


def test_rows_sum_to_one_and_match_the_series():
    mdp = garnet(8, 3, 3, 0.8, 1)
    pi = random_policy(mdp)
    M = successor_measure(mdp, pi)
    assert np.allclose(M.sum(axis=1), 1.0) and np.all(M >= 0)
    P_pi = np.einsum("sa,sat->st", pi, mdp.P)
    series = sum((1 - 0.8) * 0.8 ** t * np.linalg.matrix_power(P_pi, t) for t in range(200))
    assert np.abs(M - series).max() < 1e-12
    assert np.allclose(occupancy(mdp, pi, 3), M[3])
    rho = np.full(8, 1 / 8)
    assert np.allclose(occupancy(mdp, pi, rho), rho @ M)


def test_successor_measure_and_visits_match_monte_carlo():
    w = maze("easy", gamma=0.9)
    pi = random_policy(w.mdp, 2)
    M = successor_measure(w.mdp, pi)
    final, visited = rollouts(w.mdp, pi, w.start, 20000, np.random.default_rng(0))
    freq = np.bincount(final, minlength=w.n_states) / len(final)
    assert np.abs(freq - M[w.start]).max() < 0.015
    h = visit_probabilities(M, w.start)
    assert h[w.start] == 1.0
    assert np.abs(visited.mean(axis=0) - h).max() < 0.02


def test_expected_coverage_matches_monte_carlo_over_skills():
    w = maze("u", gamma=0.9)
    pis = [random_policy(w.mdp, k) for k in (3, 4)]
    h = np.stack([visit_probabilities(successor_measure(w.mdp, p), w.start) for p in pis])
    g = np.random.default_rng(5)
    n = 4000
    v = [rollouts(w.mdp, p, w.start, n, g)[1] for p in pis]
    mc = (v[0] | v[1]).mean()
    assert abs(expected_coverage(h) - mc) < 0.01
    # two rollouts per skill = the same skill twice
    assert expected_coverage(h, rollouts=2) == pytest.approx(expected_coverage(np.vstack([h, h])))
    mask = np.zeros(w.n_states, dtype=bool)
    mask[:5] = True
    assert expected_coverage(h, mask) == pytest.approx(expected_coverage(h, np.arange(5)))


def test_mutual_information_of_figure_one_and_its_bounds():
    # four skills each on one cell, and four skills each uniform on two cells: both log 4
    one = np.eye(8)[:4]
    two = np.zeros((4, 8))
    for z in range(4):
        two[z, 2 * z: 2 * z + 2] = 0.5
    assert abs(mutual_information(one) - np.log(4)) < 1e-12
    assert abs(mutual_information(two) - np.log(4)) < 1e-12
    assert entropy(two.mean(axis=0)) - entropy(one.mean(axis=0)) == pytest.approx(np.log(2))
    same = np.tile(np.full(8, 1 / 8), (3, 1))
    assert abs(mutual_information(same)) < 1e-15
    d = np.random.default_rng(0).dirichlet(np.ones(8), size=5)
    assert 0 <= mutual_information(d) <= np.log(5)


def test_with_discount_changes_only_gamma():
    w = maze("easy")
    m = with_discount(w.mdp, 0.99)
    assert m.gamma == 0.99 and np.array_equal(m.P, w.mdp.P)


@pytest.mark.parametrize("call, match", [
    (lambda M: visit_probabilities(M[:, :3], 0), "shape"),
    (lambda M: visit_probabilities(M, 99), "start"),
    (lambda M: visit_probabilities(np.zeros((3, 3)), 0), "diagonal"),
    (lambda M: expected_coverage(M[0]), "n_skills"),
    (lambda M: expected_coverage(M[:2] + 1), "probabilities"),
    (lambda M: expected_coverage(M[:2] * 0, rollouts=0), "rollouts"),
    (lambda M: mutual_information(np.ones((2, 3))), "probability vector"),
    (lambda M: entropy(np.ones(3)), "probability vector"),
])
def test_bad_inputs_are_named(call, match):
    M = successor_measure(garnet(5, 2, 2, 0.9, 0), np.full((5, 2), 0.5))
    with pytest.raises(ValueError, match=match):
        call(M)


def test_bad_start_is_named():
    mdp = garnet(5, 2, 2, 0.9, 0)
    with pytest.raises(ValueError, match="start"):
        occupancy(mdp, np.full((5, 2), 0.5), 7)
