r"""Zero-shot transfer on a tabular MDP: reward-free data, new state rewards, baselines, exact returns.

The setting of DiSPOs (Zhu et al., NeurIPS 2024) made exactly solvable. A behaviour policy collects
reward-free trajectories; afterwards a reward :math:`r(s)=\phi(s)^\top w` is revealed (here through
reward labels on the data's states, :func:`fit_reward_weights`) and each method must act at once,
without further learning. Returns are state rewards discounted from the start state,
:math:`V^\pi(s)=\mathbb E_\pi\sum_{t\ge0}\gamma^t r(s_t)`, so with successor features
:math:`\psi^\pi(s)=\mathbb E_\pi\sum_t\gamma^t\phi(s_t)` one has :math:`V^\pi(s)=w^\top\psi^\pi(s)`.

* :func:`random_walk_data`: trajectories of the uniform-random behaviour from uniform start states.
* :func:`empirical_model`, :func:`behaviour_policy`: the count (maximum-likelihood) estimates
  :math:`\hat P(s'|s,a)` and :math:`\hat\beta(a|s)`.
* :func:`behaviour_successor_features`: the exact :math:`\psi^{\hat\beta}=(I-\gamma\hat P_{\hat\beta})
  ^{-1}\Phi` of the data's behaviour on the data's model, the mean that a distributional outcome
  model must reproduce.
* :func:`sf_greedy_actions`: classical successor-feature transfer, one step of policy improvement
  on the behaviour, :math:`\arg\max_a w^\top(\phi(s)+\gamma\hat P(s,a)\psi^{\hat\beta})`.
* :func:`shooting_rollouts` / :func:`shooting_actions`: model-based MPC by random shooting on a
  learned one-step model (optionally corrupted, :func:`noisy_model`).
* :func:`goal_rewards`, :func:`dense_rewards`: the task families; :func:`policy_values` evaluates a
  deterministic Markov policy exactly; :func:`normalized_return` is
  :math:`(J-J_{\rm rand})/(J^\star-J_{\rm rand})`.

A planner that re-plans at every step from fixed random numbers per state is a deterministic
Markov policy (one action per state), so every method here is evaluated *exactly* by a linear
solve on the true MDP: no rollout noise in any return.
"""
from __future__ import annotations

import numpy as np

from .finite_horizon import sample_trajectories
from .mdp import TabularMDP, deterministic_policy, evaluate, sample_next_states

__all__ = ["random_walk_data", "empirical_model", "behaviour_policy",
           "behaviour_successor_features", "fit_reward_weights", "fourier_features", "goal_weights",
           "dense_weights", "goal_rewards", "dense_rewards",
           "state_reward_mdp", "policy_values", "normalized_return", "sf_greedy_actions",
           "noisy_model", "shooting_rollouts", "shooting_actions", "rollout_outcomes"]


def _int(name: str, v, lo: int = 1) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < lo:
        raise ValueError(f"{name} must be an int >= {lo}, got {v!r}")
    return int(v)


def _rng(rng) -> np.random.Generator:
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng must be a numpy Generator (reprobook.rng(seed, ...)), got "
                        f"{type(rng).__name__}")
    return rng


def random_walk_data(mdp: TabularMDP, n_traj: int, length: int, rng: np.random.Generator
                     ) -> tuple[np.ndarray, np.ndarray]:
    """``n_traj`` trajectories of ``length`` uniform-random actions from uniform start states.

    Returns ``(states, actions)`` of shapes (n_traj, length + 1) and (n_traj, length):
    ``states[:, t + 1]`` is where ``actions[:, t]`` led. Nothing in it depends on a reward.
    """
    if not isinstance(mdp, TabularMDP):
        raise TypeError(f"mdp must be a TabularMDP, got {type(mdp).__name__}")
    n_traj, length = _int("n_traj", n_traj), _int("length", length)
    S, A = mdp.n_states, mdp.n_actions
    s, a = sample_trajectories(mdp.P, np.full(S, 1.0 / S), np.full((S, A), 1.0 / A), length + 1,
                               n_traj, _rng(rng))
    return s, a[:, :-1]


def _check_data(states, actions, S: int, A: int) -> tuple[np.ndarray, np.ndarray]:
    states, actions = np.asarray(states), np.asarray(actions)
    if states.ndim != 2 or actions.ndim != 2 or states.shape != (actions.shape[0],
                                                                  actions.shape[1] + 1):
        raise ValueError(f"states must be (n, T + 1) and actions (n, T); got {states.shape} and "
                         f"{actions.shape}")
    if states.min() < 0 or states.max() >= S or actions.min() < 0 or actions.max() >= A:
        raise ValueError(f"states must lie in [0, {S}) and actions in [0, {A})")
    return states, actions


