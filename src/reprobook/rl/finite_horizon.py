r"""Finite-horizon tabular MDPs: exact evaluation by dynamic programming, occupancies, sampling.

An episode lasts :math:`H` steps. The MDP is a transition tensor :math:`P\in\mathbb{R}^{S\times A
\times S}`, a reward table :math:`r\in\mathbb{R}^{S\times A}` (or one table per step, shape
``(H, S, A)``) and an initial distribution :math:`d_1\in\Delta_S`; no discount. A policy is either
*stationary*, one ``(S, A)`` table used at every step, or *non-stationary*, one table per step,
shape ``(H, S, A)``.

The two dynamic programmes, which must agree (the tests check it):

* **forward** (occupancies): :math:`d_{h+1}(s') = \sum_{s,a} d_h(s)\,\pi_h(a|s)\,P(s'|s,a)`; the
  state-action occupancy of step :math:`h` is :math:`\mu_h(s,a) = d_h(s)\pi_h(a|s)` and the value is
  :math:`J(\pi) = \sum_h \langle \mu_h, r_h\rangle`;
* **backward** (values): :math:`V_{H+1} = 0`, :math:`Q_h = r_h + P V_{h+1}`,
  :math:`V_h(s) = \sum_a \pi_h(a|s) Q_h(s,a)`, and :math:`J(\pi) = \langle d_1, V_1\rangle`.

Both cost :math:`O(H S^2 A)` and are exact in float64: there is no rollout noise in a value
computed here. :func:`sample_trajectories` draws episodes, for data sets and for tests that compare
Monte Carlo returns with the exact value.

These are loops of small matrix-vector products, where BLAS threads cost more than they save on a
busy machine (see :mod:`reprobook.threads`): wrap a whole experiment in
``with single_threaded_blas():`` rather than each call (entering the limit costs milliseconds).
"""
from __future__ import annotations

import numpy as np


__all__ = ["check_finite_mdp", "policy_per_step", "occupancies", "state_distributions",
           "backward_values", "finite_horizon_value", "sample_trajectories"]

_TOL = 1e-9


def _array(name: str, x, ndim: int | tuple[int, ...]) -> np.ndarray:
    try:
        a = np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be an array of numbers, got {type(x).__name__}") from None
    dims = (ndim,) if isinstance(ndim, int) else ndim
    if a.ndim not in dims:
        raise ValueError(f"{name} must have {' or '.join(map(str, dims))} dimensions, "
                         f"got shape {a.shape}")
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{name} has non-finite entries (nan or inf)")
    return a


def _horizon(H) -> int:
    if isinstance(H, bool) or not isinstance(H, (int, np.integer)) or H < 1:
        raise ValueError(f"H (the horizon) must be an int >= 1, got {H!r}")
    return int(H)


def _distribution(name: str, p, axis: int = -1) -> None:
    if np.any(p < 0):
        raise ValueError(f"{name} has negative probabilities")
    worst = np.abs(p.sum(axis=axis) - 1.0).max() if p.size else 0.0
    if worst > _TOL:
        raise ValueError(f"{name} must sum to 1 along its last axis; the worst is off by "
                         f"{worst:.3g}")


def check_finite_mdp(P, d1) -> tuple[np.ndarray, np.ndarray]:
    """Validate a transition tensor ``P`` (S, A, S) and an initial distribution ``d1`` (S,)."""
    P = _array("P", P, 3)
    S, A, S2 = P.shape
    if S == 0 or A == 0 or S2 != S:
        raise ValueError(f"P must have shape (S, A, S) with S, A >= 1, got {P.shape}")
    _distribution("P(s, a, .)", P)
    d1 = _array("d1", d1, 1)
    if d1.shape != (S,):
        raise ValueError(f"d1 must have shape (S,) = ({S},), got {d1.shape}")
    _distribution("d1", d1)
    return P, d1


def policy_per_step(pi, H: int, S: int, A: int) -> np.ndarray:
    """A policy as one ``(S, A)`` table per step, shape (H, S, A); a stationary one is repeated
    (as a read-only broadcast view, so no copy is made)."""
    H = _horizon(H)
    pi = _array("pi", pi, (2, 3))
    if pi.ndim == 2:
        if pi.shape != (S, A):
            raise ValueError(f"a stationary policy must have shape (S, A) = {(S, A)}, got {pi.shape}")
        _distribution("pi", pi)
        return np.broadcast_to(pi, (H, S, A))
    if pi.shape != (H, S, A):
        raise ValueError(f"a non-stationary policy must have shape (H, S, A) = {(H, S, A)}, "
                         f"got {pi.shape}")
    _distribution("pi", pi)
    return pi


