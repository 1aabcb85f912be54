r"""Exact successor measures, discounted occupancies, and what they say about coverage.

For a policy :math:`\pi` with state chain :math:`P_\pi(s, s') = \sum_a \pi(a|s) P(s, a, s')`, the
**successor (state) measure** is the normalised discounted visitation

.. math:: M_\pi = (1-\gamma)\sum_{t\ge0}\gamma^t P_\pi^t = (1-\gamma)(I - \gamma P_\pi)^{-1},

so :math:`M_\pi(s_1, s_2)` is the probability that the state at a Geometric(:math:`1-\gamma`)
time :math:`T` (:math:`P(T = t) = (1-\gamma)\gamma^t`, :math:`t \ge 0`) is :math:`s_2`, starting
from :math:`s_1`. Every row is a probability vector. The **occupancy** of a start state (or start
distribution :math:`\rho`) is the row :math:`d_\pi = \rho^\top M_\pi`.

**Visit probabilities from** :math:`M`. Let :math:`\tau` be the first time the chain is at
:math:`s`. By the strong Markov property, the discounted visits to :math:`s` from :math:`s_0` are
those from :math:`s` delayed by :math:`\tau`, so
:math:`M(s_0, s) = \mathbb E_{s_0}[\gamma^{\tau}]\,M(s, s)` and

.. math:: h(s_0, s) = \Pr(\tau \le T) = \mathbb E_{s_0}[\gamma^{\tau}] = M(s_0, s) / M(s, s),

the exact probability that a rollout stopped at an independent Geometric(:math:`1-\gamma`) time
(mean length :math:`\gamma/(1-\gamma)` steps after the start) visits :math:`s`
(:func:`visit_probabilities`). Rollouts of different skills are independent, so the expected
fraction of a set of states that ``k`` rollouts of each skill visit is
:math:`\frac1{|R|}\sum_{s\in R} 1 - \prod_z (1 - h_z(s_0, s))^k` (:func:`expected_coverage`): the
coverage metric of skill discovery papers (share of cells visited), computed with no sampling.

**Mutual information** between the state and a uniformly drawn skill, with the skill's occupancy
as :math:`p(s|z)`: :math:`I(S;Z) = \frac1n\sum_z \mathrm{KL}(d_z\,\|\,\bar d)` with
:math:`\bar d = \frac1n\sum_z d_z` (:func:`mutual_information`); it is at most :math:`\log n`.
"""
from __future__ import annotations

import numpy as np

from .mdp import TabularMDP, policy_model

__all__ = ["successor_measure", "occupancy", "visit_probabilities", "expected_coverage",
           "mutual_information", "entropy", "with_discount"]


def with_discount(mdp: TabularMDP, gamma: float) -> TabularMDP:
    """The same dynamics and rewards under another discount (a coverage horizon, say)."""
    if not isinstance(mdp, TabularMDP):
        raise TypeError(f"mdp must be a TabularMDP, got {type(mdp).__name__}")
    return TabularMDP(mdp.P, mdp.r, gamma)


def successor_measure(mdp: TabularMDP, pi) -> np.ndarray:
    r"""The exact successor measure :math:`(1-\gamma)(I-\gamma P_\pi)^{-1}`, shape (S, S), float64."""
    P_pi, _ = policy_model(mdp, pi)
    S = mdp.n_states
    return (1.0 - mdp.gamma) * np.linalg.solve(np.eye(S) - mdp.gamma * P_pi, np.eye(S))


def _start(start, S: int) -> np.ndarray:
    if isinstance(start, (int, np.integer)) and not isinstance(start, bool):
        if not 0 <= start < S:
            raise ValueError(f"start must be a state in [0, {S}), got {start}")
        rho = np.zeros(S)
        rho[int(start)] = 1.0
        return rho
    rho = np.asarray(start, dtype=np.float64)
    if rho.shape != (S,) or np.any(rho < 0) or abs(rho.sum() - 1.0) > 1e-9:
        raise ValueError(f"start must be a state index or a probability vector of shape ({S},)")
    return rho


