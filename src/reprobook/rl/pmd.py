r"""Policy mirror descent (PMD) and its lookahead generalisation h-PMD (Protopapas & Barakat, 2024).

**Lookahead action values.** For a policy :math:`\pi_k` with exact value :math:`V_k = V^{\pi_k}` and a
depth :math:`h \ge 1`,

.. math:: Q_h^k(s, a) = r(s, a) + \gamma \sum_{s'} P(s, a, s')\,(T^{h-1} V_k)(s'),

the value of taking ``a``, acting optimally for :math:`h - 1` more steps, and then following
:math:`\pi_k`. For :math:`h = 1` it is :math:`Q^{\pi_k}`. Computing it costs :math:`h` Bellman
backups on top of the evaluation of :math:`\pi_k`.

**The update.** In every state, a mirror-ascent step on the linear objective
:math:`\langle Q_h^k(s, \cdot), p\rangle` over the simplex:

.. math:: \pi_{k+1}(\cdot|s) = \arg\max_{p \in \Delta_A}\;
          \eta_k \langle Q_h^k(s, \cdot), p\rangle - D(p, \pi_k(\cdot|s)).

With :math:`D = \mathrm{KL}` it is the multiplicative update
:math:`\pi_{k+1} \propto \pi_k \exp(\eta_k Q_h^k)`, done here in log space (:func:`pmd_step`); with
:math:`D = \tfrac12\|\cdot\|^2` it is a Euclidean projection (:func:`euclidean_step`).

**The adaptive step size** makes every step almost as good as the hard :math:`h`-greedy step:
with :math:`\tilde\pi_k` greedy for :math:`Q_h^k` and :math:`c_k = c_0\,\gamma^{2h(k+1)}`,

.. math:: \eta_k = \max_s D(\tilde\pi_k(\cdot|s), \pi_k(\cdot|s)) / c_k .

The three-point property of the mirror step then gives
:math:`\langle Q_h^k(s,\cdot), \pi_{k+1}(\cdot|s)\rangle \ge \max_a Q_h^k(s,a) - c_k` in every state,
from which :math:`\|V^\star - V_{k+1}\|_\infty \le \gamma^h \|V^\star - V_k\|_\infty + c_k/(1-\gamma)`
and the :math:`\gamma^{h}`-linear rate of :func:`rate_bound` follow (the chapter has the argument).

**Inexact h-PMD** replaces :math:`Q_h^k` by a sparse-sampling estimate from a generative model
(:func:`sampled_lookahead_q`): every node of a depth-:math:`h` tree draws ``m`` next states per
action; the leaves use :math:`V_k`, or its estimate from truncated Monte Carlo rollouts of
:math:`\pi_k` (:func:`rollout_values`), so that every number the update uses comes from samples.

**Linear function approximation** (:func:`linear_lookahead_q`): in a linear MDP,
:math:`P(\cdot|s,a) = \phi(s,a)^\top\mu` and :math:`r = \phi^\top\theta`, every backup
:math:`r + \gamma P V` is linear in the features, so :math:`Q_h^k = \Phi w_h` exactly. The estimator
samples only at a fixed design of ``N`` anchor pairs and fits :math:`w` by least squares, one level of
the lookahead at a time; its sample count does not involve :math:`|S|`.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .mdp import (TabularMDP, action_values, bellman_power, check_policy, evaluate,
                  optimal_value, sample_next_states, single_threaded_blas)

__all__ = [
    "lookahead_q", "sampled_lookahead_q", "pmd_step", "euclidean_step", "project_simplex",
    "step_divergence", "PMDRun", "h_pmd", "rate_bound", "MIRRORS", "LOG_FLOOR",
    "rollout_values", "linear_lookahead_q", "samples_per_iteration",
]

MIRRORS = ("kl", "euclidean")
#: Log-probabilities are kept above this, so a suppressed action stays finite (exp of it is 0).
LOG_FLOOR = -1e300


def _depth(name: str, h) -> int:
    if isinstance(h, bool) or not isinstance(h, (int, np.integer)) or h < 1:
        raise ValueError(f"{name} must be an int >= 1 (the lookahead depth), got {h!r}")
    return int(h)


def lookahead_q(mdp: TabularMDP, V, h: int) -> np.ndarray:
    r"""Exact lookahead values :math:`Q_h = r + \gamma P\, T^{h-1} V`, shape (S, A): ``h`` backups."""
    h = _depth("h", h)
    return action_values(mdp, bellman_power(mdp, V, h - 1))


def sampled_lookahead_q(mdp: TabularMDP, V, h: int, m: int,
                        rng: np.random.Generator) -> tuple[np.ndarray, int]:
    r"""Sparse-sampling estimate of :math:`Q_h` from a generative model; returns ``(Q_hat, calls)``.

    :math:`\hat Q_d(s,a) = r(s,a) + \gamma\,\frac1m\sum_{j=1}^m \hat V_{d-1}(s'_j)` with fresh
    :math:`s'_j \sim P(s,a,\cdot)` at every node, :math:`\hat V_d(s) = \max_a \hat Q_d(s,a)` and
    :math:`\hat V_0 = V`. ``calls`` counts generative-model draws:
    :math:`SAm\sum_{j<h}(Am)^j`, exponential in ``h``, which is why tree search is kept shallow.
    """
    h = _depth("h", h)
    if isinstance(m, bool) or not isinstance(m, (int, np.integer)) or m < 1:
        raise ValueError(f"m (next-state samples per node) must be an int >= 1, got {m!r}")
    V = np.asarray(V, dtype=np.float64)
    if V.shape != (mdp.n_states,):
        raise ValueError(f"V must have shape (S,) = ({mdp.n_states},), got {V.shape}")
    A, g = mdp.n_actions, mdp.gamma
    actions = np.arange(A)
    calls = 0

    def node_values(states: np.ndarray, depth: int) -> np.ndarray:
        # V_hat_depth at every state in `states` (any shape), each node sampled independently
        nonlocal calls
        if depth == 0:
            return V[states]
        a = np.broadcast_to(actions[:, None], states.shape + (A, m))
        s = np.broadcast_to(states[..., None, None], a.shape)
        nxt = sample_next_states(mdp, s, a, rng)
        calls += nxt.size
        q = mdp.r[states] + g * node_values(nxt, depth - 1).mean(axis=-1)
        return q.max(axis=-1)

    roots = np.arange(mdp.n_states)
    a = np.broadcast_to(actions[None, :, None], (mdp.n_states, A, m))
    s = np.broadcast_to(roots[:, None, None], a.shape)
    nxt = sample_next_states(mdp, s, a, rng)
    calls += nxt.size
    q_hat = mdp.r + g * node_values(nxt, h - 1).mean(axis=-1)
    return q_hat, calls


def _count(name: str, x, minimum: int = 1) -> int:
    if isinstance(x, bool) or not isinstance(x, (int, np.integer)) or x < minimum:
        raise ValueError(f"{name} must be an int >= {minimum}, got {x!r}")
    return int(x)


def rollout_values(mdp: TabularMDP, pi, states, n_rollouts: int, horizon: int,
                   rng: np.random.Generator) -> tuple[np.ndarray, int]:
    r"""Monte Carlo estimate of :math:`V^\pi` at ``states`` (any shape) from a generative model.

    Each state gets ``n_rollouts`` independent rollouts of ``pi`` truncated after ``horizon``
    steps: :math:`\hat V(s) = \frac1n\sum_i\sum_{t<H}\gamma^t r(s_t^i, a_t^i)`. Returns
    ``(V_hat, calls)`` with ``calls = states.size * n_rollouts * horizon`` generative-model calls
    (each returns a reward and a next state). The truncation biases the estimate down by at most
    :math:`\gamma^H \max r / (1-\gamma)`.
    """
    n_rollouts, horizon = _count("n_rollouts", n_rollouts), _count("horizon", horizon, 0)
    pi = check_policy(mdp, pi)
    states = np.asarray(states)
    if states.size and (states.min() < 0 or states.max() >= mdp.n_states):
        raise ValueError(f"states must lie in [0, {mdp.n_states})")
    s = np.repeat(states.reshape(-1), n_rollouts)
    ret, disc = np.zeros(s.size), 1.0
    cum = np.cumsum(pi, axis=1)
    for _ in range(horizon):
        a = np.minimum((cum[s] < rng.random(s.size)[:, None]).sum(axis=1), mdp.n_actions - 1)
        ret += disc * mdp.r[s, a]
        s = sample_next_states(mdp, s, a, rng)
        disc *= mdp.gamma
    return ret.reshape(-1, n_rollouts).mean(axis=1).reshape(states.shape), s.size * horizon


def linear_lookahead_q(mdp: TabularMDP, features, anchors, pi, h: int, m: int,
                       rollouts: tuple[int, int], rng: np.random.Generator) -> tuple[np.ndarray, int]:
    r"""Least-squares estimate of :math:`Q_h^k = r + \gamma P\, T^{h-1} V^{\pi}` on features.

    ``features`` has shape (S, A, d); ``anchors`` is an (N, 2) array of (state, action) pairs whose
    features span :math:`\mathbb R^d`. Level 1: at every anchor draw ``m`` next states, estimate
    :math:`V^\pi` there by ``rollouts = (n, H)`` truncated rollouts, and fit
    :math:`w_1` to :math:`r + \gamma\,\mathrm{mean}\,\hat V` by least squares. Level
    :math:`j \le h`: draw fresh next states and fit :math:`w_j` to
    :math:`r + \gamma\,\mathrm{mean}_{s'}\max_{a'}\phi(s',a')^\top w_{j-1}`. Returns
    ``(Phi w_h, calls)``; ``calls = N m (n H + h)`` involves no :math:`|S|`.
    """
    h, m = _depth("h", h), _count("m", m)
    phi = np.asarray(features, dtype=np.float64)
    S, A = mdp.n_states, mdp.n_actions
    if phi.ndim != 3 or phi.shape[:2] != (S, A):
        raise ValueError(f"features must have shape (S, A, d) = ({S}, {A}, d), got {phi.shape}")
    anchors = np.asarray(anchors)
    if anchors.ndim != 2 or anchors.shape[1] != 2 or anchors.shape[0] < phi.shape[2]:
        raise ValueError(f"anchors must be an (N, 2) array of (state, action) pairs with N >= d = "
                         f"{phi.shape[2]}, got shape {anchors.shape}")
    sa, aa = anchors[:, 0], anchors[:, 1]
    design = phi[sa, aa]                                            # (N, d)
    if np.linalg.matrix_rank(design) < phi.shape[2]:
        raise ValueError("the anchors' features must span R^d (the least-squares fit is singular)")
    n_roll, horizon = rollouts
    g = mdp.gamma
    nxt = sample_next_states(mdp, sa[:, None], np.broadcast_to(aa[:, None], (sa.size, m)), rng)
    v_hat, calls = rollout_values(mdp, pi, nxt, n_roll, horizon, rng)
    calls += nxt.size
    w = np.linalg.lstsq(design, mdp.r[sa, aa] + g * v_hat.mean(axis=1), rcond=None)[0]
    for _ in range(h - 1):
        nxt = sample_next_states(mdp, sa[:, None], np.broadcast_to(aa[:, None], (sa.size, m)), rng)
        calls += nxt.size
        target = mdp.r[sa, aa] + g * (phi[nxt] @ w).max(axis=-1).mean(axis=1)
        w = np.linalg.lstsq(design, target, rcond=None)[0]
    return phi @ w, int(calls)


def samples_per_iteration(n_states: int, n_actions: int, h: int, m: int,
                          rollouts: tuple[int, int] | None = None) -> int:
    r"""Generative-model calls of one inexact h-PMD iteration (tabular): the sparse-sampling tree,
    :math:`SAm\sum_{j<h}(Am)^j`, plus, with estimated leaves, :math:`S n H` rollout calls."""
    S, A, h, m = (_count("n_states", n_states), _count("n_actions", n_actions), _depth("h", h),
                  _count("m", m))
    tree = S * A * m * sum((A * m) ** j for j in range(h))
    return int(tree + (0 if rollouts is None else S * rollouts[0] * rollouts[1]))


def _check_eta(eta, n_states: int) -> np.ndarray:
    eta = np.asarray(eta, dtype=np.float64)
    if eta.ndim > 1 or (eta.ndim == 1 and eta.shape != (n_states,)) or np.any(np.isnan(eta)) \
            or np.any(eta < 0):
        raise ValueError(f"eta must be a number >= 0 (inf allowed) or a vector of shape (S,), "
                         f"got {eta!r}")
    return eta.reshape(-1, 1) if eta.ndim == 1 else eta


def _scaled_gaps(q: np.ndarray, eta: np.ndarray) -> np.ndarray:
    """``-eta * (max_a q - q)``, with an exact 0 for greedy actions even when ``eta`` is inf."""
    gap = q.max(axis=1, keepdims=True) - q
    with np.errstate(over="ignore", invalid="ignore"):
        s = -eta * gap
    return np.where(gap == 0, 0.0, s)


def pmd_step(log_pi, q, eta) -> np.ndarray:
    r"""One KL mirror step in log space: :math:`\log\pi' = \log\pi + \eta q - \log\sum_a(\cdot)`.

    ``log_pi`` and ``q`` have shape (S, A); ``eta`` is a number or a per-state vector (S,).
    ``q`` is shifted by its per-state maximum first (the normalisation absorbs the shift), so a
    huge step multiplies only gaps and never overflows. ``eta = inf`` is the limit of the update:
    the mass of ``pi`` restricted to the greedy actions, renormalised (adaptive steps reach it
    when ``c_k`` is tiny and a long-suppressed action becomes greedy). Results are kept at or
    above :data:`LOG_FLOOR`.
    """
    log_pi = np.asarray(log_pi, dtype=np.float64)
    q = np.asarray(q, dtype=np.float64)
    if log_pi.ndim != 2 or q.shape != log_pi.shape:
        raise ValueError(f"log_pi and q must both have shape (S, A); got {log_pi.shape} and "
                         f"{q.shape}")
    eta = _check_eta(eta, q.shape[0])
    z = log_pi + _scaled_gaps(q, eta)          # may hold -inf; a greedy action stays finite
    top = z.max(axis=1, keepdims=True)
    out = z - (top + np.log(np.exp(z - top).sum(axis=1, keepdims=True)))
    return np.maximum(out, LOG_FLOOR)


def project_simplex(x) -> np.ndarray:
    """Euclidean projection of every row of ``x`` onto the probability simplex (sort-based)."""
    x = np.asarray(x, dtype=np.float64)
    if x.ndim != 2:
        raise ValueError(f"x must have shape (S, A), got {x.shape}")
    u = -np.sort(-x, axis=1)
    css = np.cumsum(u, axis=1) - 1.0
    k = np.arange(1, x.shape[1] + 1)
    rho = (u - css / k > 0).sum(axis=1)        # the number of coordinates left positive
    theta = css[np.arange(x.shape[0]), rho - 1] / rho
    return np.maximum(x - theta[:, None], 0.0)


def euclidean_step(pi, q, eta) -> np.ndarray:
    r"""One Euclidean mirror step: :math:`\pi' = \mathrm{Proj}_\Delta(\pi + \eta q)` in every state.

    The projection ignores a per-state constant, so ``q`` is shifted by its maximum first;
    ``eta = inf`` is the limit (the projection of ``pi`` restricted to the greedy actions).
    """
    pi = np.asarray(pi, dtype=np.float64)
    q = np.asarray(q, dtype=np.float64)
    if pi.ndim != 2 or q.shape != pi.shape:
        raise ValueError(f"pi and q must both have shape (S, A); got {pi.shape} and {q.shape}")
    eta = _check_eta(eta, q.shape[0])
    # entries pushed below -1e300 can only end at zero; keeping them finite keeps the sort exact
    return project_simplex(np.maximum(pi + _scaled_gaps(q, eta), LOG_FLOOR))


def step_divergence(q, pi, log_pi=None, mirror: str = "kl") -> np.ndarray:
    r"""Per state, :math:`D(\tilde\pi(\cdot|s), \pi(\cdot|s))` for the greedy policy :math:`\tilde\pi`
    of ``q`` that is closest to ``pi`` (among tied greedy actions, the one ``pi`` favours).

    KL: :math:`-\log\pi(a^\star|s)`. Euclidean: :math:`\tfrac12\|e_{a^\star} - \pi(\cdot|s)\|^2`.
    """
    q = np.asarray(q, dtype=np.float64)
    pi = np.asarray(pi, dtype=np.float64)
    tied = q == q.max(axis=1, keepdims=True)
    a_star = np.where(tied, pi, -np.inf).argmax(axis=1)
    rows = np.arange(q.shape[0])
    if mirror == "kl":
        lp = np.log(pi) if log_pi is None else np.asarray(log_pi, dtype=np.float64)
        return np.maximum(-lp[rows, a_star], 0.0)
    if mirror == "euclidean":
        e = np.zeros_like(pi)
        e[rows, a_star] = 1.0
        return 0.5 * ((e - pi) ** 2).sum(axis=1)
    raise ValueError(f"mirror must be one of {MIRRORS}, got {mirror!r}")


def rate_bound(e0: float, gamma: float, h: int, c0: float, n_iters: int) -> np.ndarray:
    r"""The exact-h-PMD guarantee for :math:`k = 0..K`, with :math:`c_k = c_0\gamma^{2h(k+1)}`:

    .. math:: \|V^\star - V^{\pi_k}\|_\infty \le \gamma^{hk}\Big(\|V^\star - V^{\pi_0}\|_\infty
              + \frac{c_0\,\gamma^{h}}{(1-\gamma)(1-\gamma^{h})}\Big).
    """
    h = _depth("h", h)
    k = np.arange(n_iters + 1)
    return gamma ** (h * k) * (e0 + c0 * gamma ** h / ((1 - gamma) * (1 - gamma ** h)))


@dataclass
class PMDRun:
    """What one h-PMD run measured, iteration by iteration (index ``k = 0..n_iters``)."""

    h: int                      # the depth the step-size schedule assumes (the claimed h)
    lookahead: int              # the depth actually used to compute Q (h unless broken on purpose)
    mirror: str
    gamma: float
    c0: float | None            # None for a constant step size
    gaps: np.ndarray            # ||V* - V^{pi_k}||_inf, shape (K+1,)
    values: np.ndarray          # V^{pi_k}, shape (K+1, S)
    policies: np.ndarray        # pi_k, shape (K+1, S, A)
    log_policies: np.ndarray | None   # log pi_k for the KL mirror map, else None
    etas: np.ndarray            # eta_k, shape (K,)
    backups: np.ndarray         # cumulative Bellman backups spent on lookahead, shape (K+1,)
    samples: np.ndarray         # cumulative generative-model draws (inexact runs), shape (K+1,)
    q_errors: np.ndarray = field(default_factory=lambda: np.zeros(0))  # ||Q_hat - Q_h||_inf

    @property
    def n_iters(self) -> int:
        return len(self.etas)

    @property
    def c(self) -> np.ndarray:
        """The step-size slack :math:`c_k = c_0\\gamma^{2h(k+1)}`, shape (K,)."""
        if self.c0 is None:
            return np.full(self.n_iters, np.nan)
        return self.c0 * self.gamma ** (2 * self.h * (np.arange(self.n_iters) + 1))

    def bound(self) -> np.ndarray:
        """:func:`rate_bound` for this run's claimed ``h``, ``c0`` and starting gap."""
        if self.c0 is None:
            raise ValueError("a constant-step run has no c0; call rate_bound(e0, gamma, h, c0, "
                             "n_iters) with the c0 to compare against")
        return rate_bound(self.gaps[0], self.gamma, self.h, self.c0, self.n_iters)


