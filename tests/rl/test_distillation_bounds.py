"""The performance-difference identity and the PBC / action-value weighted bounds (exact, tabular)."""
import numpy as np
import pytest

from reprobook.rl.distillation_bounds import (absorbing_tight_mdp, av_bound, occupancy, pbc_bound,
                                              pdl_gap, policy_return, softmax_perturbation)
from reprobook.rl.mdp import TabularMDP, deterministic_policy, optimal_value


def _mdp(gamma=0.9, S=8, A=3, seed=0):
    rng = np.random.default_rng(seed)
    return TabularMDP(rng.dirichlet(np.full(S, 0.5), size=(S, A)), rng.random((S, A)), gamma)


def test_occupancy_is_a_distribution_and_matches_a_power_series():
    m = _mdp(0.8)
    pi = softmax_perturbation(np.full((8, 3), 1 / 3), 1.0, np.random.default_rng(1))
    d = occupancy(m, pi)
    assert abs(d.sum() - 1) < 1e-12 and (d >= 0).all()
    P_pi = np.einsum("sa,sat->st", pi, m.P)
    x, ref = np.full(8, 1 / 8), np.zeros(8)
    for t in range(400):
        ref += (1 - 0.8) * 0.8 ** t * x
        x = x @ P_pi
    np.testing.assert_allclose(d, ref, atol=1e-12)


@pytest.mark.parametrize("gamma", [0.5, 0.95])
def test_identity_holds_and_bounds_bound(gamma):
    m = _mdp(gamma)
    _, a = optimal_value(m)
    ps = deterministic_policy(a, 3)
    rng = np.random.default_rng(2)
    for _ in range(5):
        p = softmax_perturbation(ps, 1.0, rng)
        gap = policy_return(m, ps) - policy_return(m, p)
        assert gap > 0
        assert abs(gap - pdl_gap(m, ps, p)) < 1e-10 * (1 + abs(gap))
        assert pbc_bound(m, ps, p) >= gap and av_bound(m, ps, p) >= gap
    # the wrong occupancy (the expert's) breaks the identity
    p = softmax_perturbation(ps, 1.0, rng)
    gap = policy_return(m, ps) - policy_return(m, p)
    assert abs(gap - pdl_gap(m, ps, p, state_dist="pi_star")) > 1e-6


def test_absorbing_mdp_makes_the_weighted_bound_tight():
    m, ps = absorbing_tight_mdp(6, 3, 0.9, np.random.default_rng(0))
    assert np.allclose(m.r[-1], 0) and np.allclose(m.P[-1, :, -1], 1)
    _, a = optimal_value(m)
    # the rewarding action is optimal in every live state
    assert np.array_equal(a[:-1], ps[:-1].argmax(1))
    p = softmax_perturbation(ps, 1.0, np.random.default_rng(3))
    gap = policy_return(m, ps) - policy_return(m, p)
    assert abs(av_bound(m, ps, p) / gap - 1) < 1e-10


def test_bad_input():
    m = _mdp()
    ps = np.full((8, 3), 1 / 3)
    with pytest.raises(ValueError, match="rho0"):
        occupancy(m, ps, rho0=np.ones(3))
    with pytest.raises(ValueError, match="state_dist"):
        pdl_gap(m, ps, ps, state_dist="mu")
    neg = TabularMDP(m.P, m.r - 2.0, 0.9)
    with pytest.raises(ValueError, match="q_"):
        av_bound(neg, ps, ps)
    with pytest.raises(ValueError, match="concentration"):
        softmax_perturbation(ps, 1.0, np.random.default_rng(0), concentration=-1)
