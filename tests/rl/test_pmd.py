"""PMD and h-PMD: the h = 1 identity, the gamma^h guarantee, the lookahead mechanics."""
import math

import numpy as np
import pytest

from reprobook.rl.envs import ADVANCE, garnet, quit_or_advance_chain, quit_policy
from reprobook.rl.mdp import action_values, bellman_power, evaluate, optimal_value
from reprobook.rl.pmd import (euclidean_step, h_pmd, lookahead_q, pmd_step, project_simplex,
                              rate_bound, sampled_lookahead_q, step_divergence)

G = 0.9


def chain(n=8, margin=4.0, gamma=G):
    m = quit_or_advance_chain(n, gamma, margin * gamma ** -(n - 1))
    return m, quit_policy(m)


def c0_for(h, gamma=G, slack=1e-3):
    return slack * (1 - gamma) * (1 - gamma ** h)


# ----------------------------------------------------------------------------- h = 1 is PMD
def textbook_pmd_kl(P, r, gamma, pi0, c0, n_iters):
    """Standard PMD with the KL map, written from the definitions and sharing no code with
    reprobook.rl: Q^pi solved directly on state-action pairs, the update in probability space."""
    S, A = r.shape
    pi = pi0.copy()
    out = [np.log(pi)]
    for k in range(n_iters):
        # Q = r + gamma P Pi Q  with  (Pi Q)(s') = sum_a' pi(a'|s') Q(s', a')
        M = np.zeros((S * A, S * A))
        for s in range(S):
            for a in range(A):
                for t in range(S):
                    for b in range(A):
                        M[s * A + a, t * A + b] = P[s, a, t] * pi[t, b]
        q = np.linalg.solve(np.eye(S * A) - gamma * M, r.reshape(-1)).reshape(S, A)
        kl_to_greedy = np.array([-math.log(pi[s, q[s].argmax()]) for s in range(S)])
        eta = kl_to_greedy.max() / (c0 * gamma ** (2 * (k + 1)))
        w = pi * np.exp(eta * (q - q.max(axis=1, keepdims=True)))
        pi = w / w.sum(axis=1, keepdims=True)
        out.append(np.log(pi))
    return np.array(out)


@pytest.mark.parametrize("seed", [0, 1])
def test_h1_equals_textbook_pmd_kl(seed):
    m = garnet(6, 3, 3, G, seed)
    pi0 = np.random.default_rng(seed).dirichlet(np.ones(3), size=6)
    c0 = 5.0                                    # moderate steps: no probability underflows
    ref = textbook_pmd_kl(np.array(m.P), np.array(m.r), G, pi0, c0, 6)
    run = h_pmd(m, 1, 6, c0=c0, pi0=pi0)
    assert np.isfinite(ref).all()
    assert np.abs(run.log_policies - ref).max() < 1e-10


def test_lookahead_q_definition():
    m = garnet(10, 3, 4, G, 3)
    pi = np.random.default_rng(0).dirichlet(np.ones(3), size=10)
    V = evaluate(m, pi)
    # depth 1 is Q^pi, which satisfies Q = r + gamma P (sum_a pi Q)
    q1 = lookahead_q(m, V, 1)
    np.testing.assert_allclose(q1, m.r + G * m.P @ (pi * q1).sum(axis=1), atol=1e-12)
    for h in (2, 4):
        np.testing.assert_allclose(lookahead_q(m, V, h),
                                   action_values(m, bellman_power(m, V, h - 1)))
    with pytest.raises(ValueError, match="h must be an int >= 1"):
        lookahead_q(m, V, 0)


# ----------------------------------------------------------------------------- mirror steps
def test_kl_step_is_the_multiplicative_update():
    rng = np.random.default_rng(0)
    pi = rng.dirichlet(np.ones(4), size=5)
    q = rng.normal(size=(5, 4))
    eta = rng.random(5) * 3
    w = pi * np.exp(eta[:, None] * q)
    np.testing.assert_allclose(np.exp(pmd_step(np.log(pi), q, eta)),
                               w / w.sum(axis=1, keepdims=True), atol=1e-14)