@single_threaded_blas()
def h_pmd(mdp: TabularMDP, h: int, n_iters: int, *, c0: float | None = None, pi0=None,
          mirror: str = "kl", step: str | float = "adaptive", lookahead: int | None = None,
          samples: int | None = None, rng: np.random.Generator | None = None,
          v_star=None, rollouts: tuple[int, int] | None = None, features=None,
          anchors=None) -> PMDRun:
    r"""Run exact (or, with ``samples``, inexact) h-PMD for ``n_iters`` iterations.

    ``h = 1`` is standard PMD: the same code path, the same step-size rule.

    Parameters
    ----------
    h : the lookahead depth; it also sets the step-size schedule :math:`c_k = c_0\gamma^{2h(k+1)}`.
    c0 : the step-size constant (needed for ``step="adaptive"``).
    pi0 : the starting policy (S, A); uniform by default. The KL map needs full support.
    mirror : ``"kl"`` (natural policy gradient family) or ``"euclidean"``.
    step : ``"adaptive"`` (the paper's rule) or a constant step size (a number).
    lookahead : the depth actually used for :math:`Q`; defaults to ``h``. Passing ``h - 1`` plants
        the bug "claims depth h, computes depth h - 1" that the chapter uses to test its checks.
    samples, rng : estimate :math:`Q_h` by sparse sampling with ``samples`` draws per node.
    rollouts : ``(n, H)``: with ``samples``, estimate :math:`V_k` at the leaves by ``n`` rollouts of
        length ``H`` per state (:func:`rollout_values`) instead of using the exact value.
    features, anchors : with ``samples`` and ``rollouts``, estimate :math:`Q_h` by least squares on
        ``features`` (S, A, d) from the ``anchors`` pairs (:func:`linear_lookahead_q`).
    v_star : the optimal value, if already known (else computed by policy iteration).
    """
    if not isinstance(mdp, TabularMDP):
        raise TypeError(f"mdp must be a TabularMDP, got {type(mdp).__name__}")
    h = _depth("h", h)
    depth = h if lookahead is None else _depth("lookahead", lookahead)
    if isinstance(n_iters, bool) or not isinstance(n_iters, (int, np.integer)) or n_iters < 0:
        raise ValueError(f"n_iters must be an int >= 0, got {n_iters!r}")
    if mirror not in MIRRORS:
        raise ValueError(f"mirror must be one of {MIRRORS}, got {mirror!r}")
    if step == "adaptive":
        if c0 is None or isinstance(c0, bool) or not np.isfinite(c0) or c0 <= 0:
            raise ValueError(f"the adaptive step size needs c0 > 0, got c0={c0!r}")
        c0 = float(c0)
    elif isinstance(step, bool) or not isinstance(step, (int, float, np.floating)) \
            or not np.isfinite(step) or step <= 0:
        raise ValueError(f"step must be 'adaptive' or a positive number, got {step!r}")
    else:
        c0 = None
    if samples is not None and not isinstance(rng, np.random.Generator):
        raise ValueError("an inexact run (samples=...) needs rng, a numpy Generator")
    if (rollouts is not None or features is not None) and samples is None:
        raise ValueError("rollouts and features are options of an inexact run: pass samples=m too")
    if rollouts is not None:
        if not isinstance(rollouts, (tuple, list)) or len(rollouts) != 2:
            raise ValueError(f"rollouts must be a pair (n_rollouts, horizon), got {rollouts!r}")
        rollouts = (_count("n_rollouts", rollouts[0]), _count("horizon", rollouts[1], 0))
    if (features is None) != (anchors is None) or (features is not None and rollouts is None):
        raise ValueError("linear function approximation needs features, anchors and rollouts")
    S, A, g = mdp.n_states, mdp.n_actions, mdp.gamma
    pi = np.full((S, A), 1.0 / A) if pi0 is None else check_policy(mdp, pi0, "pi0").copy()
    log_pi = None
    if mirror == "kl":
        if np.any(pi <= 0):
            raise ValueError("pi0 must give every action positive probability for the KL map")
        log_pi = np.log(pi)
    v_star = optimal_value(mdp)[0] if v_star is None else np.asarray(v_star, dtype=np.float64)

    K = int(n_iters)
    values = np.zeros((K + 1, S))
    policies = np.zeros((K + 1, S, A))
    log_policies = np.zeros((K + 1, S, A)) if mirror == "kl" else None
    etas, q_errors = np.zeros(K), np.zeros(K if samples is not None else 0)
    backups, draws = np.zeros(K + 1, dtype=np.int64), np.zeros(K + 1, dtype=np.int64)
    for k in range(K + 1):
        V = evaluate(mdp, pi)
        values[k], policies[k] = V, pi
        if log_policies is not None:
            log_policies[k] = log_pi
        if k == K:
            break
        if samples is None:
            q = lookahead_q(mdp, V, depth)
            backups[k + 1], draws[k + 1] = backups[k] + depth, draws[k]
        else:
            if features is not None:
                q, calls = linear_lookahead_q(mdp, features, anchors, pi, depth, samples, rollouts,
                                              rng)
            else:
                leaves, calls = (V, 0) if rollouts is None else \
                    rollout_values(mdp, pi, np.arange(S), rollouts[0], rollouts[1], rng)
                q, tree_calls = sampled_lookahead_q(mdp, leaves, depth, samples, rng)
                calls += tree_calls
            q_errors[k] = np.abs(q - lookahead_q(mdp, V, depth)).max()   # diagnostics only
            backups[k + 1], draws[k + 1] = backups[k], draws[k] + calls
        if c0 is not None:
            c_k = c0 * g ** (2 * h * (k + 1))
            d = step_divergence(q, pi, log_pi, mirror).max()
            with np.errstate(over="ignore", divide="ignore"):
                eta = 0.0 if d == 0 else d / c_k      # inf is allowed: the greedy limit
        else:
            eta = float(step)
        etas[k] = eta
        if mirror == "kl":
            log_pi = pmd_step(log_pi, q, eta)
            pi = np.exp(log_pi)
            pi /= pi.sum(axis=1, keepdims=True)   # exact row sums for evaluation
        else:
            pi = euclidean_step(pi, q, eta)
    gaps = np.abs(v_star[None, :] - values).max(axis=1)
    return PMDRun(h=h, lookahead=depth, mirror=mirror, gamma=g, c0=c0, gaps=gaps, values=values,
                  policies=policies, log_policies=log_policies, etas=etas, backups=backups,
                  samples=draws, q_errors=q_errors)