def _rewards(r, H: int, S: int, A: int) -> np.ndarray:
    r = _array("r", r, (2, 3))
    if r.ndim == 2:
        if r.shape != (S, A):
            raise ValueError(f"r must have shape (S, A) = {(S, A)} or (H, S, A), got {r.shape}")
        return np.broadcast_to(r, (H, S, A))
    if r.shape != (H, S, A):
        raise ValueError(f"per-step rewards must have shape (H, S, A) = {(H, S, A)}, got {r.shape}")
    return r


def occupancies(P, d1, pi, H: int) -> np.ndarray:
    r"""State-action occupancies :math:`\mu_h(s, a) = \Pr^\pi(s_h = s, a_h = a)`, shape (H, S, A).

    Forward dynamic programming from ``d1``; each :math:`\mu_h` sums to one.
    """
    P, d = check_finite_mdp(P, d1)
    S, A, _ = P.shape
    pis = policy_per_step(pi, H, S, A)
    mu = np.empty((len(pis), S, A))
    P2 = P.reshape(S * A, S)
    for h, p in enumerate(pis):
        mu[h] = d[:, None] * p
        d = mu[h].reshape(-1) @ P2
    return mu


def state_distributions(P, d1, pi, H: int) -> np.ndarray:
    r"""State distributions :math:`d_h` for :math:`h = 1..H+1`, shape (H+1, S) (the last one is
    where the episode ends)."""
    P, _ = check_finite_mdp(P, d1)
    mu = occupancies(P, d1, pi, H)
    S = P.shape[0]
    last = mu[-1].reshape(-1) @ P.reshape(-1, S)
    return np.vstack([mu.sum(axis=2), last[None]])


def backward_values(P, r, pi, H: int) -> tuple[np.ndarray, np.ndarray]:
    r"""Backward dynamic programming: ``(V, Q)`` with ``V`` of shape (H+1, S) (``V[H] = 0``) and
    ``Q`` of shape (H, S, A); index ``h`` is step ``h + 1`` of the episode."""
    P = _array("P", P, 3)
    S, A, S2 = P.shape
    if S2 != S:
        raise ValueError(f"P must have shape (S, A, S), got {P.shape}")
    _distribution("P(s, a, .)", P)
    H = _horizon(H)
    pis = policy_per_step(pi, H, S, A)
    rs = _rewards(r, H, S, A)
    V = np.zeros((H + 1, S))
    Q = np.empty((H, S, A))
    for h in range(H - 1, -1, -1):
        Q[h] = rs[h] + P @ V[h + 1]
        V[h] = (pis[h] * Q[h]).sum(axis=1)
    return V, Q


def finite_horizon_value(P, r, d1, pi, H: int) -> float:
    r"""The exact expected return :math:`J(\pi) = \mathbb{E}^\pi[\sum_{h=1}^H r_h(s_h, a_h)]`."""
    P, d1 = check_finite_mdp(P, d1)
    V, _ = backward_values(P, r, pi, H)
    return float(d1 @ V[0])


def sample_trajectories(P, d1, pi, H: int, n: int, rng: np.random.Generator
                        ) -> tuple[np.ndarray, np.ndarray]:
    """Draw ``n`` episodes of ``H`` steps; returns ``(states, actions)``, both int arrays (n, H).

    ``rng`` is a numpy Generator (``reprobook.rng(seed, stream)``). Sampling is by inverse CDF on
    one uniform per draw, vectorised over episodes.
    """
    P, d1 = check_finite_mdp(P, d1)
    S, A, _ = P.shape
    pis = policy_per_step(pi, H, S, A)
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"n (the number of episodes) must be an int >= 1, got {n!r}")
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng must be a numpy Generator, got {type(rng).__name__}")

    def draw(p: np.ndarray) -> np.ndarray:       # one index per row of p (rows sum to 1)
        c = np.cumsum(p, axis=-1)
        u = rng.random(p.shape[0])[:, None] * c[:, -1:]
        return np.minimum((c <= u).sum(axis=-1), p.shape[-1] - 1)

    states = np.empty((n, len(pis)), dtype=np.int64)
    actions = np.empty((n, len(pis)), dtype=np.int64)
    s = draw(np.broadcast_to(d1, (n, S)))
    for h, p in enumerate(pis):
        a = draw(p[s])
        states[:, h], actions[:, h] = s, a
        s = draw(P[s, a])
    return states, actions