def empirical_model(states, actions, n_states: int, n_actions: int
                    ) -> tuple[np.ndarray, np.ndarray]:
    r"""The count model :math:`\hat P(s'|s,a)` (S, A, S) and the counts (S, A). A pair the data
    never tried is modelled as staying put (the model has no evidence to move it)."""
    states, actions = _check_data(states, actions, n_states, n_actions)
    s, a, s2 = states[:, :-1].ravel(), actions.ravel(), states[:, 1:].ravel()
    C = np.zeros((n_states, n_actions, n_states))
    np.add.at(C, (s, a, s2), 1.0)
    n = C.sum(axis=2)
    P = np.where(n[..., None] > 0, C / np.maximum(n[..., None], 1.0), 0.0)
    never = n == 0
    P[never, :] = 0.0
    si, ai = np.nonzero(never)
    P[si, ai, si] = 1.0
    return P, n


def behaviour_policy(states, actions, n_states: int, n_actions: int) -> np.ndarray:
    r"""The empirical behaviour :math:`\hat\beta(a|s)` (S, A); uniform in a state the data never left."""
    states, actions = _check_data(states, actions, n_states, n_actions)
    n = np.zeros((n_states, n_actions))
    np.add.at(n, (states[:, :-1].ravel(), actions.ravel()), 1.0)
    tot = n.sum(axis=1, keepdims=True)
    return np.where(tot > 0, n / np.maximum(tot, 1.0), 1.0 / n_actions)


def behaviour_successor_features(P_hat, beta, features, gamma: float) -> np.ndarray:
    r""":math:`\psi^{\hat\beta}=(I-\gamma\hat P_{\hat\beta})^{-1}\Phi`, shape (S, d): the exact
    successor features of the behaviour on the model (``features`` :math:`\Phi` is (S, d))."""
    mdp = TabularMDP(P_hat, np.zeros(np.shape(beta)), gamma)
    Phi = np.asarray(features, dtype=np.float64)
    if Phi.ndim != 2 or Phi.shape[0] != mdp.n_states:
        raise ValueError(f"features must have shape (S, d) with S = {mdp.n_states}, got {Phi.shape}")
    P_pi = np.einsum("sa,sat->st", np.asarray(beta, dtype=np.float64), mdp.P)
    return np.linalg.solve(np.eye(mdp.n_states) - mdp.gamma * P_pi, Phi)


def fit_reward_weights(features, reward_labels) -> np.ndarray:
    r"""Least-squares :math:`w` with :math:`\phi(s_i)^\top w\approx r_i` on reward-labelled states
    (``features`` (n, d), ``reward_labels`` (n,)); the minimum-norm solution where the data leave
    :math:`w` undetermined (a cell the data never visited gets weight 0 under one-hot features)."""
    X = np.asarray(features, dtype=np.float64)
    y = np.asarray(reward_labels, dtype=np.float64)
    if X.ndim != 2 or y.shape != (X.shape[0],):
        raise ValueError(f"features must be (n, d) and reward_labels (n,); got {X.shape}, {y.shape}")
    return np.linalg.lstsq(X, y, rcond=None)[0]


def fourier_features(cells, dim: int, lengthscale: float, rng: np.random.Generator) -> np.ndarray:
    r"""Random Fourier features of grid positions: :math:`\phi(s)=\sqrt{2/d}\cos(\Omega x_s+b)`,
    shape (S, dim), with :math:`x_s` the (row, col) of ``cells`` (S, 2) scaled to :math:`[-1,1]^2`,
    :math:`\Omega\sim\mathcal N(0,\ell^{-2}I)` and :math:`b\sim U[0,2\pi)`, so that
    :math:`\phi(s)^\top\phi(g)` approximates the RBF kernel :math:`e^{-\lVert x_s-x_g\rVert^2/2\ell^2}`."""
    c = np.asarray(cells, dtype=np.float64)
    if c.ndim != 2 or c.shape[1] != 2:
        raise ValueError(f"cells must have shape (S, 2), got {c.shape}")
    dim = _int("dim", dim)
    if not lengthscale > 0:
        raise ValueError(f"lengthscale must be > 0, got {lengthscale!r}")
    lo, hi = c.min(0), c.max(0)
    x = 2.0 * (c - lo) / np.where(hi > lo, hi - lo, 1.0) - 1.0
    rng = _rng(rng)
    omega = rng.standard_normal((2, dim)) / lengthscale
    b = rng.uniform(0.0, 2.0 * np.pi, dim)
    return np.sqrt(2.0 / dim) * np.cos(x @ omega + b)


