r"""Behaviour cloning with the logarithmic loss (LogLossBC) for log-linear policies.

A log-linear policy over features :math:`\phi(s)\in\mathbb{R}^d` and :math:`A` actions is
:math:`\pi_\theta(a|s) = \exp(\theta_a\cdot\phi(s)) / \sum_b \exp(\theta_b\cdot\phi(s))` with
:math:`\theta\in\mathbb{R}^{A\times d}`. Two classes over a horizon :math:`H`:

* **stationary** (parameter sharing): one :math:`\theta` for every step, :math:`Ad` parameters;
* **non-stationary** (no sharing): one :math:`\theta_h` per step, :math:`HAd` parameters.

LogLossBC is the (L2-regularised) maximum-likelihood estimate on the expert's state-action pairs
:math:`(s^i_h, a^i_h)` of :math:`n` trajectories:

.. math:: \hat\theta = \arg\min_\theta \sum_{i,h} -\log\pi_{\theta_{(h)}}(a^i_h | s^i_h)
          + \tfrac{\lambda}{2}\lVert\theta\rVert^2 ,

where :math:`\theta_{(h)} = \theta` (shared) or :math:`\theta_h` (per step). The objective is
strictly convex (:math:`\lambda > 0`), so "the" MLE is well defined even on separable data (a
deterministic expert always gives separable data, and the unregularised MLE would run off to
infinity). The per-step problems of the non-stationary class are independent, one block each.

:func:`fit_multinomial_logistic` solves a batch of such problems at once by damped Newton: the
gradient is :math:`\sum_i (p_i - e_{y_i})\otimes x_i + \lambda\theta` and the Hessian
:math:`\sum_i (\mathrm{diag}\,p_i - p_ip_i^\top)\otimes x_ix_i^\top + \lambda I`; a backtracking
(Armijo) line search keeps every step a descent step, and it stops when the Newton decrement
:math:`g^\top H^{-1} g / 2` of every block is below ``tol``: the optimum to that precision, not an
iteration budget that could favour one class. The batches are small: run many fits inside one
``with reprobook.threads.single_threaded_blas():`` block.
"""
from __future__ import annotations

import numpy as np


__all__ = ["log_linear_policy", "fit_multinomial_logistic", "behavior_cloning", "FitInfo"]


def _logsoftmax(z: np.ndarray) -> np.ndarray:
    m = z.max(axis=-1, keepdims=True)
    return z - m - np.log(np.exp(z - m).sum(axis=-1, keepdims=True))


def log_linear_policy(theta, features) -> np.ndarray:
    """The policy table of ``theta``: (A, d) gives (S, A); (H, A, d) gives (H, S, A)."""
    theta = np.asarray(theta, dtype=np.float64)
    features = np.asarray(features, dtype=np.float64)
    if features.ndim != 2:
        raise ValueError(f"features must have shape (S, d), got {features.shape}")
    if theta.ndim not in (2, 3) or theta.shape[-1] != features.shape[1]:
        raise ValueError(f"theta must have shape (A, d) or (H, A, d) with d = {features.shape[1]}, "
                         f"got {theta.shape}")
    logits = np.einsum("...ad,sd->...sa", theta, features)
    return np.exp(_logsoftmax(logits))


class FitInfo(dict):
    """What a fit did: ``iterations``, the largest final ``decrement`` and ``converged``."""


def _objective(theta, X, Y1, l2):
    # theta (B, A, d), X (B, N, d), Y1 one-hot (B, N, A); returns (B,) losses and log-probs
    logp = _logsoftmax(np.einsum("bnd,bad->bna", X, theta))
    return -(Y1 * logp).sum(axis=(1, 2)) + 0.5 * l2 * (theta ** 2).sum(axis=(1, 2)), logp


