r"""Bonus-penalty peer prediction for comparison data and Ising-networked signals.

After Chen, Feng and Yu, *Carrot and Stick: Eliciting Comparison Data and Beyond* (NeurIPS 2024).
The exact peer-assignment rules are our reconstruction (see the chapter).

**Bonus-penalty payment.** Agent :math:`i` reports :math:`r_i\in\{\pm1\}`; the mechanism picks a
*bonus* peer :math:`j` and a *penalty* peer :math:`k` and pays

.. math::  P_i = \mathbb 1[r_i = r_j] - \mathbb 1[r_i = r_k].

If everyone else is truthful, agent :math:`i` with signal :math:`s` earns
:math:`\Pr[s_j = r\mid s] - \Pr[s_k = r\mid s]` by reporting :math:`r`, so the truthful report beats
the flipped one by :math:`2(\Pr[s_j = s\mid s] - \Pr[s_k = s\mid s])`: truth-telling is a strict
Bayesian Nash equilibrium iff the bonus peer agrees more often than the penalty peer, for both
signals (*uniform dominance*).

**Comparisons.** Items have latent qualities :math:`\theta\sim N(0, I)`; an agent comparing
:math:`(x, y)` sees :math:`+1` (":math:`x` beats :math:`y`") with probability
:math:`F((\theta_x-\theta_y)/\tau)`, :math:`F` the logistic (Bradley–Terry) or normal (Thurstone)
cdf, independently across agents given :math:`\theta`. Agent :math:`i` compares :math:`(a, b)`;
the bonus peer compares :math:`(a, c)` and the penalty peer :math:`(b, c)` for a third item
:math:`c`, with :math:`+1` meaning ":math:`a` beats :math:`c`" and ":math:`b` beats :math:`c`". If
:math:`a` beat :math:`b` in :math:`i`'s eyes, :math:`a` is more likely than :math:`b` to beat
:math:`c` (strong stochastic transitivity), which is uniform dominance.

**Symmetric strategies** are written :math:`\sigma=(\sigma_+,\sigma_-)`, the probabilities of
reporting :math:`+1` after signal :math:`+1` and :math:`-1`: truth is :math:`(1,0)`, the flip
:math:`(0,1)`, and :math:`\sigma_+=\sigma_-` is uninformative.

**Ising networks.** Signals on a graph with :math:`\Pr(s)\propto\exp(J\sum_{uv\in E}s_us_v+h\sum_u
s_u)`, computed by exact enumeration of the :math:`2^n` states.
"""
from __future__ import annotations

import itertools

import numpy as np
from scipy import special
from scipy.sparse.csgraph import connected_components, shortest_path

__all__ = [
    "bonus_penalty_payment", "comparison_joints", "expected_payment", "deviation_gains",
    "is_strict_truthful_bne", "symmetric_profile_table", "ising_states", "ising_probabilities",
    "pair_joint", "ising_deviation_gains", "forest_correlations", "network_condition",
    "common_friends_correlations", "population_world", "population_payments",
    "PURE_STRATEGIES", "unilateral_payments", "best_deviation",
]

SIGNALS = (1, -1)  # index 0 is the signal +1, index 1 the signal -1


def bonus_penalty_payment(r_i, r_j, r_k):
    """:math:`1[r_i = r_j] - 1[r_i = r_k]`, elementwise."""
    r_i, r_j, r_k = (np.asarray(r) for r in (r_i, r_j, r_k))
    return (r_i == r_j).astype(float) - (r_i == r_k).astype(float)


def _link(name: str):
    if name == "bt":
        return special.expit
    if name == "thurstone":
        return special.ndtr
    if name == "noise":             # a negative control: signals carry no information
        return lambda z: np.full(np.shape(z), 0.5)
    raise ValueError(f"link must be 'bt', 'thurstone' or 'noise', got {name!r}")