def test_kl_step_survives_huge_steps():
    q = np.array([[0.0, 1.0, 1.0 - 1e-9]])
    lp = pmd_step(np.log(np.full((1, 3), 1 / 3)), q, 1e40)
    assert np.isfinite(lp).all() and abs(np.exp(lp[0, 1]) - 1) < 1e-12
    for bad in (-1.0, float("nan")):
        with pytest.raises(ValueError, match="eta must be"):
            pmd_step(lp, q, bad)
    with pytest.raises(ValueError, match="both have shape"):
        pmd_step(lp, q[:, :2], 1.0)


def test_infinite_step_is_the_greedy_limit():
    # action 2 was crushed to the floor; now it is greedy, and an infinite step must move there
    lp = np.log(np.array([[0.5, 0.5, 1e-300]]))
    lp[0, 2] = -1e300
    q = np.array([[0.0, 0.5, 1.0]])
    out = pmd_step(lp, q, np.inf)
    assert out[0, 2] == 0.0 and np.all(out[0, :2] == -1e300)
    # ties share the mass in proportion to pi, as the limit of the finite update does
    tie = pmd_step(np.log(np.array([[0.2, 0.3, 0.5]])), np.array([[1.0, 1.0, 0.0]]), np.inf)
    np.testing.assert_allclose(np.exp(tie), [[0.4, 0.6, 0.0]], atol=1e-15)
    np.testing.assert_allclose(euclidean_step(np.array([[0.2, 0.3, 0.5]]),
                                              np.array([[1.0, 1.0, 0.0]]), np.inf),
                               [[0.45, 0.55, 0.0]], atol=1e-15)


def test_long_chain_with_tiny_slack_stays_finite():
    """On a long chain, adaptive steps overflow to inf; the run must stay exact and finite."""
    m, pi0 = chain(80)
    for mirror in ("kl", "euclidean"):
        run = h_pmd(m, 1, 82, c0=c0_for(1), pi0=pi0, mirror=mirror)
        assert np.all(np.isfinite(run.gaps)) and run.gaps[-1] == 0.0
        assert np.all(run.gaps <= run.bound() + 1e-10)
        if mirror == "kl":
            assert np.isinf(run.etas).any()      # the greedy limit was exercised


def test_simplex_projection():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(50, 5)) * 3
    p = project_simplex(x)
    np.testing.assert_allclose(p.sum(axis=1), 1.0, atol=1e-12)
    assert np.all(p >= 0)
    # optimality: p = max(x - theta, 0) for one theta per row, the KKT form of the projection
    for xi, pi in zip(x, p):
        theta = (xi - pi)[pi > 0]
        np.testing.assert_allclose(theta, theta[0], atol=1e-12)
        assert np.all(xi[pi == 0] <= theta[0] + 1e-12)
    simplex_point = rng.dirichlet(np.ones(5), size=3)
    np.testing.assert_allclose(project_simplex(simplex_point), simplex_point, atol=1e-12)
    greedy = euclidean_step(simplex_point, np.eye(5)[:3], 1e30)
    np.testing.assert_allclose(greedy, np.eye(5)[:3])


def test_step_divergence_picks_the_closest_greedy_policy():
    pi = np.array([[0.2, 0.5, 0.3]])
    q = np.array([[1.0, 0.0, 1.0]])            # actions 0 and 2 tie; pi favours 2
    assert step_divergence(q, pi, mirror="kl")[0] == pytest.approx(-math.log(0.3))
    assert step_divergence(q, pi, mirror="euclidean")[0] == pytest.approx(
        0.5 * (0.2 ** 2 + 0.5 ** 2 + 0.7 ** 2))


