r"""Truncated path signatures of irregularly sampled series, and the multi-view (global + local)
signature tokens of the Rough Transformer (Moreno-Pino et al., NeurIPS 2024).

**The path.** A sample is observed at times :math:`t_1 < \dots < t_n` in a span :math:`[a, b]` with
values :math:`x_i \in \mathbb R^C` (some of them possibly dropped: ``mask``). Its continuous-time
representation is the time-augmented piecewise-linear interpolant
:math:`X_t = (t, x(t))` of the *observed* points, held constant before the first and after the last
observed point (so :math:`X` lives in :math:`\mathbb R^{d}`, :math:`d = C + 1`).

**The signature.** The depth-:math:`n` truncated signature of :math:`X` on :math:`[s, u]` is the
sequence of iterated integrals

.. math:: S(X)_{s,u} = \Big(\int_{s<r_1<\dots<r_k<u} dX_{r_1}\otimes\dots\otimes dX_{r_k}\Big)_{k=1..n},

:math:`d + d^2 + \dots + d^n` numbers (the constant 1 of level 0 is dropped), level :math:`k`
flattened in row-major order of its :math:`k` indices. For one linear segment with increment
:math:`\Delta` it is the tensor exponential :math:`(\Delta, \Delta^{\otimes 2}/2!, \dots,
\Delta^{\otimes n}/n!)`, and **Chen's identity** glues paths: the signature of a concatenation is the
truncated tensor product, :math:`S(X)_{s,u} = S(X)_{s,r} \otimes S(X)_{r,u}`, i.e. at level
:math:`k`, :math:`\sum_{j=0}^{k} S^{(j)}_{s,r}\otimes S^{(k-j)}_{r,u}`. The per-window signatures are
computed by ``pysiglib`` (C++), the products by :func:`signature_combine` (torch); the tests check
both against a brute-force iterated-integral computation written independently.

**Multi-view tokens.** The span is cut at fixed times :math:`a = u_0 < u_1 < \dots < u_W = b`
(``n_windows`` equal windows). Token :math:`k` is

.. math:: z_k = \big[\,S(X)_{u_0, u_k}\;(\text{global}),\; S(X)_{u_{k-1}, u_k}\;(\text{local})\,\big].

The path is evaluated at every :math:`u_k` by linear interpolation before it is cut; a point on a
linear segment does not change the signature (refinement invariance), so every token is the exact
signature of the same continuous path, whatever the sampling grid: the tokens depend on the
observation times only through the interpolant, which is what makes them robust to the sampling
rate and the sequence length. The global signatures are running Chen products of the local ones.

``windows="index"`` is the ablation without the continuous-time view: window :math:`k` holds the
:math:`k`-th equal share of the *observed points* (by count, not by time), so a change of sampling
rate changes what each window covers.
"""
from __future__ import annotations

import numpy as np
import torch

__all__ = ["signature_length", "path_signature", "signature_combine", "observed_path",
           "evaluate_path", "multiview_signatures", "VIEWS", "WINDOWS"]

VIEWS = ("global", "local", "global+local")
WINDOWS = ("time", "index")


def _pysiglib():
    import pysiglib  # a compiled extension; imported on first use so that the module loads without it
    return pysiglib


def signature_length(dim: int, depth: int) -> int:
    """Number of signature terms of levels 1..depth of a path in R^dim: dim + dim^2 + ... + dim^depth."""
    if dim < 1 or depth < 1:
        raise ValueError(f"signature_length needs dim >= 1 and depth >= 1, got {dim}, {depth}")
    return sum(dim ** k for k in range(1, depth + 1))


def path_signature(path, depth: int) -> torch.Tensor:
    """Truncated signature (levels 1..depth) of the piecewise-linear path through the points
    ``path [..., n, d]`` (float64). Repeated points (zero increments) change nothing."""
    p = torch.as_tensor(path, dtype=torch.float64)
    if p.ndim < 2 or p.shape[-2] < 1:
        raise ValueError(f"path must be [..., points, dim] with at least one point, got {tuple(p.shape)}")
    if depth < 1:
        raise ValueError(f"depth must be >= 1, got {depth}")
    lead, (n, d) = p.shape[:-2], p.shape[-2:]
    flat = p.reshape(-1, n, d)
    if n == 1:  # a constant path: every level is zero
        return torch.zeros(*lead, signature_length(d, depth), dtype=torch.float64)
    out = _pysiglib().sig(flat.contiguous().clone(), int(depth))  # pysiglib wants owned storage
    return torch.as_tensor(out).reshape(*lead, -1)


