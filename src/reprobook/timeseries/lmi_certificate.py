r"""A linear-matrix-inequality certificate of exponential convergence for an unforced CSODE.

The unforced ControlSynth vector field is

.. math::  \dot x = A_0 x + \sum_{j=1}^{M} A_j f_j(W_j x),

with every ``f_j`` acting elementwise, ``f_j(0) = 0`` and slope in ``[0, 1]`` (tanh, ReLU). Then each
coordinate obeys the sector condition ``f (w - f) >= 0`` with ``w = (W_j x)_i``, so for any diagonal
``Λ_j ⪰ 0``: ``2 f_jᵀ Λ_j (W_j x - f_j) >= 0``. With ``V = xᵀ P x`` and ``ζ = (x, f_1, ..., f_M)``,

.. math::  \dot V + 2\varepsilon V \le \dot V + 2\varepsilon V + \sum_j 2 f_j^\top\Lambda_j(W_jx-f_j)
           = \zeta^\top \mathcal M \zeta,

where ``𝓜`` has the blocks ``(0,0) = A_0ᵀP + PA_0 + 2εP``, ``(0,j) = PA_j + W_jᵀΛ_j`` and
``(j,j) = -2Λ_j`` (zeros between sub-networks). So ``P ≻ 0, Λ_j ⪰ 0`` diagonal and ``𝓜 ≺ 0``
give ``V(x(t)) <= e^{-2εt} V(x(0))`` for every start: global exponential convergence to 0. For a
fixed rate ε the conditions are linear in ``(P, Λ_j)``: an LMI, solved here with cvxpy (SCS or
Clarabel). This is the standard Lur'e / S-procedure argument, our reconstruction of the paper's
convergence theorem; the paper's own inequality may be less conservative.

Because the sector bound also holds for differences (slope restriction), the same certificate makes
any two trajectories driven by the same control input converge to each other (incremental
stability); only the unforced, zero-equilibrium case is checked here.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass
class Certificate:
    """The outcome of :func:`find_certificate`.

    ``feasible``: an ε > 0 was found with ``λ_max(𝓜) < 0`` verified in NumPy. ``margin``: the
    solver's optimum of ``t`` in ``𝓜 ⪯ t I`` at the reported rate (negative: feasible). ``P``,
    ``lams`` (the diagonals of the Λ_j) and ``eps`` are the certificate, or the best attempt.
    """
    feasible: bool
    eps: float
    margin: float
    max_eig: float
    P: np.ndarray
    lams: list = field(default_factory=list)


def _check(A0, As, Ws):
    A0 = np.asarray(A0, dtype=np.float64)
    if A0.ndim != 2 or A0.shape[0] != A0.shape[1]:
        raise ValueError(f"A0 must be square, got shape {A0.shape}")
    n = A0.shape[0]
    if len(As) != len(Ws) or len(As) == 0:
        raise ValueError(f"need as many A_j as W_j (at least one), got {len(As)} and {len(Ws)}")
    As = [np.asarray(a, dtype=np.float64) for a in As]
    Ws = [np.asarray(w, dtype=np.float64) for w in Ws]
    for j, (a, w) in enumerate(zip(As, Ws)):
        if a.ndim != 2 or w.ndim != 2 or a.shape[0] != n or w.shape[1] != n or a.shape[1] != w.shape[0]:
            raise ValueError(f"sub-network {j}: A_j must be (n, m) and W_j (m, n) with n = {n}, "
                             f"got {a.shape} and {w.shape}")
    return A0, As, Ws


def lure_matrix(P, A0, As, Ws, lams, eps: float) -> np.ndarray:
    """The block matrix 𝓜 of the module docstring, in NumPy (``lams``: the diagonals of Λ_j)."""
    A0, As, Ws = _check(A0, As, Ws)
    P = np.asarray(P, dtype=np.float64)
    sizes = [A0.shape[0]] + [w.shape[0] for w in Ws]
    off = np.cumsum([0] + sizes)
    M = np.zeros((off[-1], off[-1]))
    M[:sizes[0], :sizes[0]] = A0.T @ P + P @ A0 + 2 * eps * P
    for j, (a, w, lam) in enumerate(zip(As, Ws, lams)):
        lam = np.asarray(lam, dtype=np.float64)
        sl = slice(off[j + 1], off[j + 2])
        blk = P @ a + w.T * lam[None, :]
        M[:sizes[0], sl] = blk
        M[sl, :sizes[0]] = blk.T
        M[sl, sl] = -2 * np.diag(lam)
    return 0.5 * (M + M.T)


def lmi_margin(A0, As, Ws, eps: float, solver: str | None = None):
    """Solve ``min t`` s.t. ``𝓜(P, Λ, ε) ⪯ t I``, ``P ⪰ I``, ``Λ_j ⪰ 0``, ``tr P + Σ tr Λ_j <= s``.

    ``s = 10 (n + Σ m_j)`` keeps the problem bounded (𝓜 is homogeneous in ``(P, Λ)``); ``t < 0``
    means the LMI is feasible at rate ``eps``. Returns ``(t, P, lams)``.
    """
    import cvxpy as cp

    A0, As, Ws = _check(A0, As, Ws)
    n = A0.shape[0]
    P = cp.Variable((n, n), symmetric=True)
    lams = [cp.Variable(w.shape[0], nonneg=True) for w in Ws]
    t = cp.Variable()
    rows = [[A0.T @ P + P @ A0 + 2 * eps * P]
            + [P @ a + w.T @ cp.diag(lam) for a, w, lam in zip(As, Ws, lams)]]
    for j, (a, w, lam) in enumerate(zip(As, Ws, lams)):
        row = [(P @ a + w.T @ cp.diag(lam)).T]
        for k, wk in enumerate(Ws):
            row.append(-2 * cp.diag(lam) if k == j else np.zeros((w.shape[0], wk.shape[0])))
        rows.append(row)
    M = cp.bmat(rows)
    size = M.shape[0]
    budget = 10.0 * size
    cons = [0.5 * (M + M.T) << t * np.eye(size), P >> np.eye(n),
            cp.trace(P) + sum(cp.sum(lam) for lam in lams) <= budget]
    prob = cp.Problem(cp.Minimize(t), cons)
    prob.solve(solver=solver or ("CLARABEL" if "CLARABEL" in cp.installed_solvers() else "SCS"))
    if P.value is None:
        raise RuntimeError(f"the SDP solver returned no solution (status {prob.status})")
    return float(t.value), np.array(P.value), [np.clip(np.array(lam.value), 0, None) for lam in lams]


def find_certificate(A0, As, Ws, eps_max: float = 10.0, iters: int = 12, safety: float = 0.9,
                     solver: str | None = None) -> Certificate:
    """Search the largest rate ε in ``[1e-6 eps_max, eps_max]`` with a feasible LMI, then certify.

    The search bisects on a log scale.

    The certificate is taken at ``safety`` times the largest feasible rate found, so it has slack,
    and is accepted only if ``λ_max(𝓜) < 0`` holds in NumPy for the returned ``(P, Λ)``. When no
    ε > 0 is feasible, the attempt at ε = 0 is returned with ``feasible=False``.
    """
    if not 0 < safety <= 1 or iters < 1 or not eps_max > 0:
        raise ValueError(f"need 0 < safety <= 1, iters >= 1, eps_max > 0; got {safety}, {iters}, {eps_max}")
    A0, As, Ws = _check(A0, As, Ws)
    t0, P0, l0 = lmi_margin(A0, As, Ws, 0.0, solver)
    if t0 >= 0:
        eig = float(np.linalg.eigvalsh(lure_matrix(P0, A0, As, Ws, l0, 0.0)).max())
        return Certificate(False, 0.0, t0, eig, P0, l0)
    # bisect on a log scale between eps_max 1e-6 and eps_max: certified rates of random systems
    # span decades, and a linear bisection from eps_max cannot resolve a small one
    lo, hi = eps_max * 1e-6, eps_max
    if lmi_margin(A0, As, Ws, lo, solver)[0] >= 0:
        lo = 0.0
    else:
        for _ in range(iters):
            mid = float(np.sqrt(lo * hi))
            if lmi_margin(A0, As, Ws, mid, solver)[0] < 0:
                lo = mid
            else:
                hi = mid
    eps = safety * lo if lo > 0 else 0.0
    t, P, lams = lmi_margin(A0, As, Ws, eps, solver)
    eig = float(np.linalg.eigvalsh(lure_matrix(P, A0, As, Ws, lams, eps)).max())
    return Certificate(bool(eps > 0 and eig < 0), eps, t, eig, P, lams)


def envelope_excess(P, eps: float, states: np.ndarray, times: np.ndarray) -> float:
    """``max_{traj, t} V(x(t)) / (V(x(0)) e^{-2εt}) - 1`` over ``states`` of shape (T, B, n).

    At most 0 when every trajectory stays inside the certified envelope.
    """
    states = np.asarray(states, dtype=np.float64)
    if states.ndim != 3 or len(times) != states.shape[0]:
        raise ValueError(f"states must be (T, B, n) with T = len(times), got {states.shape}, {len(times)}")
    V = np.einsum("tbi,ij,tbj->tb", states, np.asarray(P, dtype=np.float64), states)
    bound = V[0][None, :] * np.exp(-2 * eps * np.asarray(times, dtype=np.float64))[:, None]
    return float((V / bound).max() - 1.0)


_ACTS = {"tanh": np.tanh, "relu": lambda z: np.maximum(z, 0.0)}


def unforced_field(A0, As, Ws, activations):
    """The unforced CSODE vector field ``x -> A0 x + Σ A_j f_j(W_j x)`` on NumPy states (..., n).

    ``activations``: one name per sub-network, "tanh" or "relu" (both slope-restricted in [0, 1]).
    """
    A0, As, Ws = _check(A0, As, Ws)
    if len(activations) != len(As):
        raise ValueError(f"need one activation per sub-network ({len(As)}), got {len(activations)}")
    bad = [a for a in activations if a not in _ACTS]
    if bad:
        raise ValueError(f"unknown activations {bad}; known: {sorted(_ACTS)}")
    fs = [_ACTS[a] for a in activations]

    def field(x):
        out = x @ A0.T
        for a, w, f in zip(As, Ws, fs):
            out = out + f(x @ w.T) @ a.T
        return out
    return field
