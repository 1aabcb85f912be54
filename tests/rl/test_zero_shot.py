import numpy as np
import pytest

from reprobook import rng
from reprobook.rl import zero_shot as zs
from reprobook.rl.gridworld import gridworld, maze
from reprobook.rl.mdp import evaluate, optimal_value
from reprobook.rl.successor import successor_measure

CORRIDOR = ("#######", "#S....#", "#######")


@pytest.fixture(scope="module")
def room():
    w = maze("easy", 0.9)
    s, a = zs.random_walk_data(w.mdp, 300, 30, rng(0, 0))
    return w, s, a


def test_random_walk_data_follows_the_dynamics(room):
    w, s, a = room
    assert s.shape == (300, 31) and a.shape == (300, 30)
    dest = w.mdp.P.argmax(axis=2)              # deterministic grid: the one successor
    assert np.array_equal(s[:, 1:], dest[s[:, :-1], a])
    with pytest.raises(ValueError, match="n_traj"):
        zs.random_walk_data(w.mdp, 0, 5, rng(0))


def test_empirical_model_is_exact_on_seen_pairs_and_stays_on_unseen():
    w = gridworld(CORRIDOR, 0.9)
    s = np.array([[0, 1, 2]])
    a = np.array([[2, 2]])                       # E, E
    P, n = zs.empirical_model(s, a, w.n_states, 5)
    assert np.allclose(P[0, 2], w.mdp.P[0, 2]) and np.allclose(P[1, 2], w.mdp.P[1, 2])
    assert n[0, 2] == 1 and n[0, 3] == 0 and P[0, 3, 0] == 1.0   # W never tried: stay
    with pytest.raises(ValueError, match="states must be"):
        zs.empirical_model(s[:, :2], a, w.n_states, 5)


def test_behaviour_successor_features_match_the_successor_measure(room):
    w, s, a = room
    S, A = w.n_states, 5
    uniform = np.full((S, A), 1 / A)
    psi = zs.behaviour_successor_features(w.mdp.P, uniform, np.eye(S), w.mdp.gamma)
    M = successor_measure(w.mdp, uniform)
    assert np.allclose(psi * (1 - w.mdp.gamma), M, atol=1e-10)
    # and the value of any state reward is w . psi
    r = zs.dense_rewards(S, 1, rng(0, 1))[0]
    assert np.allclose(psi @ r, evaluate(zs.state_reward_mdp(w.mdp, r), uniform))


def test_fit_reward_weights_is_exact_for_one_hot_features(room):
    w, s, a = room
    r = zs.dense_rewards(w.n_states, 1, rng(0, 2))[0]
    wt = zs.fit_reward_weights(np.eye(w.n_states)[s.ravel()], r[s.ravel()])
    assert np.allclose(wt, r)


def test_sf_greedy_reaches_a_goal_in_an_open_room(room):
    w, s, a = room
    S = w.n_states
    P, n = zs.empirical_model(s, a, S, 5)
    beta = zs.behaviour_policy(s, a, S, 5)
    r = zs.goal_rewards(S, 1, rng(0, 3))[0]
    act = zs.sf_greedy_actions(P, beta, np.eye(S), r, w.mdp.gamma, n)
    V = zs.policy_values(w.mdp, r, act)
    Vs, _ = optimal_value(zs.state_reward_mdp(w.mdp, r))
    assert np.all(V > 0.5 * Vs)                # every start reaches the goal
    with pytest.raises(ValueError, match="w must have shape"):
        zs.sf_greedy_actions(P, beta, np.eye(S), r[:-1], w.mdp.gamma)