def goal_weights(features, n_tasks: int, rng: np.random.Generator) -> np.ndarray:
    r"""``n_tasks`` goal-reaching tasks as reward weights (n_tasks, d): :math:`w=\phi(g)` for distinct
    random goals :math:`g`, so :math:`r(s)=\phi(s)^\top\phi(g)` is a kernel bump peaked at
    :math:`g`, exactly linear in the features."""
    Phi = np.asarray(features, dtype=np.float64)
    n_tasks = _int("n_tasks", n_tasks, 0)
    if n_tasks > Phi.shape[0]:
        raise ValueError(f"at most {Phi.shape[0]} distinct goals, asked for {n_tasks}")
    return Phi[_rng(rng).choice(Phi.shape[0], size=n_tasks, replace=False)]


def dense_weights(dim: int, n_tasks: int, rng: np.random.Generator) -> np.ndarray:
    r"""``n_tasks`` dense tasks as reward weights (n_tasks, dim), :math:`w\sim\mathcal N(0, I)`."""
    return _rng(rng).standard_normal((_int("n_tasks", n_tasks, 0), _int("dim", dim)))


def goal_rewards(n_states: int, n_tasks: int, rng: np.random.Generator) -> np.ndarray:
    """``n_tasks`` goal-reaching state rewards (n_tasks, S): 1 at a distinct random goal cell."""
    n_states, n_tasks = _int("n_states", n_states), _int("n_tasks", n_tasks, 0)
    if n_tasks > n_states:
        raise ValueError(f"at most {n_states} distinct goals, asked for {n_tasks}")
    goals = _rng(rng).choice(n_states, size=n_tasks, replace=False)
    r = np.zeros((n_tasks, n_states))
    r[np.arange(n_tasks), goals] = 1.0
    return r


def dense_rewards(n_states: int, n_tasks: int, rng: np.random.Generator) -> np.ndarray:
    r"""``n_tasks`` dense state rewards (n_tasks, S): :math:`\max(0, z)`, :math:`z\sim\mathcal N(0,1)`."""
    n_states, n_tasks = _int("n_states", n_states), _int("n_tasks", n_tasks, 0)
    return np.maximum(_rng(rng).standard_normal((n_tasks, n_states)), 0.0)


def state_reward_mdp(mdp: TabularMDP, r_state) -> TabularMDP:
    """The same dynamics with reward ``r_state[s]`` for every action taken in ``s``."""
    r = np.asarray(r_state, dtype=np.float64)
    if r.shape != (mdp.n_states,):
        raise ValueError(f"r_state must have shape (S,) = ({mdp.n_states},), got {r.shape}")
    return TabularMDP(mdp.P, np.repeat(r[:, None], mdp.n_actions, axis=1), mdp.gamma)


def policy_values(mdp: TabularMDP, r_state, actions) -> np.ndarray:
    """Exact :math:`V^\\pi` (S,) of the deterministic Markov policy ``actions`` (S,) for reward ``r_state``."""
    task = state_reward_mdp(mdp, r_state)
    return evaluate(task, deterministic_policy(np.asarray(actions), mdp.n_actions))


def normalized_return(J, J_rand, J_opt) -> np.ndarray:
    r""":math:`(J-J_{\rm rand})/(J^\star-J_{\rm rand})`: 0 for the random policy, 1 for the optimum."""
    J, J_rand, J_opt = (np.asarray(x, dtype=np.float64) for x in (J, J_rand, J_opt))
    gap = J_opt - J_rand
    if np.any(gap <= 0):
        raise ValueError("the optimal return must exceed the random policy's on every task")
    return (J - J_rand) / gap


def sf_greedy_actions(P_hat, beta, features, w, gamma: float, counts=None) -> np.ndarray:
    r"""Successor-feature transfer by one step of policy improvement on the behaviour:
    :math:`\arg\max_a w^\top(\phi(s)+\gamma\sum_{s'}\hat P(s'|s,a)\psi^{\hat\beta}(s'))`; with
    ``counts`` (S, A) only actions the data tried in ``s`` are eligible."""
    psi = behaviour_successor_features(P_hat, beta, features, gamma)
    w = np.asarray(w, dtype=np.float64)
    if w.shape != (psi.shape[1],):
        raise ValueError(f"w must have shape ({psi.shape[1]},), got {w.shape}")
    q = (np.asarray(features) @ w)[:, None] + gamma * np.asarray(P_hat) @ (psi @ w)
    if counts is not None:
        q = np.where(np.asarray(counts) > 0, q, -np.inf)
    return q.argmax(axis=1)


