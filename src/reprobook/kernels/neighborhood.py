r"""Neighborhood attention (NA) in 1-D and 2-D, with NATTEN's semantics and heads-last layout.

Every query attends only to a window of ``k`` keys per spatial axis (the product of the per-axis
windows in 2-D). For a query at coordinate ``i`` on an axis of length ``L`` with kernel size ``k``,
dilation ``d`` and a causal flag:

* **dilation groups** -- the query only sees keys of its own residue ``g = i mod d``; inside the
  group it has the local coordinate ``i' = i div d`` and the group has ``n_g = ceil((L - g) / d)``
  members (groups differ in length when ``d`` does not divide ``L``);
* **non-causal** -- with ``left = k div 2`` and ``right = k - 1 - left`` (an even ``k = 2r`` sees
  ``r`` keys on the left and ``r - 1`` on the right, as NATTEN >= 0.17.5), the window is the ``k``
  consecutive group positions ``[c - left, c + right]`` around ``c = clamp(i', left, n_g-1-right)``.
  Near a border the window is *shifted* inward, never truncated, so every query sees exactly ``k``
  keys (unlike flash-attention's sliding window, which truncates);
* **causal** -- the window is ``[i' - k + 1, i'] ∩ [0, i']``: truncated near the start, since a
  causal window cannot move forward.

A key is a neighbour in 2-D iff it is one on both axes, each with its own ``(k, d, causal)``. The
output is ``o_i = sum_{j in N(i)} softmax_j(scale * q_i . k_j) v_j`` with ``scale = D**-0.5``.

Five forms sit behind :func:`na1d` / :func:`na2d` (``impl=``):

``"reference"``
    dense attention over all ``N`` tokens with the ``N x N`` neighbourhood mask (ground truth,
    brute force, O(N^2) time and memory; float64-capable).
``"naive"``
    the gather form (NATTEN's "naive" pattern, one query at a time): gather the ``K = prod(k)``
    neighbours of every query into a ``[B, H, N, K, D]`` tensor, form the ``[B, H, N, K]``
    attention weights by batched matrix-*vector* products, softmax, and contract them with the
    gathered values. Fewest FLOPs (``2 N K (D + Dv)``), O(N K D) memory traffic.
``"gemm"``
    the paper's GEMM-based, unfused NA (Hassani et al. 2024, Sec. 3.1). Queries are tiled as in
    the fused form; the windows of a tile of ``T`` queries lie in a *span* of ``S = T + k - 1``
    consecutive keys per axis, so (1) **PN**: one dense GEMM ``Q_tile K_span^T`` per tile
    (``T x S`` scores), whose band (each query's own ``K`` window slots) is gathered into the
    attention tensor ``A [B, H, N, K]``, written in full; (2) a separate softmax over ``A``;
    (3) **NN**: per tile, the rows of ``A`` are scattered back into a dense ``T x S`` tile (zeros
    outside the windows) and one dense GEMM with ``V_span`` gives the output. Two GEMMs with the
    ``N x K`` weights stored in between: the unfused pattern the paper measures, with
    ``S / k``-fold extra score FLOPs spent on the masked part of each tile.
``"torch"`` (alias ``"fused"``)
    the blocked form of fused NA: the same tiles and spans, but each tile does its dense
    attention against its span at once (scores, masked softmax, ``P V``) and the ``N x K``
    weights are never assembled. Tiles are processed in chunks holding at most
    :data:`CHUNK_SCORES` scores, and *that* bound, a scheduling choice of this torch form, is
    what keeps its working memory flat in ``N`` (a real fused kernel keeps a tile's scores in
    registers instead). Differentiable by autograd.
``"triton"``
    a Triton forward kernel of fused NA with an online softmax over key blocks (one program per
    query tile; on CPU it runs under ``TRITON_INTERPRET=1``); beyond its output it allocates no
    global memory.

Half precision: on a CUDA device the GEMMs of the naive, GEMM and blocked forms run in the input's
half type (tensor cores, float32 accumulation) with the softmax in float32, as half-precision
kernels do; on a CPU, and for float32, everything is computed in float32; float64 stays float64.
"""
from __future__ import annotations

import contextlib
import math
from collections.abc import Sequence

import torch

from ._checks import FLOAT_DTYPES, check_impl, check_tensor, compute_dtype

__all__ = ["na1d", "na2d", "neighborhood_mask", "neighborhood_indices", "default_tile", "IMPLS",
           "planted_bug", "PLANTED_BUGS", "fused_working_set", "CHUNK_SCORES", "CHUNK_SCORES_CUDA"]