# ----------------------------------------------------------------------------- the guarantee
@pytest.mark.parametrize("mirror", ["kl", "euclidean"])
@pytest.mark.parametrize("h", [1, 2, 3, 5])
def test_gamma_h_rate_on_the_tight_chain(h, mirror):
    m, pi0 = chain()
    run = h_pmd(m, h, 12, c0=c0_for(h), pi0=pi0, mirror=mirror)
    assert np.all(run.gaps <= run.bound() + 1e-10)
    # the per-step contraction behind it
    assert np.all(run.gaps[1:] <= G ** h * run.gaps[:-1] + run.c / (1 - G) + 1e-10)


@pytest.mark.parametrize("h", [2, 3, 5])
def test_a_shallower_lookahead_breaks_the_bound(h):
    """The planted bug: claim depth h (step sizes, bound) but compute depth h - 1."""
    m, pi0 = chain()
    run = h_pmd(m, h, 12, c0=c0_for(h), pi0=pi0, lookahead=h - 1)
    assert run.lookahead == h - 1 and run.h == h
    assert np.any(run.gaps > run.bound() + 1e-10)


@pytest.mark.parametrize("h", [1, 2, 3, 4])
def test_chain_needs_ceil_n_over_h_iterations(h):
    n = 8
    m, pi0 = chain(n)
    run = h_pmd(m, h, n + 2, c0=c0_for(h), pi0=pi0)
    advancing = (run.policies.argmax(axis=2)[:, :n] == ADVANCE).all(axis=1)
    assert advancing.argmax() == math.ceil(n / h)
    assert run.backups[1] == h


def test_rate_bound_on_garnet_and_a_constant_step_breaks_it():
    m = garnet(30, 4, 5, G, 11)
    for h in (1, 3):
        run = h_pmd(m, h, 8, c0=c0_for(h))
        assert np.all(run.gaps <= run.bound() + 1e-10)
        np.testing.assert_allclose(run.bound(), rate_bound(run.gaps[0], G, h, c0_for(h), 8))
    cm, pi0 = chain(12)
    slow = h_pmd(cm, 1, 20, step=1.0, pi0=pi0)
    assert np.any(slow.gaps > rate_bound(slow.gaps[0], G, 1, c0_for(1), 20) + 1e-10)


# ----------------------------------------------------------------------------- inexact
def test_sampling_is_exact_on_a_deterministic_mdp():
    m, pi0 = chain(6)
    V = evaluate(m, pi0)
    for h in (1, 2, 3):
        q, calls = sampled_lookahead_q(m, V, h, 3, np.random.default_rng(0))
        np.testing.assert_allclose(q, lookahead_q(m, V, h), atol=1e-12)
        S, A, k = m.n_states, m.n_actions, 3
        assert calls == S * A * k * sum((A * k) ** j for j in range(h))


def test_sampled_lookahead_converges_to_the_exact_one():
    m = garnet(6, 2, 3, G, 2)
    V = np.random.default_rng(0).normal(size=6)
    exact = lookahead_q(m, V, 2)
    err = [np.abs(sampled_lookahead_q(m, V, 2, k, np.random.default_rng(1))[0] - exact).max()
           for k in (4, 64)]
    assert err[1] < err[0] and err[1] < 0.2


def test_inexact_run_is_seeded_and_obeys_its_per_step_bound():
    m = garnet(8, 2, 3, G, 5)
    runs = [h_pmd(m, 2, 6, c0=c0_for(2), samples=8, rng=np.random.default_rng(9))
            for _ in range(2)]
    np.testing.assert_array_equal(runs[0].gaps, runs[1].gaps)
    r = runs[0]
    assert r.backups[-1] == 0 and r.samples[-1] > 0 and np.all(r.q_errors > 0)
    rhs = G ** 2 * r.gaps[:-1] + (r.c + 2 * r.q_errors) / (1 - G)
    assert np.all(r.gaps[1:] <= rhs + 1e-10)