def noisy_model(P_hat, noise: float) -> np.ndarray:
    r"""A corrupted one-step model :math:`(1-\epsilon)\hat P+\epsilon\,U`: with probability
    :math:`\epsilon` the model sends the agent to a uniformly random state."""
    P = np.asarray(P_hat, dtype=np.float64)
    if not 0.0 <= noise <= 1.0:
        raise ValueError(f"noise must be a probability in [0, 1], got {noise!r}")
    return (1.0 - noise) * P + noise / P.shape[2]


def shooting_rollouts(P_model, horizon: int, n_seq: int, rng: np.random.Generator
                      ) -> tuple[np.ndarray, np.ndarray]:
    """Random-shooting rollouts in a one-step model from every state at once.

    ``n_seq`` uniform action sequences of ``horizon`` steps per start state, each rolled out by
    sampling the model. Returns ``(first_actions, states)`` of shapes (S, n_seq) and
    (S, n_seq, horizon + 1). They do not depend on a reward, so every task reuses them (and a
    shorter horizon uses their prefixes: the same random numbers for every horizon).
    """
    model = TabularMDP(P_model, np.zeros(np.shape(P_model)[:2]), 0.0)
    horizon, n_seq = _int("horizon", horizon), _int("n_seq", n_seq)
    rng = _rng(rng)
    S, A = model.n_states, model.n_actions
    acts = rng.integers(0, A, size=(S, n_seq, horizon))
    traj = np.empty((S, n_seq, horizon + 1), dtype=np.int64)
    traj[:, :, 0] = np.arange(S)[:, None]
    for t in range(horizon):
        traj[:, :, t + 1] = sample_next_states(model, traj[:, :, t], acts[:, :, t], rng)
    return acts[:, :, 0], traj


def shooting_actions(rollouts, r_state, gamma: float, horizon: int | None = None) -> np.ndarray:
    r"""MPC by random shooting: in each state, the first action of the sequence whose predicted
    return :math:`\sum_{t=1}^{H}\gamma^t r(\hat s_t)` is largest (``horizon`` :math:`H` at most the
    rollouts' length; the first such sequence on ties)."""
    first, traj = rollouts
    H_max = traj.shape[2] - 1
    H = H_max if horizon is None else _int("horizon", horizon)
    if H > H_max:
        raise ValueError(f"horizon {H} is longer than the rollouts ({H_max} steps)")
    r = np.asarray(r_state, dtype=np.float64)
    disc = gamma ** np.arange(1, H + 1)
    pred = (r[traj[:, :, 1:H + 1]] * disc).sum(axis=2)
    return first[np.arange(first.shape[0]), pred.argmax(axis=1)]


def rollout_outcomes(mdp: TabularMDP, policy, features, n: int, length: int,
                     rng: np.random.Generator, return_first_action: bool = False):
    r"""Monte Carlo outcomes of a stochastic ``policy`` (S, A) in the true MDP: from every state,
    ``n`` rollouts of ``length`` steps and their :math:`\psi=\sum_{t<L}\gamma^t\phi(s_t)`;
    shape (S, n, d). Each is the outcome of a real trajectory (up to the :math:`\gamma^L` tail), so
    the value :math:`w^\top\psi` it promises is achievable."""
    if not isinstance(mdp, TabularMDP):
        raise TypeError(f"mdp must be a TabularMDP, got {type(mdp).__name__}")
    n, length = _int("n", n), _int("length", length)
    rng = _rng(rng)
    Phi = np.asarray(features, dtype=np.float64)
    S, A = mdp.n_states, mdp.n_actions
    if Phi.ndim != 2 or Phi.shape[0] != S:
        raise ValueError(f"features must have shape (S, d) with S = {S}, got {Phi.shape}")
    cdf = np.cumsum(np.asarray(policy, dtype=np.float64), axis=1)
    if cdf.shape != (S, A) or np.abs(cdf[:, -1] - 1).max() > 1e-9:
        raise ValueError(f"policy must be (S, A) = ({S}, {A}) with rows summing to 1")
    s = np.repeat(np.arange(S), n)
    psi = np.zeros((S * n, Phi.shape[1]))
    first = None
    for t in range(length):
        psi += mdp.gamma ** t * Phi[s]
        a = np.minimum((cdf[s] <= rng.random(s.size)[:, None]).sum(1), A - 1)
        first = a.reshape(S, n) if first is None else first
        s = sample_next_states(mdp, s, a, rng)
    psi = psi.reshape(S, n, -1)
    return (psi, first) if return_first_action else psi