def comparison_joints(tau: float, link: str = "bt", n_nodes: int = 30):
    r"""Exact joint laws of (agent's signal, bonus peer's signal) and (agent's, penalty peer's).

    Returns two 2x2 arrays ``P_ij[a, b] = Pr(s_i = SIGNALS[a], s_j = SIGNALS[b])`` (likewise
    ``P_ik``), integrating the three latent qualities with an ``n_nodes``-point Gauss–Hermite rule
    in each dimension (the integrand is smooth, so 20-30 nodes give ~1e-12 accuracy).
    """
    if not tau > 0:
        raise ValueError(f"tau must be positive, got {tau!r}")
    if not isinstance(n_nodes, (int, np.integer)) or n_nodes < 2:
        raise ValueError(f"n_nodes must be an int >= 2, got {n_nodes!r}")
    F = _link(link)
    x, w = np.polynomial.hermite_e.hermegauss(n_nodes)   # weight exp(-x^2/2)
    w = w / w.sum()
    ta, tb, tc = np.meshgrid(x, x, x, indexing="ij")
    W = w[:, None, None] * w[None, :, None] * w[None, None, :]
    p_i = F((ta - tb) / tau)          # Pr(a beats b)
    p_j = F((ta - tc) / tau)          # Pr(a beats c)
    p_k = F((tb - tc) / tau)          # Pr(b beats c)

    def joint(p, q):
        out = np.empty((2, 2))
        for ai, s in enumerate(SIGNALS):
            ps = p if s == 1 else 1 - p
            for bi, t in enumerate(SIGNALS):
                qt = q if t == 1 else 1 - q
                out[ai, bi] = float((W * ps * qt).sum())
        return out

    return joint(p_i, p_j), joint(p_i, p_k)


def _check_joint(name, P):
    P = np.asarray(P, dtype=float)
    if P.shape != (2, 2) or np.any(P < -1e-15) or abs(P.sum() - 1) > 1e-9:
        raise ValueError(f"{name} must be a 2x2 joint probability table")
    return P


def _check_sigma(name, s):
    s = np.asarray(s, dtype=float)
    if s.shape != (2,) or np.any((s < 0) | (s > 1)):
        raise ValueError(f"{name} must be (P(report +1 | +1), P(report +1 | -1)) in [0, 1]^2")
    return s


def _agree(x, y):
    # probability that two independent reports agree, each +1 with prob x and y
    return x * y + (1 - x) * (1 - y)


def expected_payment(P_ij, P_ik, sigma_i, sigma_peers, penalty: float = 1.0) -> float:
    """Agent i's expected payment ``1[r_i = r_j] - penalty * 1[r_i = r_k]`` when it plays
    ``sigma_i`` and both peers play ``sigma_peers`` (each a pair (P(+1 | +1), P(+1 | -1))).
    ``penalty=1`` is the bonus-penalty payment; ``penalty=0`` is plain output agreement."""
    P_ij, P_ik = _check_joint("P_ij", P_ij), _check_joint("P_ik", P_ik)
    si, so = _check_sigma("sigma_i", sigma_i), _check_sigma("sigma_peers", sigma_peers)
    A = _agree(si[:, None], so[None, :])
    return float((P_ij * A).sum() - penalty * (P_ik * A).sum())


def deviation_gains(P_ij, P_ik) -> np.ndarray:
    """Truthful minus flipped expected payment for each own signal (+1, -1), peers truthful:
    ``2 (Pr[s_j = s | s] - Pr[s_k = s | s])``."""
    P_ij, P_ik = _check_joint("P_ij", P_ij), _check_joint("P_ik", P_ik)
    gains = np.empty(2)
    for a in range(2):
        m = P_ij[a].sum()            # Pr(s_i = SIGNALS[a])
        agree_j = P_ij[a, a] / m
        agree_k = P_ik[a, a] / P_ik[a].sum()
        gains[a] = (agree_j - (1 - agree_j)) - (agree_k - (1 - agree_k))
    return gains


def is_strict_truthful_bne(P_ij, P_ik, tol: float = 0.0) -> bool:
    """Truth-telling is a strict BNE: flipping one's report loses, after either signal."""
    return bool(np.all(deviation_gains(P_ij, P_ik) > tol))


def symmetric_profile_table(P_ij, P_ik, grid, penalty: float = 1.0) -> dict:
    """For every symmetric profile sigma on ``grid x grid``: the payment when all play it, and
    whether it is a Bayesian Nash equilibrium (no signal-contingent deviation gains more than
    1e-12). Returns ``{"sigma": (G, 2), "payment": (G,), "is_bne": (G,)}``."""
    P_ij, P_ik = _check_joint("P_ij", P_ij), _check_joint("P_ik", P_ik)
    grid = np.asarray(grid, dtype=float)
    sig = np.array(list(itertools.product(grid, grid)))
    D = P_ij - penalty * P_ik
    # payment when all play sigma: sum_{s,s'} D[s,s'] agree(sigma_s, sigma_s')
    pay = np.einsum("ab,gab->g", D, _agree(sig[:, :, None], sig[:, None, :]))
    # the payoff is linear in one's own sigma, so checking the four pure strategies suffices
    pure = np.array(list(itertools.product((0.0, 1.0), repeat=2)))
    dev = np.einsum("ab,dgab->dg", D, _agree(pure[:, None, :, None], sig[None, :, None, :]))
    return {"sigma": sig, "payment": pay, "is_bne": dev.max(axis=0) <= pay + 1e-12}


