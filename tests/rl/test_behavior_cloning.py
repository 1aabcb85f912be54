"""LogLossBC: the batched Newton solver finds the regularised MLE; the two policy classes."""
import numpy as np
import pytest
from scipy.optimize import minimize

from reprobook.rl.behavior_cloning import (behavior_cloning, fit_multinomial_logistic,
                                           log_linear_policy)


def _data(seed=0, B=3, N=40, d=3, A=3):
    g = np.random.default_rng(seed)
    X = g.standard_normal((B, N, d))
    W = g.standard_normal((A, d))
    logits = np.einsum("bnd,ad->bna", X, W)
    p = np.exp(logits - logits.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    y = (p.cumsum(-1) < g.random((B, N, 1))).sum(-1)
    return X, y, A


def test_newton_matches_an_independent_lbfgs_fit():
    X, y, A = _data()
    lam = 0.1
    theta, info = fit_multinomial_logistic(X, y, A, l2=lam)
    assert info["converged"]
    for b in range(X.shape[0]):
        def f(t):
            z = X[b] @ t.reshape(A, -1).T
            return (np.log(np.exp(z).sum(1)) - z[np.arange(len(z)), y[b]]).sum() + lam / 2 * t @ t
        ref = minimize(f, np.zeros(A * X.shape[2]), method="BFGS", options=dict(gtol=1e-10)).x
        np.testing.assert_allclose(theta[b].ravel(), ref, atol=1e-5)


def test_separable_data_from_a_deterministic_expert_gives_a_sharp_policy():
    g = np.random.default_rng(1)
    X = g.standard_normal((1, 200, 2))
    y = (X[0, :, 0] > 0).astype(int)[None]
    theta, info = fit_multinomial_logistic(X, y, 2, l2=1e-6)
    assert info["converged"]
    pi = log_linear_policy(theta[0], X[0])
    assert np.all(pi[np.arange(200), y[0]] > 0.5)
    assert np.mean(pi[np.arange(200), y[0]]) > 0.99


def test_shared_and_per_step_classes():
    g = np.random.default_rng(2)
    feats = g.standard_normal((10, 3))
    states = g.integers(0, 10, size=(5, 4))
    actions = (feats[states, 0] > 0).astype(int)
    th, _ = behavior_cloning(feats, states, actions, 2, shared=True)
    thn, _ = behavior_cloning(feats, states, actions, 2, shared=False)
    assert th.shape == (2, 3) and thn.shape == (4, 2, 3)
    assert log_linear_policy(thn, feats).shape == (4, 10, 2)
    # the per-step fit of step h is the shared fit on step h's pairs alone
    one, _ = behavior_cloning(feats, states[:, [2]], actions[:, [2]], 2, shared=True)
    np.testing.assert_allclose(thn[2], one, atol=1e-6)


def test_bad_inputs_are_named():
    X, y, A = _data()
    with pytest.raises(ValueError, match="X must have shape"):
        fit_multinomial_logistic(X[0], y, A)
    with pytest.raises(ValueError, match="y must hold integer actions"):
        fit_multinomial_logistic(X, y + A, A)
    with pytest.raises(ValueError, match="l2 must be"):
        fit_multinomial_logistic(X, y, A, l2=0.0)
    with pytest.raises(ValueError, match="states must be integer indices"):
        behavior_cloning(np.zeros((3, 2)), np.full((2, 2), 5), np.zeros((2, 2), int), 2)
    with pytest.raises(ValueError, match="theta must have shape"):
        log_linear_policy(np.zeros((2, 5)), np.zeros((3, 2)))
