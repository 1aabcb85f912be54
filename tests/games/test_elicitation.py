"""Unit tests of reprobook.games.elicitation (bonus-penalty peer prediction)."""
import itertools

import numpy as np
import pytest

import networkx as nx

from reprobook.games.elicitation import (
    bonus_penalty_payment, common_friends_correlations, comparison_joints, deviation_gains,
    expected_payment, forest_correlations, ising_deviation_gains, ising_probabilities, ising_states,
    is_strict_truthful_bne, network_condition, pair_joint, population_payments, population_world,
    PURE_STRATEGIES, best_deviation, unilateral_payments,
    symmetric_profile_table,
)


def test_payment_rule():
    assert np.array_equal(bonus_penalty_payment([1, 1, -1, -1], [1, -1, -1, 1], [-1, 1, 1, -1]),
                          [1.0, -1.0, 1.0, -1.0])
    assert bonus_penalty_payment(1, 1, 1) == 0.0


def test_quadrature_converges_and_marginals_are_fair():
    a_ij, a_ik = comparison_joints(1.0, "bt", 24)
    b_ij, b_ik = comparison_joints(1.0, "bt", 40)
    assert np.abs(a_ij - b_ij).max() < 1e-9 and np.abs(a_ik - b_ik).max() < 1e-9
    for P in (b_ij, b_ik):
        assert P.sum() == pytest.approx(1.0, abs=1e-12)
        assert np.allclose(P.sum(axis=0), 0.5, atol=1e-12) and np.allclose(P.sum(axis=1), 0.5)


def test_quadrature_matches_monte_carlo():
    rng = np.random.default_rng(0)
    n, tau = 400_000, 1.0
    th = rng.standard_normal((n, 3))
    sig = lambda d: np.where(rng.random(n) < 1 / (1 + np.exp(-d / tau)), 1, -1)
    si, sj = sig(th[:, 0] - th[:, 1]), sig(th[:, 0] - th[:, 2])
    P_ij, _ = comparison_joints(tau, "bt", 30)
    assert np.mean((si == 1) & (sj == 1)) == pytest.approx(P_ij[0, 0], abs=4e-3)


@pytest.mark.parametrize("link", ["bt", "thurstone"])
def test_truth_is_strict_bne_and_best_symmetric(link):
    P_ij, P_ik = comparison_joints(1.0, link, 24)
    assert is_strict_truthful_bne(P_ij, P_ik)
    t = symmetric_profile_table(P_ij, P_ik, np.linspace(0, 1, 11))
    truth = expected_payment(P_ij, P_ik, [1, 0], [1, 0])
    others = t["is_bne"] & ~np.all(np.isin(t["sigma"], [0, 1]) & (t["sigma"][:, :1] != t["sigma"][:, 1:]), axis=1)
    assert t["payment"][others].max() < truth - 1e-6
    uninf = t["sigma"][:, 0] == t["sigma"][:, 1]
    assert np.abs(t["payment"][uninf]).max() < 1e-12


def test_negative_controls_break_it():
    P_ij, P_ik = comparison_joints(1.0, "bt", 24)
    assert not is_strict_truthful_bne(P_ik, P_ij)                      # peers swapped
    t = symmetric_profile_table(P_ij, P_ik, [0.0, 1.0], penalty=0.0)  # no penalty
    truth = expected_payment(P_ij, P_ik, [1, 0], [1, 0], penalty=0.0)
    assert t["payment"].max() > truth + 0.1
    N_ij, N_ik = comparison_joints(1.0, "noise", 8)                    # uninformative signals
    assert np.allclose(deviation_gains(N_ij, N_ik), 0.0, atol=1e-14)


