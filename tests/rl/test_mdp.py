"""Tabular MDPs: validation, exact evaluation, Bellman operators, the generative model."""
import numpy as np
import pytest

from reprobook.rl.envs import garnet
from reprobook.rl.mdp import (TabularMDP, action_values, bellman, bellman_power, check_policy,
                              deterministic_policy, evaluate, optimal_value, policy_model,
                              sample_next_states, value_iteration)


@pytest.fixture
def mdp():
    return garnet(12, 3, 4, 0.9, 7)


def random_policy(mdp, seed=0):
    x = np.random.default_rng(seed).random((mdp.n_states, mdp.n_actions))
    return x / x.sum(axis=1, keepdims=True)


# ----------------------------------------------------------------------------- validation
def two_state():
    P = np.zeros((2, 2, 2))
    P[:, 0, 0] = 1.0
    P[:, 1, 1] = 1.0
    return P, np.array([[0.0, 1.0], [2.0, 0.5]])


def test_valid_mdp_is_read_only_float64():
    P, r = two_state()
    m = TabularMDP(P, r, 0.5)
    assert m.n_states == 2 and m.n_actions == 2 and m.P.dtype == np.float64
    with pytest.raises(ValueError):
        m.P[0, 0, 0] = 0.3
    P[0, 0, 0] = 0.0          # the MDP keeps its own copy
    assert m.P[0, 0, 0] == 1.0


@pytest.mark.parametrize("change, match", [
    (lambda P, r: (P[0], r), "P must have 3 dimensions"),
    (lambda P, r: (P[:, :, :1], r), "shape \\(S, A, S\\)"),
    (lambda P, r: (P, r[:, :1]), "r must have shape"),
    (lambda P, r: (P + np.array([[[0.5, -0.5], [0, 0]], [[0, 0], [0, 0]]]), r), "negative"),
    (lambda P, r: (P * 0.5, r), "sum to 1"),
    (lambda P, r: (P, r * np.nan), "non-finite"),
])
def test_bad_arrays_are_named(change, match):
    P, r = change(*two_state())
    with pytest.raises(ValueError, match=match):
        TabularMDP(P, r, 0.9)


@pytest.mark.parametrize("gamma", [1.0, -0.1, 1.5])
def test_gamma_outside_unit_interval(gamma):
    with pytest.raises(ValueError, match="gamma must lie in \\[0, 1\\)"):
        TabularMDP(*two_state(), gamma)


@pytest.mark.parametrize("gamma", [True, "0.9", None])
def test_gamma_must_be_a_number(gamma):
    with pytest.raises(TypeError, match="gamma must be a number"):
        TabularMDP(*two_state(), gamma)


def test_policy_validation(mdp):
    with pytest.raises(ValueError, match="pi must have shape"):
        check_policy(mdp, np.ones((3, 3)) / 3)
    bad = random_policy(mdp)
    bad[0] *= 2
    with pytest.raises(ValueError, match="sum to 1"):
        evaluate(mdp, bad)
    with pytest.raises(TypeError, match="TabularMDP"):
        evaluate("not an mdp", bad)
    with pytest.raises(ValueError, match="V must have shape"):
        bellman(mdp, np.zeros(3))
    with pytest.raises(ValueError, match="n \\(the number of Bellman backups\\)"):
        bellman_power(mdp, np.zeros(mdp.n_states), -1)


# ----------------------------------------------------------------------------- evaluation
def test_evaluation_is_the_fixed_point_of_the_policy_operator(mdp):
    pi = random_policy(mdp)
    V = evaluate(mdp, pi)
    P_pi, r_pi = policy_model(mdp, pi)
    np.testing.assert_allclose(V, r_pi + mdp.gamma * P_pi @ V, atol=1e-12)
    # and the limit of iterative policy evaluation, an independent route
    W = np.zeros(mdp.n_states)
    for _ in range(600):
        W = r_pi + mdp.gamma * P_pi @ W
    np.testing.assert_allclose(V, W, atol=1e-12)


def test_policy_iteration_matches_value_iteration(mdp):
    v_star, actions = optimal_value(mdp)
    np.testing.assert_allclose(v_star, value_iteration(mdp, tol=1e-11), atol=1e-10)
    np.testing.assert_allclose(v_star, bellman(mdp, v_star), atol=1e-12)   # the fixed point of T
    np.testing.assert_allclose(evaluate(mdp, deterministic_policy(actions, mdp.n_actions)),
                               v_star, atol=1e-12)
    for seed in range(5):                      # no policy beats V*
        assert np.all(evaluate(mdp, random_policy(mdp, seed)) <= v_star + 1e-12)


# ----------------------------------------------------------------------------- operators
@pytest.mark.parametrize("h", [1, 2, 3, 5])
def test_bellman_power_is_a_gamma_h_contraction(mdp, h):
    rng = np.random.default_rng(h)
    for _ in range(20):
        U, W = rng.normal(size=(2, mdp.n_states)) * 10
        lhs = np.abs(bellman_power(mdp, U, h) - bellman_power(mdp, W, h)).max()
        assert lhs <= mdp.gamma ** h * np.abs(U - W).max() + 1e-12


def test_bellman_is_monotone_and_power_composes(mdp):
    rng = np.random.default_rng(1)
    U = rng.normal(size=mdp.n_states)
    W = U + rng.random(mdp.n_states)          # W >= U
    assert np.all(bellman(mdp, W) >= bellman(mdp, U))
    np.testing.assert_array_equal(bellman_power(mdp, U, 0), U)
    np.testing.assert_allclose(bellman_power(mdp, U, 3), bellman(mdp, bellman(mdp, bellman(mdp, U))))
    q = action_values(mdp, U)
    assert q.shape == (mdp.n_states, mdp.n_actions)
    np.testing.assert_allclose(q, mdp.r + mdp.gamma * np.einsum("sat,t->sa", mdp.P, U))


# ----------------------------------------------------------------------------- generative model
def test_sampling_matches_the_transition_probabilities(mdp):
    rng = np.random.default_rng(3)
    n = 40_000
    for s, a in [(0, 0), (5, 2), (11, 1)]:
        draws = sample_next_states(mdp, np.full(n, s), np.full(n, a), rng)
        freq = np.bincount(draws, minlength=mdp.n_states) / n
        p = mdp.P[s, a]
        assert np.all(freq[p == 0] == 0)                       # never off the support
        assert np.all(np.abs(freq - p) <= 5 * np.sqrt(p * (1 - p) / n) + 1e-12)


def test_sampling_is_reproducible_and_keeps_shape(mdp):
    s = np.arange(mdp.n_states)[:, None, None] * np.ones((1, 3, 4), dtype=int)
    a = np.arange(3)[None, :, None]
    x = sample_next_states(mdp, s, a, np.random.default_rng(0))
    y = sample_next_states(mdp, s, a, np.random.default_rng(0))
    assert x.shape == (mdp.n_states, 3, 4)
    np.testing.assert_array_equal(x, y)
    with pytest.raises(TypeError, match="rng must be a numpy Generator"):
        sample_next_states(mdp, s, a, 0)
    with pytest.raises(ValueError, match="states must lie in"):
        sample_next_states(mdp, np.array([mdp.n_states]), np.array([0]), np.random.default_rng(0))
