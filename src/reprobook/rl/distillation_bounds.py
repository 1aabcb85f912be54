r"""The performance-difference identity behind offline behaviour distillation, and its two bounds.

For a discounted tabular MDP (:class:`~reprobook.rl.mdp.TabularMDP`) with start distribution
:math:`\rho_0`, the normalised discounted state occupancy of a policy :math:`\pi` is

.. math:: d_\pi = (1-\gamma)\,\rho_0^\top (I - \gamma P_\pi)^{-1},

and its return :math:`J(\pi) = \rho_0^\top V^\pi`. For any two policies the performance-difference
identity (Lei, Zhang & Tao 2024, Theorem 2; Kakade & Langford 2002 in another form) reads

.. math:: J(\pi^\star) - J(\pi) = \frac{1}{1-\gamma}\,\mathbb E_{s\sim d_\pi}
          \Big[\sum_a q_{\pi^\star}(s,a)\,\big(\pi^\star(a|s) - \pi(a|s)\big)\Big].

Two upper bounds on the gap :math:`|J(\pi^\star)-J(\pi)|` follow:

* the **PBC bound** (Xu et al. 2020, Theorem 1), quadratic in the effective horizon:
  :math:`\frac{2R_{\max}}{(1-\gamma)^2}\,\mathbb E_{s\sim d_{\pi^\star}} D_{TV}(\pi^\star(\cdot|s),
  \pi(\cdot|s))`;
* the **action-value weighted bound** (the paper's Corollary 1), linear:
  :math:`\frac{1}{1-\gamma}\,\mathbb E_{s\sim d_\pi}\big[\sum_a q_{\pi^\star}(s,a)\,
  |\pi^\star(a|s)-\pi(a|s)|\big]`, valid when :math:`q_{\pi^\star}\ge 0`.

Everything is exact float64 linear algebra; nothing is sampled.
"""
from __future__ import annotations

import numpy as np

from .mdp import TabularMDP, action_values, check_policy, evaluate, policy_model

__all__ = ["occupancy", "policy_return", "pdl_gap", "pbc_bound", "av_bound", "softmax_perturbation",
           "absorbing_tight_mdp"]


def _start(mdp: TabularMDP, rho0) -> np.ndarray:
    S = mdp.n_states
    if rho0 is None:
        return np.full(S, 1.0 / S)
    rho0 = np.asarray(rho0, dtype=np.float64)
    if rho0.shape != (S,) or np.any(rho0 < 0) or abs(rho0.sum() - 1.0) > 1e-9:
        raise ValueError(f"rho0 must be a probability vector of shape ({S},), got shape "
                         f"{rho0.shape}")
    return rho0


def occupancy(mdp: TabularMDP, pi, rho0=None) -> np.ndarray:
    r"""Normalised discounted state occupancy :math:`d_\pi` (sums to one), shape (S,)."""
    P_pi, _ = policy_model(mdp, pi)
    rho0 = _start(mdp, rho0)
    # solve (I - gamma P_pi)^T x = rho0 rather than inverting
    return (1.0 - mdp.gamma) * np.linalg.solve((np.eye(mdp.n_states) - mdp.gamma * P_pi).T, rho0)


def policy_return(mdp: TabularMDP, pi, rho0=None) -> float:
    r""":math:`J(\pi) = \rho_0^\top V^\pi` (uniform start if ``rho0`` is None)."""
    return float(_start(mdp, rho0) @ evaluate(mdp, pi))


def _q_star(mdp, pi_star):
    return action_values(mdp, evaluate(mdp, pi_star))


def pdl_gap(mdp: TabularMDP, pi_star, pi, rho0=None, state_dist: str = "pi") -> float:
    r"""The right-hand side of the identity: :math:`\frac{1}{1-\gamma}\mathbb E_{s\sim d}[\sum_a
    q_{\pi^\star}(s,a)(\pi^\star-\pi)(a|s)]`. ``state_dist="pi"`` takes :math:`d=d_\pi` (the
    identity); ``"pi_star"`` takes :math:`d=d_{\pi^\star}`, which is *not* an identity (used as a
    broken variant in the chapter)."""
    pi_star, pi = check_policy(mdp, pi_star, "pi_star"), check_policy(mdp, pi)
    if state_dist not in ("pi", "pi_star"):
        raise ValueError(f"state_dist must be 'pi' or 'pi_star', got {state_dist!r}")
    d = occupancy(mdp, pi if state_dist == "pi" else pi_star, rho0)
    q = _q_star(mdp, pi_star)
    return float(d @ (q * (pi_star - pi)).sum(1)) / (1.0 - mdp.gamma)