def test_ising_enumeration_and_common_friends_closed_form():
    S = ising_states(3)
    assert S.shape == (8, 3) and set(np.unique(S)) == {-1, 1}
    # K_{2,m}: hubs 0 and m+1, friends 1..m
    for m in (1, 3, 6):
        n = m + 2
        A = np.zeros((n, n))
        for f in range(1, m + 1):
            A[0, f] = A[f, 0] = A[n - 1, f] = A[f, n - 1] = 1
        for J, h in [(0.4, 0.0), (0.3, 0.2)]:
            p = ising_probabilities(A, J, h)
            S = ising_states(n)
            nb, hub = common_friends_correlations(m, J, h)
            assert np.sum(p * S[:, 0] * S[:, 1]) == pytest.approx(nb, abs=1e-12)
            assert np.sum(p * S[:, 0] * S[:, n - 1]) == pytest.approx(hub, abs=1e-12)
    nb, hub = common_friends_correlations(40, 0.3)
    assert hub > nb                                   # many common friends beat a direct tie


def test_pair_joint_and_bad_inputs():
    A = np.array([[0, 1], [1, 0]])
    p = ising_probabilities(A, 0.5, 0.0)
    P = pair_joint(p, ising_states(2), 0, 1)
    assert P[0, 0] == pytest.approx(np.exp(0.5) / (2 * np.exp(0.5) + 2 * np.exp(-0.5)))
    with pytest.raises(ValueError, match="adjacency"):
        ising_probabilities(np.array([[0, 1], [0, 0]]), 0.5, 0.0)
    with pytest.raises(ValueError, match="tau"):
        comparison_joints(0.0)
    with pytest.raises(ValueError, match="link"):
        comparison_joints(1.0, "probit")
    with pytest.raises(ValueError, match="sigma_i"):
        expected_payment(P, P, [2, 0], [1, 0])


def test_population_world_and_payments():
    w = population_world(np.random.default_rng(1), 300, 12, 1.0)
    v = population_world(np.random.default_rng(1), 300, 12, 1.0)
    assert np.array_equal(w["bonus"], v["bonus"])           # deterministic
    ok = w["bonus"] >= 0
    assert ok.mean() > 0.9
    # peers really share the items the mechanism says they share
    for i in np.nonzero(ok)[0][:50]:
        a, b = w["pair"][i]
        assert a in w["pair"][w["bonus"][i]] and b in w["pair"][w["penalty"][i]]
    truth = population_payments(w, w["signal"])
    assert np.nanmean(truth) > 0
    flipped = population_payments(w, np.where(ok, w["signal"], w["signal"]) * 1)
    assert np.array_equal(np.isnan(truth), np.isnan(flipped))
    with pytest.raises(ValueError, match="reports"):
        population_payments(w, np.zeros(300))


def test_profile_table_matches_direct_payments():
    P_ij, P_ik = comparison_joints(0.7, "thurstone", 16)
    t = symmetric_profile_table(P_ij, P_ik, [0.0, 0.3, 1.0], penalty=0.6)
    for s, pay, bne in zip(t["sigma"], t["payment"], t["is_bne"]):
        assert pay == pytest.approx(expected_payment(P_ij, P_ik, s, s, 0.6), abs=1e-14)
        best = max(expected_payment(P_ij, P_ik, d, s, 0.6)
                   for d in itertools.product((0.0, 1.0), repeat=2))
        assert bne == (best <= pay + 1e-12)


def test_ising_truthful_bne_iff_uniform_dominance_and_moment_condition():
    # The chapter's old "ising-condition" claim compared these two computations of the same
    # conditional probabilities, so it could not fail: it is this unit test now. The mechanism's
    # gains from enumerated payoffs equal 2 (P[s_j = s | s] - P[s_k = s | s]) from the pair laws,
    # and (c_ij - c_ik + s (mu_j - mu_k)) / (1 + s mu_i) from the moments.
    rng = np.random.default_rng(7)
    n = 8
    S = ising_states(n)
    seen = set()
    for _ in range(6):
        G = nx.gnp_random_graph(n, 0.35, seed=int(rng.integers(2**31)))
        J, h = rng.uniform(-1, 1), rng.uniform(-0.8, 0.8)
        p = ising_probabilities(nx.to_numpy_array(G, nodelist=range(n)), J, h, S)
        mu = p @ S
        C = (S * p[:, None]).T @ S
        for i, j, k in [(0, 1, 2), (3, 5, 7), (6, 2, 4), (1, 7, 3)]:
            g = ising_deviation_gains(p, S, i, j, k)
            assert np.allclose(g, deviation_gains(pair_joint(p, S, i, j), pair_joint(p, S, i, k)),
                               atol=1e-12)
            sig = np.array([1.0, -1.0])
            assert np.allclose(g, (C[i, j] - C[i, k] + sig * (mu[j] - mu[k])) / (1 + sig * mu[i]),
                               atol=1e-12)
            margin = network_condition(C[i, j], C[i, k], mu[j], mu[k])
            assert (g.min() > 0) == (margin > 0)
            seen.add(margin > 0)
    assert seen == {True, False}                      # both sides of the condition were met
    with pytest.raises(ValueError, match="three different"):
        ising_deviation_gains(p, S, 0, 0, 1)