def occupancy(mdp: TabularMDP, pi, start) -> np.ndarray:
    r"""The normalised discounted occupancy :math:`\rho^\top M_\pi` of a start state or distribution.

    Solved as one transposed linear system, cheaper than forming :math:`M_\pi`.
    """
    P_pi, _ = policy_model(mdp, pi)
    rho = _start(start, mdp.n_states)
    S = mdp.n_states
    return (1.0 - mdp.gamma) * np.linalg.solve((np.eye(S) - mdp.gamma * P_pi).T, rho)


def visit_probabilities(M, start: int) -> np.ndarray:
    r""":math:`h(s_0, s) = M(s_0, s)/M(s, s)`: the probability that a geometric-length rollout from
    ``start`` visits each state (1 at the start itself). ``M`` is one successor measure (S, S) or a
    stack (n, S, S); the result is (S,) or (n, S)."""
    M = np.asarray(M, dtype=np.float64)
    if M.ndim not in (2, 3) or M.shape[-1] != M.shape[-2]:
        raise ValueError(f"M must have shape (S, S) or (n, S, S), got {M.shape}")
    S = M.shape[-1]
    if not isinstance(start, (int, np.integer)) or isinstance(start, bool) or not 0 <= start < S:
        raise ValueError(f"start must be a state in [0, {S}), got {start!r}")
    diag = np.diagonal(M, axis1=-2, axis2=-1)
    if np.any(diag <= 0):
        raise ValueError("M has a non-positive diagonal entry; it is not a successor measure")
    return np.clip(M[..., start, :] / diag, 0.0, 1.0)


def expected_coverage(h, states=None, rollouts: int = 1) -> float:
    r"""Expected fraction of ``states`` (a boolean mask or an index array; default all) visited by
    ``rollouts`` independent rollouts of each skill, from the per-skill visit probabilities ``h``
    of shape (n_skills, S): :math:`\mathrm{mean}_s\,[1-\prod_z(1-h_z(s))^k]`."""
    h = np.asarray(h, dtype=np.float64)
    if h.ndim != 2:
        raise ValueError(f"h must have shape (n_skills, S), got {h.shape}")
    if np.any(h < 0) or np.any(h > 1):
        raise ValueError("h must hold probabilities in [0, 1]")
    if isinstance(rollouts, bool) or not isinstance(rollouts, (int, np.integer)) or rollouts < 1:
        raise ValueError(f"rollouts must be an int >= 1, got {rollouts!r}")
    miss = np.prod((1.0 - h) ** int(rollouts), axis=0)
    covered = 1.0 - miss
    if states is None:
        return float(covered.mean())
    states = np.asarray(states)
    if states.dtype == bool:
        if states.shape != covered.shape:
            raise ValueError(f"a mask of states must have shape ({h.shape[1]},), got {states.shape}")
        if not states.any():
            raise ValueError("the mask of states is empty")
    return float(covered[states].mean())


def _distributions(d) -> np.ndarray:
    d = np.asarray(d, dtype=np.float64)
    if d.ndim != 2:
        raise ValueError(f"d must have shape (n_skills, S), got {d.shape}")
    if np.any(d < 0) or np.abs(d.sum(axis=1) - 1.0).max() > 1e-9:
        raise ValueError("every row of d must be a probability vector")
    return d


def _xlogy(x, y) -> np.ndarray:
    # x log y with 0 log 0 = 0 (and 0 log(anything) = 0)
    out = np.zeros_like(x)
    pos = x > 0
    out[pos] = x[pos] * np.log(np.maximum(y[pos], np.finfo(np.float64).tiny))
    return out


def entropy(p) -> float:
    """Shannon entropy (nats) of a probability vector, with 0 log 0 = 0."""
    p = np.asarray(p, dtype=np.float64)
    if p.ndim != 1 or np.any(p < 0) or abs(p.sum() - 1.0) > 1e-9:
        raise ValueError("p must be a probability vector")
    return float(-_xlogy(p, p).sum())


def mutual_information(d) -> float:
    r""":math:`I(S;Z)` for a uniform skill and per-skill state distributions ``d`` (n_skills, S):
    :math:`\frac1n\sum_z\sum_s d_z(s)\log(d_z(s)/\bar d(s))`, in nats."""
    d = _distributions(d)
    dbar = np.broadcast_to(d.mean(axis=0), d.shape)
    return float((_xlogy(d, d) - _xlogy(d, dbar)).sum() / d.shape[0])
