"""Dueling bandits: the Bradley–Terry user, D-TS, clustered D-TS, regret bookkeeping."""
import numpy as np
import pytest

from reprobook.bandits.dueling import (BradleyTerryUser, ClusteredDoubleThompson, DoubleThompson,
                                       UniformDuels, copeland_winner, run_duels)


def _user(n=12, temperature=0.05, seed=0):
    u = np.random.default_rng(seed).uniform(-1, 0, n)
    return BradleyTerryUser(u, temperature)


def test_bradley_terry_matrix_is_a_preference_matrix():
    user = _user()
    P = user.P
    np.testing.assert_allclose(P + P.T, 1.0, atol=1e-12)
    assert np.all(np.diag(P) == 0.5)
    assert np.all(P[user.best, np.arange(user.n_arms) != user.best] > 0.5)  # Condorcet winner
    assert user.regret(user.best, user.best) == 0.0
    worst = int(np.argmin(user.utilities))
    assert user.regret(worst, worst) == pytest.approx(P[user.best, worst] - 0.5)


def test_duel_frequencies_match_the_preference_matrix():
    user = BradleyTerryUser(np.array([0.0, -0.05]), 0.05)
    rng = np.random.default_rng(1)
    wins = np.mean([user.duel(0, 1, rng) for _ in range(20000)])
    assert wins == pytest.approx(user.P[0, 1], abs=0.015)


def test_bad_inputs_are_named():
    with pytest.raises(ValueError, match="temperature"):
        BradleyTerryUser(np.zeros(3), 0.0)
    with pytest.raises(ValueError, match="1-D"):
        BradleyTerryUser(np.zeros((2, 2)))
    with pytest.raises(ValueError, match="cluster ids"):
        ClusteredDoubleThompson(np.array([0, 2, 2]))
    with pytest.raises(ValueError, match="arms"):
        run_duels(DoubleThompson(3), _user(4), 10, np.random.default_rng(0))


def test_dts_finds_the_condorcet_winner_with_sublinear_regret():
    user = _user(8)
    R = run_duels(DoubleThompson(8), user, 3000, np.random.default_rng(2))
    alg_rec = DoubleThompson(8)
    run_duels(alg_rec, user, 3000, np.random.default_rng(2))
    assert alg_rec.recommend() == user.best
    # Regret per round in the second half is far below uniform play's.
    late = (R[-1] - R[1499]) / 1500
    U = run_duels(UniformDuels(8), user, 3000, np.random.default_rng(2))
    assert late < 0.1 * (U[-1] / 3000)


def test_dts_is_deterministic_given_the_generator():
    user = _user(6)
    a = run_duels(DoubleThompson(6), user, 300, np.random.default_rng(5))
    b = run_duels(DoubleThompson(6), user, 300, np.random.default_rng(5))
    np.testing.assert_array_equal(a, b)


def test_clustered_dts_plays_inside_the_winning_cluster_and_recommends_the_winner():
    # Two well separated groups: the best arm sits in cluster 1.
    u = np.array([-0.9, -0.8, -0.85, -0.1, 0.0, -0.05])
    labels = np.array([0, 0, 0, 1, 1, 1])
    user = BradleyTerryUser(u, 0.05)
    alg = ClusteredDoubleThompson(labels)
    R = run_duels(alg, user, 2000, np.random.default_rng(3))
    assert alg.recommend() == user.best == 4
    assert alg.inner[1].W.sum() > 10 * alg.inner[0].W.sum()
    assert R[-1] < run_duels(UniformDuels(6), user, 2000, np.random.default_rng(3))[-1] / 5


def test_one_cluster_per_arm_is_dts_over_clusters():
    # With singleton clusters, the inner bandits never learn anything (self-duels only).
    user = _user(5)
    alg = ClusteredDoubleThompson(np.arange(5))
    run_duels(alg, user, 500, np.random.default_rng(4))
    assert all(b.W.sum() == 0 for b in alg.inner)
    assert alg.recommend() == user.best


def test_copeland_winner_counts_pairwise_majorities():
    W = np.array([[0, 3, 1], [1, 0, 4], [5, 0, 0]], dtype=float)
    # p01 = .75, p02 = 1/6, p12 = 1: arm 1 beats 2, arm 0 beats 1, arm 2 beats 0 -> a cycle; tie -> 0
    assert copeland_winner(W) == 0
    W[0, 2] = 10  # now arm 0 beats both
    assert copeland_winner(W) == 0
    assert copeland_winner(np.zeros((3, 3))) == 0