def _levels(s: torch.Tensor, dim: int, depth: int):
    out, i = [], 0
    for k in range(1, depth + 1):
        out.append(s[..., i:i + dim ** k])
        i += dim ** k
    return out


def signature_combine(s1: torch.Tensor, s2: torch.Tensor, dim: int, depth: int) -> torch.Tensor:
    r"""Chen's product of two truncated signatures ``[..., L]`` of paths in R^dim (s1's path first):
    level k of the result is :math:`a_k + b_k + \sum_{j=1}^{k-1} a_j \otimes b_{k-j}`, flattened
    row-major (the first factor's indices vary slowest). Plain torch: cheap for the small batched
    products of a running (prefix) signature."""
    if s1.shape != s2.shape or s1.shape[-1] != signature_length(dim, depth):
        raise ValueError(f"signatures of shape {tuple(s1.shape)} and {tuple(s2.shape)} do not match "
                         f"dim={dim}, depth={depth}")
    a, b = _levels(s1, dim, depth), _levels(s2, dim, depth)
    out = []
    for k in range(1, depth + 1):
        c = a[k - 1] + b[k - 1]
        for j in range(1, k):
            c = c + (a[j - 1][..., :, None] * b[k - j - 1][..., None, :]).flatten(-2)
        out.append(c)
    return torch.cat(out, dim=-1)


def _check_inputs(times, values, mask, span):
    t = np.asarray(times, dtype=np.float64)
    v = np.asarray(values, dtype=np.float64)
    if t.ndim != 2:
        raise ValueError(f"times must be [batch, points], got shape {t.shape}")
    if v.ndim == 2:
        v = v[..., None]
    if v.ndim != 3 or v.shape[:2] != t.shape:
        raise ValueError(f"values must be [batch, points, channels] matching times {t.shape}, got {v.shape}")
    if np.any(np.diff(t, axis=1) < 0):
        raise ValueError("times must be sorted (non-decreasing) along each row")
    a, b = float(span[0]), float(span[1])
    if not b > a:
        raise ValueError(f"span must be (start, end) with end > start, got {span}")
    if t.min() < a or t.max() > b:
        raise ValueError(f"times must lie in the span [{a}, {b}], got [{t.min()}, {t.max()}]")
    m = np.ones(t.shape, bool) if mask is None else np.asarray(mask, dtype=bool)
    if m.shape != t.shape:
        raise ValueError(f"mask must have the shape of times {t.shape}, got {m.shape}")
    if np.any(m.sum(1) < 1):
        raise ValueError("every sample needs at least one observed point")
    return t, v, m, a, b


def observed_path(times, values, mask=None):
    """The observed points of every sample, moved to the front and padded by repeating the last
    observed point (a zero increment): ``(path [B, n_max, C+1] with time first, lengths [B])``.
    A model that integrates increments (a CDE) or masks padding (attention) sees exactly the
    observed points."""
    t = np.asarray(times, dtype=np.float64)
    v = np.asarray(values, dtype=np.float64)
    v = v[..., None] if v.ndim == 2 else v
    m = np.ones(t.shape, bool) if mask is None else np.asarray(mask, bool)
    if v.shape[:2] != t.shape or m.shape != t.shape:
        raise ValueError(f"times {t.shape}, values {v.shape} and mask {m.shape} do not match")
    lengths = m.sum(1)
    if np.any(lengths < 1):
        raise ValueError("every sample needs at least one observed point")
    # stable sort puts observed points first, in their time order
    order = np.argsort(~m, axis=1, kind="stable")
    pts = np.concatenate([t[..., None], v], axis=2)
    pts = np.take_along_axis(pts, order[..., None], axis=1)
    n_max = int(lengths.max())
    idx = np.minimum(np.arange(n_max)[None, :], lengths[:, None] - 1)
    pts = np.take_along_axis(pts, idx[..., None], axis=1)
    return torch.from_numpy(np.ascontiguousarray(pts)), torch.from_numpy(lengths)


def _interp_rows(x_new, x_obs, y_obs, m):
    """Row-wise linear interpolation (constant beyond the ends) of channels y_obs[b, :, c] known at
    x_obs[b, m[b]], evaluated at x_new[b, :]."""
    B, C = y_obs.shape[0], y_obs.shape[2]
    out = np.empty(x_new.shape + (C,))
    for b in range(B):
        xo = x_obs[b, m[b]]
        for c in range(C):
            out[b, :, c] = np.interp(x_new[b], xo, y_obs[b, m[b], c])
    return out