def pbc_bound(mdp: TabularMDP, pi_star, pi, rho0=None, r_max: float | None = None) -> float:
    r""":math:`\frac{2R_{\max}}{(1-\gamma)^2}\mathbb E_{s\sim d_{\pi^\star}}D_{TV}`; ``r_max``
    defaults to :math:`\max|r|`."""
    pi_star, pi = check_policy(mdp, pi_star, "pi_star"), check_policy(mdp, pi)
    r_max = float(np.abs(mdp.r).max()) if r_max is None else float(r_max)
    tv = 0.5 * np.abs(pi_star - pi).sum(1)
    return 2.0 * r_max / (1.0 - mdp.gamma) ** 2 * float(occupancy(mdp, pi_star, rho0) @ tv)


def av_bound(mdp: TabularMDP, pi_star, pi, rho0=None) -> float:
    r""":math:`\frac{1}{1-\gamma}\mathbb E_{s\sim d_\pi}[\sum_a q_{\pi^\star}(s,a)|\pi^\star-\pi|]`.
    Raises if some :math:`q_{\pi^\star}<0` (the bound needs non-negative action values)."""
    pi_star, pi = check_policy(mdp, pi_star, "pi_star"), check_policy(mdp, pi)
    q = _q_star(mdp, pi_star)
    if np.any(q < -1e-12):
        raise ValueError("the action-value weighted bound needs q_{pi*} >= 0 (non-negative rewards)")
    return float(occupancy(mdp, pi, rho0) @ (q * np.abs(pi_star - pi)).sum(1)) / (1.0 - mdp.gamma)


def softmax_perturbation(pi_star, scale: float, rng: np.random.Generator,
                         concentration: float = 3.0) -> np.ndarray:
    r"""A random policy near ``pi_star``: :math:`\mathrm{softmax}(\kappa\,\pi^\star(\cdot|s) +
    \text{scale}\cdot\xi_s)` with :math:`\xi_s\sim N(0,I)` and :math:`\kappa` the
    ``concentration``, shape (S, A). For a deterministic :math:`\pi^\star` and scale 0 it puts
    :math:`e^\kappa/(e^\kappa+A-1)` on the expert's action."""
    pi_star = np.asarray(pi_star, dtype=np.float64)
    if pi_star.ndim != 2:
        raise ValueError(f"pi_star must be (S, A), got shape {pi_star.shape}")
    if not (scale >= 0 and concentration >= 0):
        raise ValueError(f"scale and concentration must be >= 0, got {scale}, {concentration}")
    z = concentration * pi_star + scale * rng.standard_normal(pi_star.shape)
    z -= z.max(1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(1, keepdims=True)


def absorbing_tight_mdp(n_states: int, n_actions: int, gamma: float, rng: np.random.Generator
                        ) -> tuple[TabularMDP, np.ndarray]:
    r"""The paper's tightness case for the weighted bound: in each of ``n_states`` live states one
    action (drawn at random) pays :math:`r\in[0,1]` and moves among the live states
    (Dirichlet(0.5) kernel); every other action pays 0 and drops into an absorbing zero-reward
    state (index ``n_states``). So :math:`q_{\pi^\star}(s,a)=0` wherever :math:`\pi^\star(a|s)=0`
    and the weighted bound equals the gap. Returns the MDP and the optimal deterministic policy
    as an (S+1, A) array."""
    if n_states < 1 or n_actions < 2:
        raise ValueError(f"need n_states >= 1 and n_actions >= 2, got {n_states}, {n_actions}")
    S = n_states + 1
    P = np.zeros((S, n_actions, S))
    r = np.zeros((S, n_actions))
    good = rng.integers(n_actions, size=n_states)
    for s in range(n_states):
        P[s, :, n_states] = 1.0
        P[s, good[s], n_states] = 0.0
        P[s, good[s], :n_states] = rng.dirichlet(np.full(n_states, 0.5))
        r[s, good[s]] = rng.random()
    P[n_states, :, n_states] = 1.0
    pi_star = np.zeros((S, n_actions))
    pi_star[np.arange(n_states), good] = 1.0
    pi_star[n_states, 0] = 1.0
    return TabularMDP(P, r, gamma), pi_star