def test_shooting_with_the_exact_model_steps_towards_the_goal():
    w = gridworld(CORRIDOR, 0.9)
    r = np.zeros(w.n_states)
    r[-1] = 1.0
    ro = zs.shooting_rollouts(w.mdp.P, 5, 4096, rng(0, 4))   # EEEE in ~6 sequences
    act = zs.shooting_actions(ro, r, 0.9)
    assert np.all(act[:-1] == 2)               # E everywhere left of the goal
    Vs, _ = optimal_value(zs.state_reward_mdp(w.mdp, r))
    assert np.allclose(zs.policy_values(w.mdp, r, np.where(act == 2, 2, 4)), Vs)
    with pytest.raises(ValueError, match="longer than the rollouts"):
        zs.shooting_actions(ro, r, 0.9, 6)


def test_noisy_model_and_normalized_return():
    P = maze("easy").mdp.P
    Q = zs.noisy_model(P, 0.05)
    assert np.allclose(Q.sum(axis=2), 1) and Q.min() > 0
    assert np.allclose(zs.normalized_return([1.0, 3.0], 1.0, 3.0), [0.0, 1.0])
    with pytest.raises(ValueError, match="optimal return"):
        zs.normalized_return(1.0, 2.0, 2.0)
    with pytest.raises(ValueError, match="noise"):
        zs.noisy_model(P, 1.5)


def test_task_generators():
    g = zs.goal_rewards(10, 4, rng(1))
    assert g.shape == (4, 10) and np.all(g.sum(1) == 1) and len(set(g.argmax(1))) == 4
    d = zs.dense_rewards(10, 3, rng(1))
    assert d.shape == (3, 10) and d.min() >= 0
    with pytest.raises(ValueError, match="distinct goals"):
        zs.goal_rewards(3, 4, rng(1))


def test_fourier_features_approximate_an_rbf_kernel_and_make_goal_bumps():
    w = maze("four-rooms")
    Phi = zs.fourier_features(w.cells, 4000, 0.3, rng(0, 5))
    assert Phi.shape == (w.n_states, 4000)
    x = 2.0 * (w.cells - w.cells.min(0)) / (w.cells.max(0) - w.cells.min(0)) - 1.0
    K = np.exp(-((x[:, None] - x[None]) ** 2).sum(-1) / (2 * 0.3 ** 2))
    assert np.abs(Phi @ Phi.T - K).max() < 0.12          # Monte Carlo error ~ 1/sqrt(4000)
    Phi = zs.fourier_features(w.cells, 32, 0.3, rng(0, 5))
    W = zs.goal_weights(Phi, 3, rng(0, 6))
    r = Phi @ W.T                                          # (S, 3) goal bumps
    goals = [np.flatnonzero((Phi == g).all(1))[0] for g in W]
    for j, g in enumerate(goals):                          # the bump stands out at its goal
        assert r[g, j] > r[:, j].mean() + 2 * r[:, j].std()
    assert zs.dense_weights(32, 2, rng(0)).shape == (2, 32)
    with pytest.raises(ValueError, match="lengthscale"):
        zs.fourier_features(w.cells, 8, 0.0, rng(0))
    with pytest.raises(ValueError, match="cells must have shape"):
        zs.fourier_features(w.cells[:, :1], 8, 0.3, rng(0))


def test_rollout_outcomes_average_to_the_successor_features():
    w = gridworld(CORRIDOR, 0.5)
    S = w.n_states
    uniform = np.full((S, 5), 0.2)
    psi = zs.rollout_outcomes(w.mdp, uniform, np.eye(S), 4000, 40, rng(0, 7))
    ref = zs.behaviour_successor_features(w.mdp.P, uniform, np.eye(S), 0.5)
    assert psi.shape == (S, 4000, S)
    assert np.abs(psi.mean(1) - ref).max() < 0.03
    with pytest.raises(ValueError, match="policy must be"):
        zs.rollout_outcomes(w.mdp, uniform[:, :4], np.eye(S), 2, 3, rng(0))
    # the first action is the one the rollout took: east from cell 0 lands on cell 1
    psi, first = zs.rollout_outcomes(w.mdp, uniform, np.eye(S), 50, 2, rng(0, 8), True)
    assert np.array_equal(psi[0, :, 1] > 0, first[0] == 2)