def evaluate_path(times, values, grid, mask=None, span=(0.0, 1.0)) -> torch.Tensor:
    """The continuous-time path :math:`X_u = (u, x(u))` of every sample (interpolant of its observed
    points, constant beyond them) at the times ``grid [G]``: ``[B, G, C+1]`` float64."""
    t, v, m, a, b = _check_inputs(times, values, mask, span)
    g = np.asarray(grid, dtype=np.float64)
    if g.ndim != 1 or np.any(np.diff(g) < 0):
        raise ValueError(f"grid must be a sorted 1-d array of times, got shape {g.shape}")
    G = np.broadcast_to(g, (t.shape[0], len(g)))
    return torch.from_numpy(np.concatenate([G[..., None], _interp_rows(G, t, v, m)], axis=2))


def _window_paths(t, v, m, n_windows, a, b, windows):
    """Points of every window ``[B, W, n_max, d]`` (padded by repeating the window's last point)."""
    B, L = t.shape
    bounds = np.linspace(a, b, n_windows + 1)
    if windows == "time":
        # the interpolant evaluated on the union of the observation times and the boundaries
        grid = np.concatenate([t, np.broadcast_to(bounds, (B, n_windows + 1))], axis=1)
        order = np.argsort(grid, axis=1, kind="stable")
        grid = np.take_along_axis(grid, order, axis=1)
        pts = np.concatenate([grid[..., None], _interp_rows(grid, t, v, m)], axis=2)
        # where each boundary landed in the sorted grid
        where = np.empty_like(order)
        np.put_along_axis(where, order, np.arange(grid.shape[1])[None, :].repeat(B, 0), axis=1)
        pos = where[:, L:]                                       # [B, W+1]
    else:
        # observed points only, cut into W chunks of (nearly) equal count that share end points
        pts, lengths = observed_path(t, v, m)
        pts, lengths = pts.numpy(), lengths.numpy()
        pos = np.rint(np.arange(n_windows + 1)[None, :] * (lengths[:, None] - 1) / n_windows).astype(int)
    start, end = pos[:, :-1], pos[:, 1:]                         # [B, W], inclusive
    n_max = int((end - start).max()) + 1
    idx = np.minimum(start[..., None] + np.arange(n_max), end[..., None])   # [B, W, n_max]
    gathered = pts[np.arange(B)[:, None, None], idx]            # fancy indexing: one copy
    return torch.from_numpy(gathered)


def multiview_signatures(times, values, n_windows: int, depth: int, *, mask=None,
                         view: str = "global+local", windows: str = "time",
                         span=(0.0, 1.0)) -> torch.Tensor:
    """Signature tokens ``[B, W, F]`` (float64) of a batch of irregularly sampled series.

    ``times [B, n]`` sorted, in ``span``; ``values [B, n, C]`` (or ``[B, n]``); ``mask [B, n]``
    (True = observed; default all). ``view``: ``"global"`` (:math:`S_{u_0,u_k}`), ``"local"``
    (:math:`S_{u_{k-1},u_k}`) or ``"global+local"`` (both, concatenated: ``F = 2 * signature_length``).
    ``windows``: ``"time"`` (fixed times, the Rough Transformer) or ``"index"`` (equal counts of
    observed points, the ablation). See the module docstring for the maths."""
    if view not in VIEWS:
        raise ValueError(f"unknown view {view!r}; choose one of {VIEWS}")
    if windows not in WINDOWS:
        raise ValueError(f"unknown windows {windows!r}; choose one of {WINDOWS}")
    if isinstance(n_windows, bool) or int(n_windows) != n_windows or n_windows < 1:
        raise ValueError(f"n_windows must be a positive int, got {n_windows!r}")
    if isinstance(depth, bool) or int(depth) != depth or depth < 1:
        raise ValueError(f"depth must be a positive int, got {depth!r}")
    t, v, m, a, b = _check_inputs(times, values, mask, span)
    B, W, d = t.shape[0], int(n_windows), v.shape[2] + 1
    if windows == "index" and np.any(m.sum(1) < 2):
        raise ValueError("windows='index' needs at least two observed points per sample")
    wp = _window_paths(t, v, m, W, a, b, windows)                # [B, W, n_max, d]
    local = path_signature(wp.reshape(B * W, wp.shape[2], d), depth).reshape(B, W, -1)
    if view == "local":
        return local
    glob = [local[:, 0]]
    for k in range(1, W):                                        # Chen: S_{0,u_k} = S_{0,u_{k-1}} (x) S_{u_{k-1},u_k}
        glob.append(signature_combine(glob[-1], local[:, k], d, depth))
    glob = torch.stack(glob, 1)
    return glob if view == "global" else torch.cat([glob, local], dim=-1)