IMPLS = ("reference", "naive", "gemm", "torch", "fused", "triton")

#: Upper bound on the number of attention scores one chunk of query tiles holds at a time in the
#: blocked and GEMM forms (B * H * tiles * T * span), on a CPU: about 1 MB in float32, so a chunk's
#: scores stay in cache. It bounds the blocked form's working set independently of N.
CHUNK_SCORES = 1 << 18
#: The same bound on a CUDA device, where each chunk costs a few kernel launches: 64 MB of float32
#: scores, so that a long sequence needs few chunks.
CHUNK_SCORES_CUDA = 1 << 24

#: Bugs :func:`planted_bug` can plant in the naive, GEMM, blocked and Triton forms (never in the dense
#: reference or :func:`neighborhood_mask`), for a chapter's controls:
#: ``"no-border-shift"``: non-causal windows stay centred on the query and are cut at the borders
#: (flash-attention's sliding window, the classic NA mistake); ``"no-halo"``: every query tile
#: visits every key of its dilation group instead of its halo (the output stays exact, the work
#: becomes quadratic: the fused form's saving removed; in the GEMM form every span becomes the
#: whole group too).
PLANTED_BUGS = ("no-border-shift", "no-halo")
_planted: str | None = None


@contextlib.contextmanager
def planted_bug(name: str):
    """Run the naive, GEMM, blocked and Triton forms with one of :data:`PLANTED_BUGS` planted, inside a
    ``with`` block (a chapter's control on a broken method); the reference is never affected."""
    global _planted
    if name not in PLANTED_BUGS:
        raise ValueError(f"planted_bug: unknown bug {name!r}; one of {PLANTED_BUGS}")
    if _planted is not None:
        raise RuntimeError(f"planted_bug({name!r}) inside planted_bug({_planted!r})")
    _planted = name
    try:
        yield
    finally:
        _planted = None


