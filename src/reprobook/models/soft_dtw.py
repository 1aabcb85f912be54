r"""Dynamic time warping, hard and soft, batched over sequences of different lengths.

For a cost matrix :math:`D \in \mathbb R^{T\times M}` (clip :math:`i` against step text :math:`j`,
e.g. :math:`D_{ij} = 1 - \cos(v_i, t_j)`) the DTW recursion is

.. math::

   R_{00} = 0,\quad R_{i0} = R_{0j} = +\infty,\qquad
   R_{ij} = D_{ij} + \operatorname{min}_\gamma\big(R_{i-1,j},\, R_{i-1,j-1},\, R_{i,j-1}\big),

and :math:`\mathrm{DTW}_\gamma(D) = R_{TM}`. With :math:`\gamma = 0` the min is the hard minimum:
the cost of the cheapest monotone alignment path from (1, 1) to (T, M). With :math:`\gamma > 0`,
:math:`\min_\gamma(a) = -\gamma \log \sum_k e^{-a_k/\gamma}` (soft-DTW, Cuturi & Blondel 2017): a
smooth lower bound, :math:`\mathrm{DTW} - \gamma \log N_{\text{paths}} \le \mathrm{DTW}_\gamma \le
\mathrm{DTW}`, differentiable everywhere, whose gradient is the expected alignment under the Gibbs
distribution over paths. As :math:`\gamma \to 0` it tends to hard DTW (unit-tested).

**Batched computation.** Cell :math:`(i, j)` depends only on cells of the two previous
anti-diagonals :math:`i + j - 1` and :math:`i + j - 2`, so the DP runs as a loop over the
:math:`T + M - 1` anti-diagonals, each updated for every sequence of the batch at once. Padding
beyond a sequence's lengths never feeds its own end cell (the recursion only looks up and left),
so each sequence's value is read at :math:`(T_b, M_b)`. A large finite constant stands for
:math:`+\infty`, so that gradients stay finite.

Gradients come from autograd through the loop (the sequences here are at most a few dozen long).
"""
from __future__ import annotations

import torch

__all__ = ["BIG", "soft_min", "soft_dtw", "dtw", "cosine_cost", "dtw_reference"]

#: Stands for +infinity in the DP (finite so that autograd never meets inf - inf).
BIG = 1e10


def soft_min(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, gamma: float) -> torch.Tensor:
    r"""Elementwise :math:`\min_\gamma(a, b, c)`; ``gamma = 0`` is the hard minimum."""
    if gamma == 0:
        return torch.minimum(torch.minimum(a, b), c)
    z = torch.stack([a, b, c]) / -gamma
    return -gamma * torch.logsumexp(z, dim=0)


def _lengths(lengths, B: int, full: int, name: str, device) -> torch.Tensor:
    if lengths is None:
        return torch.full((B,), full, dtype=torch.long, device=device)
    lengths = torch.as_tensor(lengths, dtype=torch.long, device=device)
    if lengths.shape != (B,):
        raise ValueError(f"{name} must have one entry per sequence ({B}), got {tuple(lengths.shape)}")
    if (lengths < 1).any() or (lengths > full).any():
        raise ValueError(f"{name} must lie in [1, {full}], got {lengths.tolist()}")
    return lengths


def soft_dtw(D: torch.Tensor, gamma: float = 0.1, len_x=None, len_y=None) -> torch.Tensor:
    r"""Soft-DTW values ``[B]`` of a batch of cost matrices ``D [B, T, M]``; sequence ``b`` uses
    the top-left ``len_x[b] x len_y[b]`` block (default: all). ``gamma = 0`` gives hard DTW."""
    if D.ndim != 3:
        raise ValueError(f"D must be a [B, T, M] batch of cost matrices, got shape {tuple(D.shape)}")
    if not gamma >= 0:
        raise ValueError(f"gamma must be >= 0, got {gamma}")
    B, T, M = D.shape
    if T < 1 or M < 1:
        raise ValueError(f"empty cost matrices {tuple(D.shape)}")
    dev = D.device
    lx = _lengths(len_x, B, T, "len_x", dev)
    ly = _lengths(len_y, B, M, "len_y", dev)
    big = torch.tensor(BIG, dtype=D.dtype, device=dev)
    Dp = torch.nn.functional.pad(D, (1, 0, 1, 0), value=BIG)            # [B, T+1, M+1]
    i = torch.arange(T + 1, device=dev)
    d = torch.arange(T + M + 1, device=dev)
    j = d[:, None] - i[None, :]                                          # [T+M+1, T+1]
    valid = (i[None, :] >= 1) & (j >= 1) & (j <= M)
    skew = Dp[:, i[None, :].expand_as(j), j.clamp(0, M)]                  # [B, T+M+1, T+1]
    skew = torch.where(valid, skew, big)
    col = big.expand(B, 1)

    def shift(x):                                                        # x[i] -> x[i-1]
        return torch.cat([col, x[:, :-1]], dim=1)

    r0 = torch.where(i == 0, torch.zeros((), dtype=D.dtype, device=dev), big).expand(B, T + 1)
    r1 = big.expand(B, T + 1)
    diags = [r0, r1]
    prev2, prev1 = r0, r1
    for k in range(2, T + M + 1):
        r = skew[:, k] + soft_min(shift(prev1), shift(prev2), prev1, gamma)
        r = torch.where(valid[k], r, big)
        diags.append(r)
        prev2, prev1 = prev1, r
    R = torch.stack(diags, dim=1)                                        # [B, T+M+1, T+1]
    return R[torch.arange(B, device=dev), lx + ly, lx]


def dtw(D: torch.Tensor, len_x=None, len_y=None) -> torch.Tensor:
    """Hard DTW values ``[B]`` (:func:`soft_dtw` with ``gamma = 0``)."""
    return soft_dtw(D, 0.0, len_x, len_y)


def cosine_cost(V: torch.Tensor, Tx: torch.Tensor) -> torch.Tensor:
    r"""``1 - cos(V_i, T_j)`` for ``V [B, T, d]`` and ``Tx [B, M, d]``: ``[B, T, M]``."""
    if V.ndim != 3 or Tx.ndim != 3 or V.shape[0] != Tx.shape[0] or V.shape[2] != Tx.shape[2]:
        raise ValueError(f"need V [B, T, d] and Tx [B, M, d], got {tuple(V.shape)} and "
                         f"{tuple(Tx.shape)}")
    Vn = torch.nn.functional.normalize(V, dim=-1)
    Tn = torch.nn.functional.normalize(Tx, dim=-1)
    return 1.0 - Vn @ Tn.transpose(1, 2)


def dtw_reference(D, gamma: float = 0.0) -> float:
    """The textbook cell-by-cell DP on one ``[T, M]`` cost matrix in float64 Python (for tests)."""
    import math

    rows = [[float(v) for v in row] for row in D]
    T, M = len(rows), len(rows[0])
    inf = math.inf
    R = [[inf] * (M + 1) for _ in range(T + 1)]
    R[0][0] = 0.0
    for a in range(1, T + 1):
        for b in range(1, M + 1):
            prev = (R[a - 1][b], R[a - 1][b - 1], R[a][b - 1])
            if gamma == 0:
                m = min(prev)
            else:
                lo = min(prev)
                m = lo - gamma * math.log(sum(math.exp(-(p - lo) / gamma) for p in prev))
            R[a][b] = rows[a - 1][b - 1] + m
    return R[T][M]