# ------------------------------------------------------------------------------ Ising networks
def ising_states(n: int) -> np.ndarray:
    """All 2^n spin configurations as an int8 array (2^n, n) of +-1."""
    if not isinstance(n, (int, np.integer)) or not 1 <= n <= 20:
        raise ValueError(f"n must be an int in [1, 20] for exact enumeration, got {n!r}")
    idx = np.arange(2**n)[:, None]
    return (1 - 2 * ((idx >> np.arange(n)) & 1)).astype(np.int8)


def ising_probabilities(adjacency, J: float, h: float, states=None) -> np.ndarray:
    r""":math:`\Pr(s)\propto\exp(J\sum_{u<v}A_{uv}s_us_v + h\sum_us_u)` over all states."""
    A = np.asarray(adjacency, dtype=float)
    if A.ndim != 2 or A.shape[0] != A.shape[1] or not np.allclose(A, A.T):
        raise ValueError("adjacency must be a symmetric square matrix")
    n = A.shape[0]
    S = ising_states(n) if states is None else states
    Sf = S.astype(float)
    energy = 0.5 * J * np.einsum("su,uv,sv->s", Sf, A, Sf) + h * Sf.sum(axis=1)
    energy -= energy.max()
    p = np.exp(energy)
    return p / p.sum()


def pair_joint(probs: np.ndarray, states: np.ndarray, u: int, v: int) -> np.ndarray:
    """2x2 joint law of (s_u, s_v) in SIGNALS order, from an enumerated distribution."""
    out = np.empty((2, 2))
    for a, s in enumerate(SIGNALS):
        for b, t in enumerate(SIGNALS):
            out[a, b] = probs[(states[:, u] == s) & (states[:, v] == t)].sum()
    return out


def ising_deviation_gains(probs: np.ndarray, states: np.ndarray, i: int, j: int, k: int,
                          penalty: float = 1.0) -> np.ndarray:
    """The network mechanism's incentive, from the enumerated law of all signals: agent ``i``'s
    expected payment ``1[r_i = r_j] - penalty 1[r_i = r_k]`` when it reports its signal, minus when
    it flips it, for each own signal (``SIGNALS`` order), with the bonus peer ``j`` and the penalty
    peer ``k`` truthful. Truth-telling is a strict BNE for ``i`` iff both gains are positive."""
    probs = np.asarray(probs, dtype=float)
    if probs.ndim != 1 or probs.shape[0] != states.shape[0]:
        raise ValueError("probs must hold one probability per enumerated state")
    if len({i, j, k}) != 3:
        raise ValueError(f"agent and peers must be three different nodes, got {(i, j, k)}")
    gains = np.empty(2)
    for a, s in enumerate(SIGNALS):
        m = states[:, i] == s
        w = probs[m] / probs[m].sum()
        sj, sk = states[m, j], states[m, k]

        def pay(r):
            return np.sum(w * ((sj == r).astype(float) - penalty * (sk == r)))

        gains[a] = pay(s) - pay(-s)
    return gains


def forest_correlations(adjacency, J: float) -> np.ndarray:
    r"""All pairwise correlations :math:`E[s_us_v]` of a zero-field Ising model on a *forest*, in
    closed form from the graph alone: :math:`\tanh(J)^{d(u,v)}` with :math:`d` the graph distance,
    and 0 between different trees. (On a tree the spins along a path are a Markov chain in which
    each edge keeps the sign with probability :math:`(1+\tanh J)/2`, independently.)"""
    A = np.asarray(adjacency, dtype=float)
    if A.ndim != 2 or A.shape[0] != A.shape[1] or not np.allclose(A, A.T) \
            or not np.all(np.isin(A, (0.0, 1.0))) or np.any(np.diag(A) != 0):
        raise ValueError("adjacency must be a symmetric 0/1 matrix with an empty diagonal")
    n = A.shape[0]
    n_comp, _ = connected_components(A, directed=False)
    if int(np.triu(A).sum()) != n - n_comp:
        raise ValueError("the graph has a cycle: the closed form holds on forests only")
    D = shortest_path(A, directed=False, unweighted=True)
    finite = np.isfinite(D)
    return np.where(finite, np.tanh(J) ** np.where(finite, D, 0.0), 0.0)