def default_tile(kernel_size: Sequence[int]) -> tuple[int, ...]:
    """Query tile of the blocked form: about half the kernel per axis (a power of two).

    A tile of ``T`` queries scores ``T + k - 1`` halo keys per axis, so smaller tiles waste less
    work on masked scores while larger ones make bigger, more efficient matmuls; ``T ~ k / 2``
    (clamped to [16, 128] in 1-D, [4, 16] in 2-D) is a good middle on CPUs.
    """
    lo, hi = {1: (16, 128), 2: (4, 16)}.get(len(kernel_size), (2, 8))
    return tuple(min(hi, max(lo, (1 << max(0, (k - 1).bit_length())) // 2)) for k in kernel_size)


# --------------------------------------------------------------------------------------------
# argument handling
# --------------------------------------------------------------------------------------------
def _per_axis(name: str, x, na_dim: int, kind) -> tuple:
    """Broadcast an int/bool (or accept a tuple of length ``na_dim``) to a per-axis tuple."""
    if isinstance(x, (list, tuple)):
        if len(x) != na_dim:
            raise ValueError(f"{name} must be one value or a tuple of {na_dim}, got {x!r}")
        vals = tuple(x)
    else:
        vals = (x,) * na_dim
    for v in vals:
        if kind is bool:
            if not isinstance(v, bool):
                raise TypeError(f"{name} must be a bool or a tuple of bools, got {x!r}")
        elif isinstance(v, bool) or not isinstance(v, int):
            raise TypeError(f"{name} must be an int or a tuple of ints, got {x!r}")
    return vals


def _check_args(query, key, value, na_dim, kernel_size, dilation, is_causal, scale, impl):
    impl = check_impl(impl, IMPLS)
    if impl == "fused":
        impl = "torch"
    ndim = na_dim + 3
    for name, t in (("query", query), ("key", key), ("value", value)):
        check_tensor(name, t, dtypes=FLOAT_DTYPES)
        if t.dim() != ndim:
            layout = "[B, L, H, D]" if na_dim == 1 else "[B, X, Y, H, D]"
            raise ValueError(f"{name} must have {ndim} dimensions {layout} for na{na_dim}d, "
                             f"got shape {tuple(t.shape)}")
    if key.shape != query.shape:
        raise ValueError(f"key must have the shape of query {tuple(query.shape)}, "
                         f"got {tuple(key.shape)}")
    if value.shape[:-1] != query.shape[:-1]:
        raise ValueError(f"value must match query in all but the last dimension, got "
                         f"{tuple(value.shape)} for query {tuple(query.shape)}")
    if not (query.dtype == key.dtype == value.dtype):
        raise TypeError(f"query, key and value must share a dtype, got {query.dtype}, "
                        f"{key.dtype}, {value.dtype}")
    if not (query.device == key.device == value.device):
        raise ValueError("query, key and value must be on one device")
    if min(query.shape) == 0:
        raise ValueError(f"query must not be empty, got shape {tuple(query.shape)}")
    ks = _per_axis("kernel_size", kernel_size, na_dim, int)
    dil = _per_axis("dilation", dilation, na_dim, int)
    causal = _per_axis("is_causal", is_causal, na_dim, bool)
    spatial = tuple(query.shape[1:1 + na_dim])
    for a, (n, k, d) in enumerate(zip(spatial, ks, dil)):
        if k < 1:
            raise ValueError(f"kernel_size must be >= 1, got {k} on axis {a}")
        if d < 1:
            raise ValueError(f"dilation must be >= 1, got {d} on axis {a}")
        if k > n:
            raise ValueError(f"kernel_size {k} exceeds the input length {n} on axis {a}")
        if k * d > n:
            raise ValueError(f"kernel_size * dilation = {k}*{d} = {k * d} exceeds the input "
                             f"length {n} on axis {a}")
    if scale is None:
        scale = query.shape[-1] ** -0.5
    elif isinstance(scale, bool) or not isinstance(scale, (int, float)):
        raise TypeError(f"scale must be a float or None, got {scale!r}")
    return impl, spatial, ks, dil, causal, float(scale)


# --------------------------------------------------------------------------------------------
# the neighbourhood
# --------------------------------------------------------------------------------------------
def _window_bounds(i: torch.Tensor, n, k: int, causal: bool):
    """First and last (inclusive) group-local key of the windows of group-local queries ``i``.

    ``n`` is the group length (an int or a tensor broadcastable to ``i``). Non-causal windows
    are centred on ``clamp(i, left, n - 1 - right)``: shifted inward at the borders so they hold
    exactly ``k`` keys. Causal windows end at the query and are cut at 0.
    """
    if causal:
        return torch.clamp(i - (k - 1), min=0), i
    left = k // 2
    right = k - 1 - left
    n = torch.as_tensor(n, device=i.device)
    if _planted == "no-border-shift":  # planted bug: centred on the query, cut at the borders
        return torch.clamp(i - left, min=0), torch.minimum(i + right, n - 1)
    center = torch.minimum(torch.clamp(i, min=left), n - 1 - right)
    return center - left, center + right


def _axis_neighbours(length: int, k: int, d: int, causal: bool, device=None):
    """Per-axis neighbour table: ``idx[i, t]`` (the t-th key of query i) and ``valid[i, t]``.

    Slot ``t`` holds group position ``hi(i) - (k - 1) + t``; only causal windows near the start
    have slots before ``lo(i)``, which are invalid (their index is clamped to a real key).
    """
    i = torch.arange(length, device=device)
    g = i % d
    n_g = (length - g + d - 1) // d
    lo, hi = _window_bounds(i // d, n_g, k, causal)
    jp = hi[:, None] - (k - 1) + torch.arange(k, device=device)[None, :]
    valid = jp >= lo[:, None]
    idx = g[:, None] + d * jp.clamp(min=0)
    return idx, valid


def _combine_axes(tables_idx, tables_valid, sizes):
    """Cartesian product of per-axis tables ``[..., k_a]`` into flat row-major indices."""
    idx, valid = tables_idx[0], tables_valid[0]
    for a in range(1, len(tables_idx)):
        ia, va = tables_idx[a], tables_valid[a]
        # broadcast: existing leading axes x new axis, then flatten both the query and key parts
        idx = idx[:, None, :, None] * sizes[a] + ia[None, :, None, :]
        valid = valid[:, None, :, None] & va[None, :, None, :]
        n1, n2, k1, k2 = idx.shape
        idx = idx.reshape(n1 * n2, k1 * k2)
        valid = valid.reshape(n1 * n2, k1 * k2)
    return idx, valid


def neighborhood_indices(shape, kernel_size, dilation=1, is_causal=False, device=None):
    """Flat neighbour indices ``[N, prod(k)]`` and their validity for a token grid ``shape``.

    Tokens are numbered row-major. Invalid slots (only causal windows near the start have them)
    hold an arbitrary valid index and ``valid = False``.
    """
    shape = tuple(shape) if isinstance(shape, (list, tuple)) else (shape,)
    nd = len(shape)
    ks = _per_axis("kernel_size", kernel_size, nd, int)
    dil = _per_axis("dilation", dilation, nd, int)
    causal = _per_axis("is_causal", is_causal, nd, bool)
    tabs = [_axis_neighbours(n, k, d, c, device) for n, k, d, c in zip(shape, ks, dil, causal)]
    return _combine_axes([t[0] for t in tabs], [t[1] for t in tabs], shape)


def _axis_mask_dense(length: int, k: int, d: int, causal: bool, device=None) -> torch.Tensor:
    """Brute-force ``[L, L]`` mask of one axis, written from the definition (ground truth).

    Deliberately independent of :func:`_window_bounds`: for a non-causal query the window is the
    ``k`` consecutive group positions starting at ``clamp(i' - k div 2, 0, n_g - k)``.
    """
    i = torch.arange(length, device=device)[:, None]
    j = torch.arange(length, device=device)[None, :]
    same_group = (i % d) == (j % d)
    ip, jp = i // d, j // d
    if causal:
        inside = (jp <= ip) & (jp > ip - k)
    else:
        n_g = (length - i % d + d - 1) // d
        first = torch.minimum(torch.clamp(ip - k // 2, min=0), n_g - k)
        inside = (jp >= first) & (jp < first + k)
    return same_group & inside


def neighborhood_mask(shape, kernel_size, dilation=1, is_causal=False, device=None) -> torch.Tensor:
    """The ``[N, N]`` boolean NA mask of a token grid ``shape`` (``mask[i, j]``: i sees j)."""
    shape = tuple(shape) if isinstance(shape, (list, tuple)) else (shape,)
    nd = len(shape)
    ks = _per_axis("kernel_size", kernel_size, nd, int)
    dil = _per_axis("dilation", dilation, nd, int)
    causal = _per_axis("is_causal", is_causal, nd, bool)
    mask = None
    for n, k, d, c in zip(shape, ks, dil, causal):
        m = _axis_mask_dense(n, k, d, c, device)
        if mask is None:
            mask = m
        else:
            a, b = mask.shape[0], m.shape[0]
            mask = (mask[:, None, :, None] & m[None, :, None, :]).reshape(a * b, a * b)
    return mask


# --------------------------------------------------------------------------------------------
# layout helpers: heads-last [B, *S, H, D]  <->  flat heads-first [B, H, N, D]
# --------------------------------------------------------------------------------------------
def _to_flat(x: torch.Tensor, dtype) -> torch.Tensor:
    b, h, dd = x.shape[0], x.shape[-2], x.shape[-1]
    return x.reshape(b, -1, h, dd).transpose(1, 2).to(dtype).contiguous()


def _from_flat(o: torch.Tensor, like_shape, dv: int, dtype) -> torch.Tensor:
    return o.transpose(1, 2).reshape(*like_shape[:-1], dv).to(dtype)


# --------------------------------------------------------------------------------------------
# impl = "reference": dense masked attention
# --------------------------------------------------------------------------------------------
def _na_reference(q, k, v, spatial, ks, dil, causal, scale):
    ct = compute_dtype(q.dtype)
    qf, kf, vf = (_to_flat(t, ct) for t in (q, k, v))
    mask = neighborhood_mask(spatial, ks, dil, causal, device=q.device)
    s = (qf @ kf.transpose(-1, -2)) * scale
    s = s.masked_fill(~mask, float("-inf"))
    o = torch.softmax(s, dim=-1) @ vf
    return _from_flat(o, q.shape, v.shape[-1], q.dtype)


def _gemm_dtype(x: torch.Tensor) -> torch.dtype:
    """The dtype the matrix products of the naive, GEMM and blocked forms run in: a half type on a
    CUDA device (tensor cores accumulate in float32), float64 for float64, else float32."""
    if x.is_cuda and x.dtype in (torch.float16, torch.bfloat16):
        return x.dtype
    return compute_dtype(x.dtype)


def _softmax(s: torch.Tensor, out_dtype: torch.dtype) -> torch.Tensor:
    """Softmax over the last dim computed in float32 (float64 for float64), cast to ``out_dtype``."""
    return torch.softmax(s, dim=-1, dtype=compute_dtype(s.dtype)).to(out_dtype)


# --------------------------------------------------------------------------------------------
# impl = "naive": gather each query's neighbourhood, batched matrix-vector products
# --------------------------------------------------------------------------------------------
def _na_naive(q, k, v, spatial, ks, dil, causal, scale):
    gd = _gemm_dtype(q)
    qf, kf, vf = (_to_flat(t, gd) for t in (q, k, v))
    idx, valid = neighborhood_indices(spatial, ks, dil, causal, device=q.device)
    kn = kf[:, :, idx]                       # [B, H, N, K, D]
    vn = vf[:, :, idx]                       # [B, H, N, K, Dv]
    attn = torch.einsum("bhnd,bhnkd->bhnk", qf, kn) * scale
    attn = _softmax(attn.masked_fill(~valid, float("-inf")), gd)
    o = torch.einsum("bhnk,bhnkd->bhnd", attn, vn)
    return _from_flat(o, q.shape, v.shape[-1], q.dtype)


# --------------------------------------------------------------------------------------------
# impl = "torch": blocked / fused form
# --------------------------------------------------------------------------------------------
def _axis_tiles(length: int, k: int, d: int, causal: bool, tile: int, device=None) -> dict:
    """The query tiles of one axis, described by a few numbers per tile (O(L / T) memory).

    Tiles never mix dilation groups: tile ``t`` of group ``g`` holds the group-local queries
    ``t*T .. t*T + T - 1`` (the last one may be partial). Window starts are non-decreasing and
    grow by at most one per query, so the union of a tile's windows lies in the *halo* of
    ``S = T + k - 1`` consecutive group positions from the first query's window start (moved
    left if it would overrun the group). Per tile: group ``g``, first query ``start``, group
    length ``n`` and halo start ``base``; plus the axis constants.
    """
    n_max = -(-length // d)
    t_len = min(tile, n_max)
    span = min(t_len + k - 1, n_max)
    if _planted == "no-halo":  # planted bug: every tile visits its whole dilation group
        span = n_max
    g_all, start_all, n_all = [], [], []
    for g in range(d):
        n_g = (length - g + d - 1) // d
        n_tiles = -(-n_g // t_len)
        g_all.append(torch.full((n_tiles,), g, device=device))
        start_all.append(torch.arange(n_tiles, device=device) * t_len)
        n_all.append(torch.full((n_tiles,), n_g, device=device))
    g, start, n = torch.cat(g_all), torch.cat(start_all), torch.cat(n_all)
    lo_first, _ = _window_bounds(start, n, k, causal)
    base = torch.minimum(lo_first, torch.clamp(n - span, min=0))
    if _planted == "no-halo":
        base = torch.zeros_like(base)
    return dict(g=g, start=start, n=n, base=base, T=t_len, S=span, k=k, d=d, causal=causal)


def _tile_chunk(axes, tile_ids, sizes, band: bool = False):
    """Flat query/key indices and the mask for a chunk of N-D tiles (Cartesian product of axes).

    ``tile_ids[a]`` selects each chunk entry's tile on axis ``a``. Returns ``qflat [C, Tq]``
    (padding repeats the tile's last query), ``qvalid [C, Tq]``, ``kflat [C, S]`` and
    ``mask [C, Tq, S]`` with ``Tq = prod(T_a)``, ``S = prod(S_a)``. With ``band=True`` also
    ``off [C, Tq, K]`` and ``bvalid [C, Tq, K]`` (``K = prod(k_a)``): the position in the span of
    each query's window slot ``t`` (slot order as :func:`neighborhood_indices`) and whether the
    slot holds a key (only causal windows near the start have empty slots; their offset is
    clamped into the span).
    """
    qflat = qvalid = kflat = mask = off = bvalid = None
    for a, (ax, ids) in enumerate(zip(axes, tile_ids)):
        dev = ids.device
        g, n = ax["g"][ids, None], ax["n"][ids, None]                   # [C, 1]
        qp = ax["start"][ids, None] + torch.arange(ax["T"], device=dev)  # [C, T] group-local
        qv = qp < n
        qp = torch.minimum(qp, n - 1)
        lo, hi = _window_bounds(qp, n, ax["k"], ax["causal"])
        base = ax["base"][ids, None]
        kp = base + torch.arange(ax["S"], device=dev)                   # [C, S] group-local
        kv = kp < n
        qi = g + ax["d"] * qp
        ki = g + ax["d"] * torch.minimum(kp, n - 1)
        m = (kp[:, None, :] >= lo[:, :, None]) & (kp[:, None, :] <= hi[:, :, None]) & kv[:, None, :]
        if band:
            jp = hi[:, :, None] - (ax["k"] - 1) + torch.arange(ax["k"], device=dev)  # [C, T, k]
            bv = jp >= lo[:, :, None]
            of = (jp - base[:, :, None]).clamp(0, ax["S"] - 1)
        if a == 0:
            qflat, qvalid, kflat, mask = qi, qv, ki, m
            if band:
                off, bvalid = of, bv
            continue
        c = qi.shape[0]
        qflat = (qflat[:, :, None] * sizes[a] + qi[:, None, :]).reshape(c, -1)
        qvalid = (qvalid[:, :, None] & qv[:, None, :]).reshape(c, -1)
        kflat = (kflat[:, :, None] * sizes[a] + ki[:, None, :]).reshape(c, -1)
        mask = (mask[:, :, None, :, None] & m[:, None, :, None, :]).reshape(
            c, qflat.shape[1], kflat.shape[1])
        if band:
            # span positions combine row-major like kflat; window slots like neighborhood_indices
            off = (off[:, :, None, :, None] * ax["S"] + of[:, None, :, None, :]).reshape(
                c, qflat.shape[1], -1)
            bvalid = (bvalid[:, :, None, :, None] & bv[:, None, :, None, :]).reshape(
                c, qflat.shape[1], -1)
    if band:
        return qflat, qvalid, kflat, mask, off, bvalid
    return qflat, qvalid, kflat, mask


def _rows(x, idx, c, m, gd):
    """Gather token rows ``idx [C, m]`` of heads-last ``x [B, N, H, D]`` as ``[B*H*C, m, D]``."""
    b, _, h, _ = x.shape
    g = x.index_select(1, idx.reshape(-1)).to(gd)
    return g.view(b, c, m, h, -1).permute(0, 3, 1, 2, 4).reshape(b * h * c, m, -1)


def _chunk_attention(qf, kf, vf, qflat, kflat, mask, scale, gd):
    """Dense attention of each tile in a chunk against its halo, with the NA mask as a bias.

    ``qf, kf, vf`` are heads-last rows ``[B, N, H, D]``; returns ``[B, C*Tq, H, Dv]``. Written as
    a function so that its intermediates are freed as soon as the chunk is done.
    """
    b, _, h, _ = qf.shape
    c, tq = qflat.shape
    span = kflat.shape[1]
    qc, kc, vc = _rows(qf, qflat, c, tq, gd), _rows(kf, kflat, c, span, gd), _rows(vf, kflat, c, span, gd)
    s = torch.bmm(qc, kc.transpose(1, 2)).mul_(scale)                  # [B*H*C, Tq, S]
    # the NA mask, broadcast over batch and heads, applied in place (no bias tensor is built)
    s.view(b, h, c, tq, span).masked_fill_(~mask, float("-inf"))
    oc = torch.bmm(_softmax(s, gd), vc)                                # [B*H*C, Tq, Dv]
    return oc.view(b, h, c * tq, -1).transpose(1, 2)                   # [B, C*Tq, H, Dv]


def _tiling(q, spatial, ks, dil, causal, tile_shape, chunk_scores):
    """The per-axis tiles of the blocked and GEMM forms and how many tiles one chunk holds."""
    na_dim = len(spatial)
    tile_shape = default_tile(ks) if tile_shape is None else _per_axis(
        "tile_shape", tile_shape, na_dim, int)
    if any(t < 1 for t in tile_shape):
        raise ValueError(f"tile_shape entries must be >= 1, got {tile_shape}")
    if chunk_scores is None:
        chunk_scores = CHUNK_SCORES_CUDA if q.is_cuda else CHUNK_SCORES
    if isinstance(chunk_scores, bool) or not isinstance(chunk_scores, int) or chunk_scores < 1:
        raise ValueError(f"chunk_scores must be a positive int, got {chunk_scores!r}")
    axes = [_axis_tiles(L, kk, d, c, t, q.device)
            for L, kk, d, c, t in zip(spatial, ks, dil, causal, tile_shape)]
    n_tiles = [ax["g"].shape[0] for ax in axes]
    tq = math.prod(ax["T"] for ax in axes)
    span = math.prod(ax["S"] for ax in axes)
    per_chunk = max(1, chunk_scores // (q.shape[0] * q.shape[-2] * tq * span))
    return axes, n_tiles, per_chunk


def _chunks(n_tiles, per_chunk, device):
    """Yield, per chunk, the tile index of every chunk entry on each axis (row-major order)."""
    total = math.prod(n_tiles)
    for t0 in range(0, total, per_chunk):
        flat = torch.arange(t0, min(total, t0 + per_chunk), device=device)
        ids = []
        for nt in reversed(n_tiles):                      # unravel row-major tile index
            ids.append(flat % nt)
            flat = flat // nt
        yield ids[::-1]


def _na_blocked(q, k, v, spatial, ks, dil, causal, scale, tile_shape=None, chunk_scores=None):
    gd = _gemm_dtype(q)
    b, h, dv = q.shape[0], q.shape[-2], v.shape[-1]
    # heads-last token rows [B, N, H, D]: a view for contiguous inputs, so nothing of size N is
    # copied; each chunk gathers (and casts) only the rows it needs
    qf, kf, vf = (t.reshape(b, -1, h, t.shape[-1]) for t in (q, k, v))
    n = qf.shape[1]
    axes, n_tiles, per_chunk = _tiling(q, spatial, ks, dil, causal, tile_shape, chunk_scores)
    # one extra "trash" row receives the padded queries' outputs, so that every chunk is written
    # with a single index_copy_ (autograd-friendly: the trash row's gradient is simply dropped)
    out = torch.empty(b, n + 1, h, dv, dtype=gd, device=q.device)
    for ids in _chunks(n_tiles, per_chunk, q.device):
        qflat, qvalid, kflat, mask = _tile_chunk(axes, ids, spatial)
        oc = _chunk_attention(qf, kf, vf, qflat, kflat, mask, scale, gd)
        out.index_copy_(1, torch.where(qvalid, qflat, n).reshape(-1), oc)
        del oc, qflat, qvalid, kflat, mask                # free before the next chunk
    return out[:, :n].reshape(*q.shape[:-1], dv).to(q.dtype)


# --------------------------------------------------------------------------------------------
# impl = "gemm": the paper's GEMM-based NA (unfused: PN GEMM + scatter, softmax, gather + NN GEMM)
# --------------------------------------------------------------------------------------------
def _na_gemm(q, k, v, spatial, ks, dil, causal, scale, tile_shape=None, chunk_scores=None):
    gd = _gemm_dtype(q)
    b, h, dv = q.shape[0], q.shape[-2], v.shape[-1]
    qf, kf, vf = (t.reshape(b, -1, h, t.shape[-1]) for t in (q, k, v))
    n = qf.shape[1]
    kvol = math.prod(ks)
    axes, n_tiles, per_chunk = _tiling(q, spatial, ks, dil, causal, tile_shape, chunk_scores)

    # (1) PN: per tile one dense GEMM against its key span, then each query's window slots are
    # gathered from the T x S tile into the attention tensor A [B, H, N (+1 trash row), K]
    attn = torch.empty(b, h, n + 1, kvol, dtype=gd, device=q.device)
    for ids in _chunks(n_tiles, per_chunk, q.device):
        qflat, qvalid, kflat, _, off, bvalid = _tile_chunk(axes, ids, spatial, band=True)
        c, tq = qflat.shape
        qc, kc = _rows(qf, qflat, c, tq, gd), _rows(kf, kflat, c, kflat.shape[1], gd)
        s = torch.bmm(qc, kc.transpose(1, 2)).mul_(scale)               # [B*H*C, Tq, S]
        idx = off.expand(b, h, c, tq, kvol).reshape(-1, tq, kvol)
        band = s.gather(-1, idx)                                        # [B*H*C, Tq, K]
        band.view(b, h, c, tq, kvol).masked_fill_(~bvalid, float("-inf"))
        attn.index_copy_(2, torch.where(qvalid, qflat, n).reshape(-1), band.view(b, h, c * tq, kvol))
        del s, band, qc, kc
    # (2) the softmax as a pass of its own over the stored N x K weights
    attn = _softmax(attn, gd)

    # (3) NN: per tile, scatter the weights back into a dense T x S tile (zeros off the band; the
    # clamped offsets of empty slots carry weight 0, so adding them is harmless) and one GEMM with
    # the values of the span
    out = torch.empty(b, n + 1, h, dv, dtype=gd, device=q.device)
    for ids in _chunks(n_tiles, per_chunk, q.device):
        qflat, qvalid, kflat, _, off, _ = _tile_chunk(axes, ids, spatial, band=True)
        c, tq = qflat.shape
        span = kflat.shape[1]
        rows = torch.where(qvalid, qflat, n).reshape(-1)
        w = attn.index_select(2, rows).reshape(b * h * c, tq, kvol)
        idx = off.expand(b, h, c, tq, kvol).reshape(-1, tq, kvol)
        dense = torch.zeros(b * h * c, tq, span, dtype=gd, device=q.device).scatter_add_(-1, idx, w)
        oc = torch.bmm(dense, _rows(vf, kflat, c, span, gd))            # [B*H*C, Tq, Dv]
        out.index_copy_(1, rows, oc.view(b, h, c * tq, dv).transpose(1, 2))
        del w, dense, oc
    return out[:, :n].reshape(*q.shape[:-1], dv).to(q.dtype)


# --------------------------------------------------------------------------------------------
# public API
# --------------------------------------------------------------------------------------------
def _na(query, key, value, na_dim, kernel_size, dilation, is_causal, scale, impl, tile_shape,
        chunk_scores=None, info=None):
    impl, spatial, ks, dil, causal, scale = _check_args(
        query, key, value, na_dim, kernel_size, dilation, is_causal, scale, impl)
    if impl == "reference":
        return _na_reference(query, key, value, spatial, ks, dil, causal, scale)
    if impl == "naive":
        return _na_naive(query, key, value, spatial, ks, dil, causal, scale)
    if impl == "gemm":
        return _na_gemm(query, key, value, spatial, ks, dil, causal, scale, tile_shape, chunk_scores)
    if impl == "torch":
        return _na_blocked(query, key, value, spatial, ks, dil, causal, scale, tile_shape,
                           chunk_scores)
    from ._neighborhood_triton import na_triton_forward

    return na_triton_forward(query, key, value, spatial, ks, dil, causal, scale, tile_shape,
                             shift_borders=_planted != "no-border-shift",
                             halo=_planted != "no-halo", info=info)


def na1d(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, kernel_size: int,
         dilation: int = 1, is_causal: bool = False, scale: float | None = None,
         impl: str = "torch", *, tile_shape: int | Sequence[int] | None = None,
         chunk_scores: int | None = None) -> torch.Tensor:
    """1-D neighborhood attention; ``query``, ``key`` ``[B, L, H, D]``, ``value`` ``[B, L, H, Dv]``.

    Mirrors ``natten.na1d`` (stride 1, no additional keys). ``impl`` is one of ``"reference"``,
    ``"naive"``, ``"gemm"``, ``"torch"`` (= ``"fused"``) or ``"triton"`` (see the module);
    ``tile_shape`` sets the query tile of the GEMM, blocked and Triton forms, ``chunk_scores`` the
    most scores one chunk of tiles of the GEMM and blocked forms holds (default
    :data:`CHUNK_SCORES`, :data:`CHUNK_SCORES_CUDA` on a GPU). Returns ``[B, L, H, Dv]`` in the
    input dtype.
    """
    return _na(query, key, value, 1, kernel_size, dilation, is_causal, scale, impl, tile_shape,
               chunk_scores)


def na2d(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
         kernel_size: int | tuple[int, int], dilation: int | tuple[int, int] = 1,
         is_causal: bool | tuple[bool, bool] = False, scale: float | None = None,
         impl: str = "torch", *, tile_shape: int | Sequence[int] | None = None,
         chunk_scores: int | None = None) -> torch.Tensor:
    """2-D neighborhood attention on ``[B, X, Y, H, D]`` (``value`` ``[B, X, Y, H, Dv]``).

    ``kernel_size``, ``dilation`` and ``is_causal`` may be given per axis as 2-tuples; a key is
    a neighbour iff it is one on both axes. Otherwise as :func:`na1d`.
    """
    return _na(query, key, value, 2, kernel_size, dilation, is_causal, scale, impl, tile_shape,
               chunk_scores)


def fused_working_set(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                      kernel_size, dilation=1, is_causal=False, *,
                      tile_shape: int | Sequence[int] | None = None) -> dict:
    """What one program of the fused Triton kernel holds on chip, from one launch on these inputs.

    Heads-last 1-D ``[B, L, H, D]`` or 2-D ``[B, X, Y, H, D]`` inputs (dimension from
    ``query.dim()``). Returns the tiles of the launch (``queries`` per program, ``keys`` per key
    block, padded head dims ``head_dim``, ``value_dim``), ``elements``: the tile state one program
    keeps live (its query tile, one key and one value block, the score block, the accumulator and
    the running max and sum: ``M D + N (D + Dv) + M N + M Dv + 2 M``), ``bytes`` of that state at
    the kernel's accumulator precision, and, when the kernel was compiled for a GPU (``None``
    under the interpreter), the compiler's ``registers`` per thread, ``spills``, ``shared_bytes``
    and ``num_warps``. None of these depends on the sequence length.
    """
    na_dim = query.dim() - 3
    if na_dim not in (1, 2):
        raise ValueError(f"query must be [B, L, H, D] or [B, X, Y, H, D], got shape "
                         f"{tuple(query.shape)}")
    info: dict = {}
    _na(query, key, value, na_dim, kernel_size, dilation, is_causal, None, "triton", tile_shape,
        info=info)
    return info