def test_ising_deviation_gains_with_a_smaller_stick():
    A = np.zeros((3, 3))
    A[0, 1] = A[1, 0] = 1                             # 0 - 1 friends, 2 isolated
    p = ising_probabilities(A, 0.6, 0.0)
    S = ising_states(3)
    g0 = ising_deviation_gains(p, S, 0, 1, 2, penalty=0.0)
    g1 = ising_deviation_gains(p, S, 0, 1, 2)
    # node 2 is independent and fair: the stick changes nothing in expectation for a flip
    assert np.allclose(g0, g1) and np.allclose(g1, np.tanh(0.6))


def test_forest_correlations_match_enumeration():
    rng = np.random.default_rng(11)
    n = 9
    S = ising_states(n)
    for J in (0.7, -0.5, 0.2):
        T = nx.from_prufer_sequence(rng.integers(0, n, size=n - 2).tolist())
        T.remove_edge(*list(T.edges)[int(rng.integers(n - 1))])      # a forest of two trees
        A = nx.to_numpy_array(T, nodelist=range(n))
        p = ising_probabilities(A, J, 0.0, S)
        C = (S * p[:, None]).T @ S
        assert np.allclose(forest_correlations(A, J), C, atol=1e-12)
    cycle = nx.to_numpy_array(nx.cycle_graph(4))
    with pytest.raises(ValueError, match="cycle"):
        forest_correlations(cycle, 0.5)
    with pytest.raises(ValueError, match="symmetric"):
        forest_correlations(np.array([[0, 1], [0, 0]]), 0.5)
    assert network_condition(0.5, 0.2) == pytest.approx(0.3)
    assert network_condition(0.5, 0.2, 0.3, -0.1) == pytest.approx(-0.1)


def test_unilateral_payments_match_a_full_report_profile():
    # agent i deviating alone: its own payment equals population_payments on the profile where
    # only i's report changed
    w = population_world(np.random.default_rng(3), 120, 10, 1.0)
    ok = np.nonzero(w["bonus"] >= 0)[0]
    for name, (rp, rm) in PURE_STRATEGIES.items():
        uni = unilateral_payments(w, name, 0.7)
        for i in ok[:25]:
            reports = w["signal"].copy()
            reports[i] = rp if w["signal"][i] == 1 else rm
            assert uni[i] == population_payments(w, reports, 0.7)[i]
    assert np.array_equal(unilateral_payments(w, "truthful"), population_payments(w, w["signal"]),
                          equal_nan=True)
    with pytest.raises(ValueError, match="unknown strategy"):
        unilateral_payments(w, "lie")
    with pytest.raises(ValueError, match="strategy must be"):
        unilateral_payments(w, (1, 0))


def test_best_deviation_truth_is_best_response_and_swapping_peers_breaks_it():
    w = population_world(np.random.default_rng(4), 2000, 20, 1.0)
    out = best_deviation(w)
    assert out["best_response"] == "truthful" and out["loss"] > 0.05
    assert out["best_deviation"] != "truthful"
    assert out["loss"] == pytest.approx(out["values"]["truthful"]
                                        - max(v for k, v in out["values"].items() if k != "truthful"))
    swapped = {**w, "bonus": w["penalty"], "penalty": w["bonus"],
               "bonus_sign": w["penalty_sign"], "penalty_sign": w["bonus_sign"]}
    bad = best_deviation(swapped)
    assert bad["best_response"] == "flip" and bad["loss"] < 0
