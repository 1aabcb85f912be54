r"""Finite discounted MDPs held as arrays, solved exactly in float64.

An MDP here is a transition tensor :math:`P \in \mathbb{R}^{S\times A\times S}` with
:math:`P(s, a, \cdot)` a probability vector, a reward table :math:`r \in \mathbb{R}^{S\times A}`
(the expected reward of taking ``a`` in ``s``) and a discount :math:`\gamma \in [0, 1)`.
A stochastic policy is an ``(S, A)`` array of probabilities.

The operators, for a value vector :math:`V \in \mathbb{R}^S`:

* the one-step action values :math:`(\mathcal{Q}V)(s, a) = r(s, a) + \gamma\, P(s, a, \cdot)\cdot V`;
* the policy's Bellman operator :math:`T^\pi V = r_\pi + \gamma P_\pi V` with
  :math:`r_\pi(s) = \sum_a \pi(a|s) r(s,a)` and :math:`P_\pi(s,s') = \sum_a \pi(a|s) P(s,a,s')`;
* the Bellman optimality operator :math:`(TV)(s) = \max_a (\mathcal{Q}V)(s, a)`, a
  :math:`\gamma`-contraction in the sup norm, so :math:`T^h` is a :math:`\gamma^h`-contraction.

Exact policy evaluation solves :math:`V^\pi = (I - \gamma P_\pi)^{-1} r_\pi`, the unique fixed point
of :math:`T^\pi`. The optimal value :math:`V^\star`, the fixed point of :math:`T`, is computed by
policy iteration, which terminates with the exact answer (to linear-solver precision) in finitely
many steps; :func:`value_iteration` is kept as an independent route for tests.

One application of :math:`\mathcal{Q}` or :math:`T` is a *Bellman backup*: it costs
:math:`O(S^2 A)` operations for a dense ``P``, which is the unit in which the book counts the extra
work that lookahead adds.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..threads import single_threaded_blas

__all__ = [
    "TabularMDP", "check_policy", "policy_model", "evaluate", "action_values", "bellman",
    "bellman_power", "greedy", "deterministic_policy", "optimal_value", "value_iteration",
    "sample_next_states", "single_threaded_blas",
]

#: How far a row of ``P`` or of a policy may be from summing to one.
ROW_TOL = 1e-9


def _as_float_array(name: str, x, ndim: int) -> np.ndarray:
    try:
        a = np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be an array of numbers, got {type(x).__name__}") from None
    if a.ndim != ndim:
        raise ValueError(f"{name} must have {ndim} dimensions, got shape {a.shape}")
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{name} has non-finite entries (nan or inf)")
    return a


@dataclass(frozen=True, eq=False)
class TabularMDP:
    """A finite discounted MDP: ``P`` of shape (S, A, S), ``r`` of shape (S, A), ``gamma`` in [0, 1).

    The arrays are validated and stored as read-only float64 copies.
    """

    P: np.ndarray
    r: np.ndarray
    gamma: float

    def __post_init__(self):
        P = _as_float_array("P", self.P, 3)
        r = _as_float_array("r", self.r, 2)
        S, A, S2 = P.shape
        if S == 0 or A == 0:
            raise ValueError(f"P must have at least one state and one action, got shape {P.shape}")
        if S2 != S:
            raise ValueError(f"P must have shape (S, A, S); got {P.shape} (last axis {S2} != {S})")
        if r.shape != (S, A):
            raise ValueError(f"r must have shape (S, A) = {(S, A)} to match P, got {r.shape}")
        if np.any(P < 0):
            raise ValueError("P has negative entries; P(s, a, .) must be a probability vector")
        worst = np.abs(P.sum(axis=2) - 1.0).max()
        if worst > ROW_TOL:
            raise ValueError(f"every row P(s, a, .) must sum to 1; the worst is off by {worst:.3g}")
        g = self.gamma
        if isinstance(g, bool) or not isinstance(g, (int, float, np.floating, np.integer)):
            raise TypeError(f"gamma must be a number, got {type(g).__name__}")
        g = float(g)
        if not 0.0 <= g < 1.0:
            raise ValueError(f"gamma must lie in [0, 1) for a discounted MDP, got {g}")
        P, r = P.copy(), r.copy()
        P.setflags(write=False)
        r.setflags(write=False)
        object.__setattr__(self, "P", P)
        object.__setattr__(self, "r", r)
        object.__setattr__(self, "gamma", g)

    @property
    def n_states(self) -> int:
        return self.P.shape[0]

    @property
    def n_actions(self) -> int:
        return self.P.shape[1]

    def __repr__(self) -> str:
        return f"TabularMDP(S={self.n_states}, A={self.n_actions}, gamma={self.gamma})"


def _check_mdp(mdp) -> TabularMDP:
    if not isinstance(mdp, TabularMDP):
        raise TypeError(f"mdp must be a TabularMDP, got {type(mdp).__name__}")
    return mdp


def _check_values(mdp: TabularMDP, V, name: str = "V") -> np.ndarray:
    V = _as_float_array(name, V, 1)
    if V.shape != (mdp.n_states,):
        raise ValueError(f"{name} must have shape (S,) = ({mdp.n_states},), got {V.shape}")
    return V


def check_policy(mdp: TabularMDP, pi, name: str = "pi") -> np.ndarray:
    """Validate a stochastic policy: shape (S, A), non-negative rows summing to one."""
    _check_mdp(mdp)
    pi = _as_float_array(name, pi, 2)
    if pi.shape != (mdp.n_states, mdp.n_actions):
        raise ValueError(f"{name} must have shape (S, A) = {(mdp.n_states, mdp.n_actions)}, "
                         f"got {pi.shape}")
    if np.any(pi < 0):
        raise ValueError(f"{name} has negative probabilities")
    worst = np.abs(pi.sum(axis=1) - 1.0).max()
    if worst > ROW_TOL:
        raise ValueError(f"every row of {name} must sum to 1; the worst is off by {worst:.3g}")
    return pi


def policy_model(mdp: TabularMDP, pi) -> tuple[np.ndarray, np.ndarray]:
    r"""The Markov chain a policy induces: :math:`(P_\pi, r_\pi)` of shapes (S, S) and (S,)."""
    pi = check_policy(mdp, pi)
    return np.einsum("sa,sat->st", pi, mdp.P), np.einsum("sa,sa->s", pi, mdp.r)


def evaluate(mdp: TabularMDP, pi) -> np.ndarray:
    r"""Exact policy evaluation :math:`V^\pi = (I - \gamma P_\pi)^{-1} r_\pi` (float64 linear solve)."""
    P_pi, r_pi = policy_model(mdp, pi)
    return np.linalg.solve(np.eye(mdp.n_states) - mdp.gamma * P_pi, r_pi)


def action_values(mdp: TabularMDP, V) -> np.ndarray:
    r"""One Bellman backup in action-value form: :math:`r(s,a) + \gamma \sum_{s'} P(s,a,s') V(s')`."""
    _check_mdp(mdp)
    V = _check_values(mdp, V)
    return mdp.r + mdp.gamma * (mdp.P @ V)


def bellman(mdp: TabularMDP, V) -> np.ndarray:
    r"""The Bellman optimality operator :math:`(TV)(s) = \max_a [r(s,a) + \gamma P(s,a,\cdot) V]`."""
    return action_values(mdp, V).max(axis=1)


def bellman_power(mdp: TabularMDP, V, n: int) -> np.ndarray:
    r""":math:`T^n V`: ``n`` Bellman backups (``n = 0`` returns a copy of ``V``)."""
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
        raise ValueError(f"n (the number of Bellman backups) must be an int >= 0, got {n!r}")
    _check_mdp(mdp)
    W = _check_values(mdp, V).copy()
    for _ in range(int(n)):
        W = bellman(mdp, W)
    return W


def greedy(q) -> np.ndarray:
    """The greedy action in each state (the first one on ties), from an (S, A) table."""
    q = np.asarray(q)
    if q.ndim != 2:
        raise ValueError(f"q must have shape (S, A), got {q.shape}")
    return q.argmax(axis=1)


def deterministic_policy(actions, n_actions: int) -> np.ndarray:
    """The (S, A) one-hot policy that plays ``actions[s]`` in state ``s``."""
    actions = np.asarray(actions)
    if actions.ndim != 1 or actions.size and (actions.min() < 0 or actions.max() >= n_actions):
        raise ValueError(f"actions must be a vector of ints in [0, {n_actions}), got {actions!r}")
    pi = np.zeros((actions.size, n_actions))
    pi[np.arange(actions.size), actions] = 1.0
    return pi


@single_threaded_blas()
def optimal_value(mdp: TabularMDP, max_iter: int = 10_000) -> tuple[np.ndarray, np.ndarray]:
    r"""The optimal value :math:`V^\star` and a deterministic optimal policy, by policy iteration.

    Policy iteration improves the policy strictly until it is greedy with respect to its own value,
    which happens after finitely many steps; it stops when the greedy action no longer changes
    (ties keep the current action, so it cannot cycle). Returns ``(V_star, actions)``.
    """
    _check_mdp(mdp)
    actions = np.zeros(mdp.n_states, dtype=int)
    for _ in range(max_iter):
        V = evaluate(mdp, deterministic_policy(actions, mdp.n_actions))
        q = action_values(mdp, V)
        best = q.max(axis=1)
        # switch only where another action is better by more than round-off
        stay = q[np.arange(mdp.n_states), actions] >= best - 1e-12 * (1 + np.abs(best))
        new = np.where(stay, actions, q.argmax(axis=1))
        if np.array_equal(new, actions):
            return V, actions
        actions = new
    raise RuntimeError(f"policy iteration did not stop within max_iter={max_iter} iterations")


def value_iteration(mdp: TabularMDP, tol: float = 1e-12, max_iter: int = 100_000) -> np.ndarray:
    r"""Approximate :math:`V^\star` by iterating :math:`T` from zero until
    :math:`\|V^\star - V_n\|_\infty \le` ``tol`` (guaranteed by the contraction:
    :math:`\|V^\star - V_{n+1}\|_\infty \le \gamma/(1-\gamma)\,\|V_{n+1} - V_n\|_\infty`)."""
    _check_mdp(mdp)
    if not tol > 0:
        raise ValueError(f"tol must be > 0, got {tol}")
    V = np.zeros(mdp.n_states)
    g = mdp.gamma
    for _ in range(max_iter):
        V_new = bellman(mdp, V)
        if g == 0 or g / (1 - g) * np.abs(V_new - V).max() <= tol:
            return V_new
        V = V_new
    raise RuntimeError(f"value iteration did not reach tol={tol} within max_iter={max_iter}")


def sample_next_states(mdp: TabularMDP, states, actions, rng: np.random.Generator) -> np.ndarray:
    """A generative model: one next state ``s' ~ P(s, a, .)`` for each pair, same shape as ``states``.

    ``states`` and ``actions`` are broadcast together. Each draw inverts the cumulative distribution
    of its row with one uniform number, so the draws are reproducible from ``rng``. All rows are
    searched at once: row ``i``'s cumulative values are offset by ``2 i`` so that the flattened
    table is sorted and one ``searchsorted`` serves every pair.
    """
    _check_mdp(mdp)
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng must be a numpy Generator (reprobook.rng(seed, ...)), got "
                        f"{type(rng).__name__}")
    states, actions = np.broadcast_arrays(np.asarray(states), np.asarray(actions))
    S, A = mdp.n_states, mdp.n_actions
    if states.size and (states.min() < 0 or states.max() >= S or actions.min() < 0
                        or actions.max() >= A):
        raise ValueError(f"states must lie in [0, {S}) and actions in [0, {A})")
    rows = (states * A + actions).ravel()
    cache = mdp.__dict__.get("_sampler_table")
    if cache is None:   # the (immutable) MDP's search table, built once: rollouts call this often
        offsets = 2.0 * np.arange(S * A)
        table = (np.cumsum(mdp.P, axis=2).reshape(S * A, S) + offsets[:, None]).ravel()
        # a last cumulative value of 1 - 1e-16 could let u slip past it: clamp onto the support
        last = S - 1 - np.argmax(mdp.P.reshape(S * A, S)[:, ::-1] > 0, axis=1)
        cache = (offsets, table, last)
        object.__setattr__(mdp, "_sampler_table", cache)
    offsets, table, last = cache
    u = rng.random(rows.size)
    nxt = np.searchsorted(table, u + offsets[rows], side="right") - rows * S
    return np.minimum(nxt, last[rows]).reshape(states.shape)