# ----------------------------------------------------------------------------- arguments
@pytest.mark.parametrize("kwargs, match", [
    (dict(h=0), "h must be an int >= 1"),
    (dict(lookahead=0), "lookahead must be an int >= 1"),
    (dict(mirror="l2"), "mirror must be one of"),
    (dict(c0=None), "needs c0 > 0"),
    (dict(c0=-1.0), "needs c0 > 0"),
    (dict(step="fast"), "step must be 'adaptive' or a positive number"),
    (dict(step=None), "step must be 'adaptive' or a positive number"),
    (dict(step=-1.0), "step must be 'adaptive' or a positive number"),
    (dict(samples=4), "needs rng"),
    (dict(n_iters=-1), "n_iters must be"),
    (dict(pi0=np.tile([1.0, 0.0], (9, 1))), "positive probability"),
])
def test_bad_arguments_are_named(kwargs, match):
    m, _ = chain()
    args = dict(h=2, n_iters=3, c0=1e-3)
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        h_pmd(m, **args)
    with pytest.raises(TypeError, match="TabularMDP"):
        h_pmd("mdp", 1, 1, c0=1.0)


def test_v_star_reuse_gives_the_same_run():
    m = garnet(10, 2, 3, G, 1)
    v = optimal_value(m)[0]
    a, b = h_pmd(m, 2, 4, c0=1e-3), h_pmd(m, 2, 4, c0=1e-3, v_star=v)
    np.testing.assert_array_equal(a.gaps, b.gaps)


def test_rollout_values_estimate_the_policy_value():
    from reprobook.rl.envs import garnet
    from reprobook.rl.mdp import evaluate
    from reprobook.rl.pmd import rollout_values
    from reprobook import rng as rrng
    mdp = garnet(6, 2, 3, 0.8, rrng(0, 1))
    pi = rrng(0, 2).dirichlet(np.ones(2), size=6)
    v, calls = rollout_values(mdp, pi, np.arange(6), 4000, 60, rrng(0, 3))
    assert calls == 6 * 4000 * 60
    np.testing.assert_allclose(v, evaluate(mdp, pi), atol=0.05)
    with pytest.raises(ValueError, match="n_rollouts"):
        rollout_values(mdp, pi, np.arange(6), 0, 10, rrng(0, 3))


def test_linear_lookahead_is_exact_in_a_linear_mdp_with_many_samples():
    from reprobook.rl.envs import linear_mdp
    from reprobook.rl.mdp import evaluate
    from reprobook.rl.pmd import linear_lookahead_q, lookahead_q
    from reprobook import rng as rrng
    mdp, phi = linear_mdp(30, 2, 3, 0.7, rrng(1, 0))
    np.testing.assert_allclose(mdp.P.sum(axis=2), 1.0)
    pi = np.full((30, 2), 0.5)
    anchors = np.array([[s, a] for s in range(6) for a in range(2)])
    exact = lookahead_q(mdp, evaluate(mdp, pi), 2)
    q, calls = linear_lookahead_q(mdp, phi, anchors, pi, 2, 400, (20, 40), rrng(1, 1))
    assert calls == 12 * 400 * (20 * 40 + 2)
    assert np.abs(q - exact).max() < 0.1
    with pytest.raises(ValueError, match="span"):
        linear_lookahead_q(mdp, phi, np.array([[0, 0]] * 4), pi, 2, 4, (1, 5), rrng(1, 1))


def test_samples_per_iteration_and_h_pmd_counts():
    from reprobook.rl.envs import garnet
    from reprobook.rl.pmd import samples_per_iteration
    from reprobook import rng as rrng
    assert samples_per_iteration(10, 2, 1, 4) == 80
    assert samples_per_iteration(10, 2, 2, 4, (2, 40)) == 10 * 2 * 4 * 9 + 10 * 2 * 40
    mdp = garnet(10, 2, 3, 0.9, rrng(2, 0))
    run = h_pmd(mdp, 2, 3, c0=1e-3, samples=4, rollouts=(2, 40), rng=rrng(2, 1))
    assert run.samples[-1] == 3 * samples_per_iteration(10, 2, 2, 4, (2, 40))
    with pytest.raises(ValueError, match="samples=m"):
        h_pmd(mdp, 2, 3, c0=1e-3, rollouts=(2, 40))
