r"""Small MDPs with known structure: Garnet random MDPs and the quit-or-advance chain.

**Garnet** (Archibald, McKinnon & Thomas, 1995): every state-action pair moves to ``branching``
distinct next states drawn uniformly without replacement, with probabilities that split the unit
interval at ``branching - 1`` uniform cut points (a flat Dirichlet); rewards are
:math:`r(s, a) \sim U[0, 1]`. The standard testbed for tabular policy optimisation.

**Quit-or-advance chain**: the hard instance for greedy policy improvement. States
:math:`0, \dots, n-1` plus an absorbing terminal state :math:`n` with zero reward. In state
:math:`i < n`, action ``QUIT`` (0) ends the episode with reward ``quit_reward`` and ``ADVANCE`` (1)
moves to :math:`i + 1` with reward 0, except that advancing from :math:`n - 1` ends the episode with
``final_reward`` :math:`R`. Advancing everywhere is optimal exactly when
:math:`\gamma^{n-1} R > ` ``quit_reward``, and then :math:`V^\star(i) = \gamma^{n-1-i} R`.
Starting from a policy that (almost) always quits, a 1-step greedy improvement only learns to
advance in the last state whose successor already advances, so policy iteration fixes one state
per iteration; an :math:`h`-step greedy improvement fixes :math:`h` states per iteration.
"""
from __future__ import annotations

import numpy as np

from .mdp import TabularMDP

__all__ = ["linear_mdp", "garnet", "quit_or_advance_chain", "quit_policy", "QUIT", "ADVANCE"]

QUIT, ADVANCE = 0, 1


def _positive_int(name: str, x, minimum: int = 1) -> int:
    if isinstance(x, bool) or not isinstance(x, (int, np.integer)) or x < minimum:
        raise ValueError(f"{name} must be an int >= {minimum}, got {x!r}")
    return int(x)


def garnet(n_states: int, n_actions: int, branching: int, gamma: float,
           rng: np.random.Generator | int) -> TabularMDP:
    """A Garnet MDP; ``rng`` is a numpy Generator (e.g. ``reprobook.rng(seed, k)``) or an int seed."""
    n_states = _positive_int("n_states", n_states)
    n_actions = _positive_int("n_actions", n_actions)
    branching = _positive_int("branching", branching)
    if branching > n_states:
        raise ValueError(f"branching ({branching}) cannot exceed n_states ({n_states})")
    if not isinstance(rng, np.random.Generator):
        if isinstance(rng, bool) or not isinstance(rng, (int, np.integer)):
            raise TypeError(f"rng must be a numpy Generator or an int seed, got {type(rng).__name__}")
        rng = np.random.default_rng(int(rng))
    P = np.zeros((n_states, n_actions, n_states))
    for s in range(n_states):
        for a in range(n_actions):
            support = rng.choice(n_states, size=branching, replace=False)
            P[s, a, support] = rng.dirichlet(np.ones(branching))
    r = rng.random((n_states, n_actions))
    return TabularMDP(P, r, gamma)


def linear_mdp(n_states: int, n_actions: int, dim: int, gamma: float,
               rng: np.random.Generator, concentration: float = 0.3,
               support: int | None = None) -> tuple[TabularMDP, np.ndarray]:
    r"""A random linear MDP of feature dimension ``dim``; returns ``(mdp, features)``.

    Features :math:`\phi(s,a) \sim \mathrm{Dir}(\text{concentration})` on the simplex of
    :math:`\mathbb R^d`, ``dim`` next-state distributions :math:`\mu_i` (each uniform on ``support``
    random states, all states by default) and :math:`\theta \sim U[0,1]^d`, so that
    :math:`P(\cdot|s,a) = \sum_i \phi_i(s,a)\mu_i` and :math:`r(s,a) = \phi(s,a)^\top\theta \in [0,1]`:
    every Bellman backup is linear in :math:`\phi`, whatever :math:`|S|` is.
    """
    n_states, n_actions, dim = (_positive_int("n_states", n_states),
                                _positive_int("n_actions", n_actions), _positive_int("dim", dim))
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng must be a numpy Generator, got {type(rng).__name__}")
    k = n_states if support is None else _positive_int("support", support)
    if k > n_states:
        raise ValueError(f"support ({k}) cannot exceed n_states ({n_states})")
    phi = rng.dirichlet(np.full(dim, float(concentration)), size=(n_states, n_actions))
    mu = np.zeros((dim, n_states))
    for i in range(dim):
        mu[i, rng.choice(n_states, size=k, replace=False)] = 1.0 / k
    theta = rng.random(dim)
    return TabularMDP(phi @ mu, phi @ theta, gamma), phi


def quit_or_advance_chain(n: int, gamma: float, final_reward: float,
                          quit_reward: float = 1.0) -> TabularMDP:
    """The quit-or-advance chain with ``n`` decision states plus the terminal state ``n``."""
    n = _positive_int("n", n)
    for name, v in (("final_reward", final_reward), ("quit_reward", quit_reward)):
        if isinstance(v, bool) or not isinstance(v, (int, float, np.floating)) or not np.isfinite(v):
            raise ValueError(f"{name} must be a finite number, got {v!r}")
    S = n + 1
    P = np.zeros((S, 2, S))
    r = np.zeros((S, 2))
    for i in range(n):
        P[i, QUIT, n] = 1.0
        r[i, QUIT] = quit_reward
        P[i, ADVANCE, i + 1] = 1.0   # i + 1 == n is the terminal state
    r[n - 1, ADVANCE] = final_reward
    P[n, :, n] = 1.0                 # absorbing, reward 0
    return TabularMDP(P, r, gamma)


def quit_policy(mdp: TabularMDP, p_advance: float = 1e-6) -> np.ndarray:
    """The chain's starting policy: advance with probability ``p_advance``, quit otherwise."""
    if not 0.0 < p_advance < 1.0:
        raise ValueError(f"p_advance must lie in (0, 1) so every action has mass, got {p_advance}")
    if mdp.n_actions != 2:
        raise ValueError(f"quit_policy is for the quit-or-advance chain (2 actions), got "
                         f"{mdp.n_actions}")
    pi = np.empty((mdp.n_states, 2))
    pi[:, QUIT], pi[:, ADVANCE] = 1.0 - p_advance, p_advance
    return pi