def network_condition(c_ij: float, c_ik: float, mu_j: float = 0.0, mu_k: float = 0.0) -> float:
    r"""The uniform-dominance condition in terms of the signals' moments: truth-telling is a strict
    BNE of the bonus-penalty payment (bonus peer ``j``, penalty peer ``k``, both truthful) iff

    .. math::  E[s_is_j] - E[s_is_k] > |E[s_j] - E[s_k]| ,

    since agent ``i`` with signal ``s`` gains :math:`(c_{ij}-c_{ik}+s(\mu_j-\mu_k))/(1+s\mu_i)` by
    telling the truth. Returns the margin (left minus right side): positive iff truthful."""
    return float((c_ij - c_ik) - abs(mu_j - mu_k))


def common_friends_correlations(m: int, J: float, h: float = 0.0) -> tuple[float, float]:
    r"""Two hubs :math:`v_0, v_{m+1}` that are *not* adjacent but share :math:`m` common friends
    (the complete bipartite graph :math:`K_{2,m}`). Returns
    :math:`(E[s_{v_0}s_{v_1}], E[s_{v_0}s_{v_{m+1}}])`: a neighbour's and the non-neighbour
    hub's correlation with :math:`v_0`. Exact: given the hubs' spins the friends are independent,
    each in the field :math:`J(s_0+s_{m+1})+h`."""
    if not isinstance(m, (int, np.integer)) or m < 1:
        raise ValueError(f"m must be a positive int, got {m!r}")
    num_nb = num_hub = Z = 0.0
    logs = []
    for s0 in SIGNALS:
        for s1 in SIGNALS:
            f = J * (s0 + s1) + h
            logw = h * (s0 + s1) + m * np.log(2 * np.cosh(f))
            logs.append((s0, s1, f, logw))
    mx = max(l[3] for l in logs)
    for s0, s1, f, logw in logs:
        w = np.exp(logw - mx)
        Z += w
        num_hub += w * s0 * s1
        num_nb += w * s0 * np.tanh(f)          # E[s_0 s_friend | hubs] = s_0 tanh(field)
    return float(num_nb / Z), float(num_hub / Z)


# ------------------------------------------------------------------------------ populations
def population_world(rng: np.random.Generator, n_agents: int, n_items: int, tau: float,
                     link: str = "bt") -> dict:
    """One world of the population experiment: latent qualities, every agent compares one random
    pair and sees a noisy signal, and the mechanism assigns each agent a bonus and a penalty peer.

    For agent ``i`` comparing ``(a, b)`` it draws a third item ``c`` uniformly among those for
    which some other agent compared ``(a, c)`` and some other agent compared ``(b, c)``, then one
    such agent of each kind uniformly. Returns ``signal`` (+1: first item of the pair won),
    ``pair``, ``bonus``/``penalty`` (peer indices, -1 when no peer exists) and
    ``bonus_sign``/``penalty_sign`` (+1 or -1: multiply a peer's report by it to read it as
    "a beats c" / "b beats c").
    """
    if n_items < 3 or n_agents < 3:
        raise ValueError("need at least 3 items and 3 agents")
    F = _link(link)
    theta = rng.standard_normal(n_items)
    pairs = np.array([rng.choice(n_items, size=2, replace=False) for _ in range(n_agents)])
    p_first = F((theta[pairs[:, 0]] - theta[pairs[:, 1]]) / tau)
    signal = np.where(rng.random(n_agents) < p_first, 1, -1)
    by_pair: dict[tuple[int, int], list[int]] = {}
    count = np.zeros((n_items, n_items), dtype=int)
    for ag, (x, y) in enumerate(pairs):
        by_pair.setdefault((min(x, y), max(x, y)), []).append(ag)
        count[x, y] += 1
        count[y, x] += 1
    bonus = np.full(n_agents, -1)
    penalty = np.full(n_agents, -1)
    bsign = np.zeros(n_agents, dtype=int)
    psign = np.zeros(n_agents, dtype=int)
    for i, (a, b) in enumerate(pairs):
        # agent i compared (a, b) only, so it is never among the (a, c) or (b, c) raters
        ok = (count[a] > 0) & (count[b] > 0)
        ok[[a, b]] = False
        cs = np.nonzero(ok)[0]
        if cs.size == 0:
            continue
        c = cs[rng.integers(cs.size)]
        J_ = by_pair[(min(a, c), max(a, c))]
        K_ = by_pair[(min(b, c), max(b, c))]
        j, k = J_[rng.integers(len(J_))], K_[rng.integers(len(K_))]
        bonus[i], penalty[i] = j, k
        bsign[i] = 1 if pairs[j, 0] == a else -1      # j's "+1" means pairs[j, 0] won
        psign[i] = 1 if pairs[k, 0] == b else -1
    return {"signal": signal, "pair": pairs, "bonus": bonus, "penalty": penalty,
            "bonus_sign": bsign, "penalty_sign": psign, "theta": theta}


