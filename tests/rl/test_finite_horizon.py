"""Finite-horizon exact evaluation: forward and backward DP agree, and match Monte Carlo."""
import numpy as np
import pytest

from reprobook.rl.envs import garnet
from reprobook.rl.finite_horizon import (backward_values, finite_horizon_value, occupancies,
                                         policy_per_step, sample_trajectories, state_distributions)


def _problem(seed=0, S=6, A=3, H=5):
    g = np.random.default_rng(seed)
    m = garnet(S, A, 3, 0.5, g)
    d1 = g.dirichlet(np.ones(S))
    pi = g.dirichlet(np.ones(A), size=(H, S))
    r = g.random((H, S, A))
    return m.P, r, d1, pi, H


def test_forward_and_backward_dp_agree():
    P, r, d1, pi, H = _problem()
    mu = occupancies(P, d1, pi, H)
    np.testing.assert_allclose(mu.sum(axis=(1, 2)), 1.0, atol=1e-12)
    forward = float((mu * r).sum())
    assert finite_horizon_value(P, r, d1, pi, H) == pytest.approx(forward, abs=1e-12)


def test_value_by_brute_force_enumeration():
    # sum over every trajectory of a tiny MDP: the definition of J, independently of both DPs
    P, r, d1, pi, H = _problem(seed=1, S=3, A=2, H=3)
    total = 0.0
    import itertools
    for traj in itertools.product(range(3), range(2), range(3), range(2), range(3), range(2)):
        s, a = traj[0::2], traj[1::2]
        p = d1[s[0]]
        for h in range(H):
            p *= pi[h, s[h], a[h]]
            if h + 1 < H:
                p *= P[s[h], a[h], s[h + 1]]
        total += p * sum(r[h, s[h], a[h]] for h in range(H))
    assert finite_horizon_value(P, r, d1, pi, H) == pytest.approx(total, abs=1e-12)


def test_stationary_policy_equals_its_repetition():
    P, r, d1, pi, H = _problem(seed=2)
    stat = pi[0]
    rep = np.repeat(stat[None], H, axis=0)
    assert finite_horizon_value(P, r, d1, stat, H) == pytest.approx(
        finite_horizon_value(P, r, d1, rep, H), abs=1e-14)
    assert policy_per_step(stat, H, *stat.shape).shape == (H, *stat.shape)


def test_monte_carlo_returns_match_the_exact_value():
    P, r, d1, pi, H = _problem(seed=3)
    s, a = sample_trajectories(P, d1, pi, H, 40_000, np.random.default_rng(0))
    returns = r[np.arange(H)[None, :], s, a].sum(axis=1)
    exact = finite_horizon_value(P, r, d1, pi, H)
    assert abs(returns.mean() - exact) < 4 * returns.std() / np.sqrt(len(returns))
    # the empirical state distribution at step 2 matches the forward DP
    d = state_distributions(P, d1, pi, H)
    emp = np.bincount(s[:, 1], minlength=P.shape[0]) / len(s)
    np.testing.assert_allclose(emp, d[1], atol=0.01)


def test_backward_values_end_at_zero():
    P, r, d1, pi, H = _problem(seed=4)
    V, Q = backward_values(P, r, pi, H)
    assert V.shape == (H + 1, P.shape[0]) and Q.shape == (H, *P.shape[:2])
    np.testing.assert_array_equal(V[H], 0.0)


def test_bad_inputs_are_named():
    P, r, d1, pi, H = _problem()
    with pytest.raises(ValueError, match="d1 must sum to 1"):
        finite_horizon_value(P, r, d1 * 2, pi, H)
    with pytest.raises(ValueError, match="non-stationary policy must have shape"):
        finite_horizon_value(P, r, d1, pi[:-1], H)
    with pytest.raises(ValueError, match="H \\(the horizon\\)"):
        occupancies(P, d1, pi[0], 0)
    with pytest.raises(ValueError, match="per-step rewards"):
        finite_horizon_value(P, r[:-1], d1, pi, H)
    with pytest.raises(TypeError, match="rng must be a numpy Generator"):
        sample_trajectories(P, d1, pi, H, 3, rng=0)
    with pytest.raises(ValueError, match="P must have shape"):
        occupancies(P[:, :, :-1], d1, pi, H)