def fit_multinomial_logistic(X, y, n_actions: int, l2: float = 1e-4, tol: float = 1e-10,
                             max_iter: int = 200) -> tuple[np.ndarray, FitInfo]:
    r"""Batched L2-regularised multinomial logistic regression by damped Newton.

    ``X`` (B, N, d) and integer labels ``y`` (B, N) in ``[0, n_actions)``: ``B`` independent
    problems of ``N`` examples each. Returns ``theta`` (B, A, d) and a :class:`FitInfo`.
    """
    X = np.asarray(X, dtype=np.float64)
    y = np.asarray(y)
    if X.ndim != 3:
        raise ValueError(f"X must have shape (B, N, d), got {X.shape}")
    if y.shape != X.shape[:2]:
        raise ValueError(f"y must have shape (B, N) = {X.shape[:2]}, got {y.shape}")
    if isinstance(n_actions, bool) or not isinstance(n_actions, (int, np.integer)) or n_actions < 2:
        raise ValueError(f"n_actions must be an int >= 2, got {n_actions!r}")
    if not np.issubdtype(y.dtype, np.integer) or (y.size and (y.min() < 0 or y.max() >= n_actions)):
        raise ValueError(f"y must hold integer actions in [0, {n_actions})")
    if not (isinstance(l2, (int, float, np.floating)) and np.isfinite(l2) and l2 > 0):
        raise ValueError(f"l2 must be a finite number > 0 (it makes the MLE unique), got {l2!r}")
    if not np.all(np.isfinite(X)):
        raise ValueError("X has non-finite entries")
    B, N, d = X.shape
    A = int(n_actions)
    Y1 = np.zeros((B, N, A))
    np.put_along_axis(Y1, y[..., None].astype(np.int64), 1.0, axis=2)
    theta = np.zeros((B, A, d))
    f, logp = _objective(theta, X, Y1, l2)
    eye = np.eye(A * d)
    active = np.ones(B, dtype=bool)
    dec = np.full(B, np.inf)
    it = 0
    for it in range(1, max_iter + 1):
        p = np.exp(logp)
        g = np.einsum("bna,bnd->bad", p - Y1, X) + l2 * theta
        W = p[..., :, None] * (np.eye(A) - p[..., None, :])   # diag(p) - p p^T, (B, N, A, A)
        Hs = np.einsum("bnac,bnj,bnk->bajck", W, X, X).reshape(B, A * d, A * d) + l2 * eye
        gf = g.reshape(B, A * d)
        step = np.linalg.solve(Hs, gf[..., None])[..., 0]
        dec = 0.5 * (gf * step).sum(axis=1)
        active = dec > tol
        if not active.any():
            break
        step = step.reshape(B, A, d)
        t = np.ones(B)
        accepted = ~active                                  # converged blocks do not move
        new_theta, new_f, new_logp = theta.copy(), f.copy(), logp.copy()
        for _ in range(60):
            trial = theta - t[:, None, None] * step
            ft, lp = _objective(trial, X, Y1, l2)
            ok = ~accepted & (ft <= f - 1e-4 * t * 2 * dec)
            new_theta[ok], new_f[ok], new_logp[ok] = trial[ok], ft[ok], lp[ok]
            accepted |= ok
            if accepted.all():
                break
            t = np.where(accepted, t, 0.5 * t)
        theta, f, logp = new_theta, new_f, new_logp
    return theta, FitInfo(iterations=it, decrement=float(dec.max()), converged=bool(not active.any()))


def behavior_cloning(features, states, actions, n_actions: int, *, shared: bool = True,
                     l2: float = 1e-4, tol: float = 1e-10, max_iter: int = 200
                     ) -> tuple[np.ndarray, FitInfo]:
    """LogLossBC on expert trajectories ``states``, ``actions`` (n, H) (integer state indices into
    ``features`` (S, d)). ``shared=True`` fits the stationary class and returns ``theta`` (A, d);
    ``shared=False`` fits one ``theta_h`` per step on that step's ``n`` pairs and returns (H, A, d).
    """
    features = np.asarray(features, dtype=np.float64)
    states, actions = np.asarray(states), np.asarray(actions)
    if features.ndim != 2:
        raise ValueError(f"features must have shape (S, d), got {features.shape}")
    if states.ndim != 2 or actions.shape != states.shape:
        raise ValueError(f"states and actions must both have shape (n, H); got {states.shape} and "
                         f"{actions.shape}")
    if not np.issubdtype(states.dtype, np.integer) or states.min() < 0 \
            or states.max() >= features.shape[0]:
        raise ValueError(f"states must be integer indices into features (0..{features.shape[0] - 1})")
    X = features[states]                                    # (n, H, d)
    if shared:
        theta, info = fit_multinomial_logistic(X.reshape(1, -1, X.shape[-1]), actions.reshape(1, -1),
                                               n_actions, l2, tol, max_iter)
        return theta[0], info
    return fit_multinomial_logistic(X.transpose(1, 0, 2), actions.T, n_actions, l2, tol, max_iter)