def population_payments(world: dict, reports, penalty_weight: float = 1.0) -> np.ndarray:
    """Every agent's payment ``1[r_i = r_j] - w 1[r_i = r_k]`` for a report profile (nan for
    agents without peers)."""
    r = np.asarray(reports)
    if r.shape != world["signal"].shape or not np.all(np.isin(r, (1, -1))):
        raise ValueError("reports must hold +1/-1, one per agent")
    ok = world["bonus"] >= 0
    out = np.full(r.shape, np.nan)
    rj = r[world["bonus"][ok]] * world["bonus_sign"][ok]
    rk = r[world["penalty"][ok]] * world["penalty_sign"][ok]
    out[ok] = (r[ok] == rj).astype(float) - penalty_weight * (r[ok] == rk).astype(float)
    return out


#: The four signal-contingent pure strategies of one agent: (report after signal +1, report after
#: signal -1). Every mixed strategy's expected payment is a mixture of these four's.
PURE_STRATEGIES = {"truthful": (1, -1), "flip": (-1, 1), "always +1": (1, 1), "always -1": (-1, -1)}


def unilateral_payments(world: dict, strategy, penalty_weight: float = 1.0) -> np.ndarray:
    """Each agent's own payment if it alone plays ``strategy`` and everyone else stays truthful.

    ``strategy`` is ``(report after signal +1, report after signal -1)``, each +1 or -1, or a name
    in :data:`PURE_STRATEGIES`. An agent's payment depends only on its own report and its two
    peers' reports, and its peers stay truthful, so one vectorised pass gives every agent's
    unilateral deviation at once. Agents without peers get nan.
    """
    if isinstance(strategy, str):
        if strategy not in PURE_STRATEGIES:
            raise ValueError(f"unknown strategy {strategy!r}; known: {list(PURE_STRATEGIES)}")
        strategy = PURE_STRATEGIES[strategy]
    strategy = tuple(int(r) for r in strategy)
    if len(strategy) != 2 or not all(r in (1, -1) for r in strategy):
        raise ValueError(f"strategy must be (report after +1, report after -1), each +1 or -1, "
                         f"got {strategy!r}")
    s = world["signal"]
    ok = world["bonus"] >= 0
    own = np.where(s == 1, strategy[0], strategy[1])
    rj = s[world["bonus"][ok]] * world["bonus_sign"][ok]
    rk = s[world["penalty"][ok]] * world["penalty_sign"][ok]
    out = np.full(s.shape, np.nan)
    out[ok] = (own[ok] == rj).astype(float) - penalty_weight * (own[ok] == rk).astype(float)
    return out


def best_deviation(world: dict, penalty_weight: float = 1.0) -> dict:
    r"""A lone deviator's best response to a truthful population, found in the world's payments.

    Every agent is a potential deviator with the same information (its own signal), so a
    strategy's value to a deviator is its mean unilateral payment over the world's agents
    (:func:`unilateral_payments`). Returns ``values`` (strategy name -> mean payment),
    ``best_response`` (the best of the four pure strategies, truth included), ``best_deviation``
    (the best one *other than* truth) and ``loss``: truth's value minus the best deviation's.
    Chosen with hindsight of this world's payments, the deviation is the most favourable a
    deviator could pick, so a positive ``loss`` is a conservative sign that truth is a strict best
    response. Mixed strategies pay a mixture of pure ones, so none does better than the best pure
    one; those close to truth lose little, in proportion to how often they deviate.
    """
    values = {name: float(np.nanmean(unilateral_payments(world, name, penalty_weight)))
              for name in PURE_STRATEGIES}
    others = {k: v for k, v in values.items() if k != "truthful"}
    dev = max(others, key=others.get)
    return {"values": values, "best_response": max(values, key=values.get),
            "best_deviation": dev, "loss": values["truthful"] - values[dev]}
