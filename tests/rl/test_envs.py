"""Garnet MDPs and the quit-or-advance chain."""
import numpy as np
import pytest

from reprobook.rl.envs import ADVANCE, QUIT, garnet, quit_or_advance_chain, quit_policy
from reprobook.rl.mdp import optimal_value


@pytest.mark.parametrize("S, A, b", [(5, 2, 1), (20, 4, 5), (50, 3, 50)])
def test_garnet_rows_are_stochastic_with_the_branching(S, A, b):
    m = garnet(S, A, b, 0.9, np.random.default_rng(0))
    assert m.P.shape == (S, A, S) and m.r.shape == (S, A)
    np.testing.assert_allclose(m.P.sum(axis=2), 1.0, atol=1e-12)
    assert np.all((m.P > 0).sum(axis=2) == b)
    assert np.all((m.r >= 0) & (m.r <= 1))


def test_garnet_is_seeded():
    a, b = garnet(10, 2, 3, 0.9, 4), garnet(10, 2, 3, 0.9, 4)
    c = garnet(10, 2, 3, 0.9, 5)
    np.testing.assert_array_equal(a.P, b.P)
    np.testing.assert_array_equal(a.r, b.r)
    assert not np.array_equal(a.P, c.P)


@pytest.mark.parametrize("kwargs, match", [
    (dict(n_states=3, n_actions=2, branching=4), "branching \\(4\\) cannot exceed"),
    (dict(n_states=0, n_actions=2, branching=1), "n_states must be an int"),
    (dict(n_states=3, n_actions=2.0, branching=1), "n_actions must be an int"),
])
def test_garnet_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        garnet(gamma=0.9, rng=0, **kwargs)
    with pytest.raises(TypeError, match="rng must be"):
        garnet(3, 2, 1, 0.9, rng="seed")


@pytest.mark.parametrize("n", [1, 4, 10])
def test_chain_optimal_value_when_advancing_pays(n):
    g = 0.9
    R = 2.0 * g ** -(n - 1)
    m = quit_or_advance_chain(n, g, R)
    v, actions = optimal_value(m)
    np.testing.assert_allclose(v[:n], g ** (n - 1 - np.arange(n)) * R, atol=1e-12)
    assert v[n] == 0.0
    assert np.all(actions[:n] == ADVANCE)


def test_chain_prefers_quitting_when_the_prize_is_too_far():
    g, n = 0.9, 10
    m = quit_or_advance_chain(n, g, 0.5 * g ** -(n - 1))
    _, actions = optimal_value(m)
    assert actions[0] == QUIT and actions[n - 1] == ADVANCE


def test_quit_policy():
    m = quit_or_advance_chain(5, 0.9, 3.0)
    pi = quit_policy(m, 1e-6)
    assert pi.shape == (6, 2)
    np.testing.assert_allclose(pi[:, QUIT], 1 - 1e-6)
    with pytest.raises(ValueError, match="p_advance"):
        quit_policy(m, 0.0)
    with pytest.raises(ValueError, match="final_reward"):
        quit_or_advance_chain(5, 0.9, float("inf"))
