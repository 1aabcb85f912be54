"""Triton forward kernel of fused neighborhood attention (1-D and 2-D).

Imported lazily by :mod:`reprobook.kernels.neighborhood` (``impl="triton"``), so that
``TRITON_INTERPRET`` can be set before ``triton`` is imported.

One program handles one query tile of one (batch, head): ``BX x BY`` queries of one dilation group
(``BX = 1`` for 1-D, which runs as 2-D with a unit first axis). It computes, per axis, the first
and last key of every query's window, takes their min / max over the tile to get the tile's key
rectangle (the "halo"), and walks that rectangle in ``KBX x KBY`` key blocks with an online
softmax, masking each score that falls outside the query's own window. Nothing outside the halo is
read, and nothing of size ``N x K`` is stored.

All query/key blocks hold at least 16 entries by default because ``tl.dot`` needs M, N, K >= 16 on
a GPU (the interpreter accepts smaller ones).
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl
from ._checks import check_triton_target


@triton.jit
def _window(i, n, k, CAUSAL: tl.constexpr, SHIFT: tl.constexpr):
    # first and last group-local key of the window of group-local query i (group length n)
    if CAUSAL:
        lo = tl.maximum(i - (k - 1), 0)
        hi = i
    else:
        left = k // 2
        right = k - 1 - left
        if SHIFT:
            c = tl.minimum(tl.maximum(i, left), n - 1 - right)
            lo = c - left
            hi = c + right
        else:  # planted bug ("no-border-shift"): centred on the query, cut at the borders
            lo = tl.maximum(i - left, 0)
            hi = tl.minimum(i + right, n - 1)
    return lo, hi


@triton.jit
def _na2d_fwd_kernel(
    Q, K, V, O,
    sqb, sqx, sqy, sqh, sqd,
    skb, skx, sky, skh, skd,
    svb, svx, svy, svh, svd,
    sob, sox, soy, soh, sod,
    H, X, Y, D, DV,
    KX, KY, DX, DY, NTX, NTY,
    scale,
    CAUSAL_X: tl.constexpr, CAUSAL_Y: tl.constexpr,
    BX: tl.constexpr, BY: tl.constexpr, KBX: tl.constexpr, KBY: tl.constexpr,
    BD: tl.constexpr, BDV: tl.constexpr,
    ACC_F64: tl.constexpr, IEEE: tl.constexpr, SHIFT: tl.constexpr, HALO: tl.constexpr,
):
    pid = tl.program_id(0)
    bh = tl.program_id(1)
    b = bh // H
    h = bh % H
    # unravel pid -> (group gx, tile tx, group gy, tile ty)
    ty = pid % NTY
    r = pid // NTY
    gy = r % DY
    r = r // DY
    tx = r % NTX
    gx = r // NTX
    nxg = (X - gx + DX - 1) // DX
    nyg = (Y - gy + DY - 1) // DY

    if ACC_F64:
        acc_t = tl.float64
    else:
        acc_t = tl.float32

    offs_q = tl.arange(0, BX * BY)
    qx = tx * BX + offs_q // BY
    qy = ty * BY + offs_q % BY
    q_ok = (qx < nxg) & (qy < nyg)
    lox, hix = _window(qx, nxg, KX, CAUSAL_X, SHIFT)
    loy, hiy = _window(qy, nyg, KY, CAUSAL_Y, SHIFT)
    if HALO:
        # the tile's halo: union of its (valid) queries' windows, a rectangle of group positions
        kx_lo = tl.min(tl.where(q_ok, lox, X), 0)
        kx_hi = tl.max(tl.where(q_ok, hix, -1), 0)
        ky_lo = tl.min(tl.where(q_ok, loy, Y), 0)
        ky_hi = tl.max(tl.where(q_ok, hiy, -1), 0)
    else:  # planted bug ("no-halo"): the whole dilation group, masked
        kx_lo = 0
        kx_hi = nxg - 1
        ky_lo = 0
        ky_hi = nyg - 1

    offs_d = tl.arange(0, BD)
    offs_dv = tl.arange(0, BDV)
    q_ptr = (Q + b * sqb + h * sqh + (gx + DX * qx)[:, None] * sqx
             + (gy + DY * qy)[:, None] * sqy + offs_d[None, :] * sqd)
    q = tl.load(q_ptr, mask=q_ok[:, None] & (offs_d[None, :] < D), other=0.0)

    m_i = tl.full([BX * BY], float("-inf"), dtype=acc_t)
    l_i = tl.zeros([BX * BY], dtype=acc_t)
    acc = tl.zeros([BX * BY, BDV], dtype=acc_t)
    offs_k = tl.arange(0, KBX * KBY)
    for kx0 in range(kx_lo, kx_hi + 1, KBX):
        for ky0 in range(ky_lo, ky_hi + 1, KBY):
            kx = kx0 + offs_k // KBY
            ky = ky0 + offs_k % KBY
            k_ok = (kx <= kx_hi) & (ky <= ky_hi)
            k_ptr = (K + b * skb + h * skh + (gx + DX * kx)[:, None] * skx
                     + (gy + DY * ky)[:, None] * sky + offs_d[None, :] * skd)
            kb = tl.load(k_ptr, mask=k_ok[:, None] & (offs_d[None, :] < D), other=0.0)
            if IEEE:
                s = tl.dot(q, tl.trans(kb), input_precision="ieee", out_dtype=acc_t)
            else:
                s = tl.dot(q, tl.trans(kb), out_dtype=acc_t)
            s = s * scale
            inside = ((kx[None, :] >= lox[:, None]) & (kx[None, :] <= hix[:, None])
                      & (ky[None, :] >= loy[:, None]) & (ky[None, :] <= hiy[:, None])
                      & k_ok[None, :])
            s = tl.where(inside, s, float("-inf"))
            m_new = tl.maximum(m_i, tl.max(s, 1))
            # rows with no key yet keep m = -inf; shift by 0 there so exp() gives 0, not NaN
            m_use = tl.where(m_new == float("-inf"), 0.0, m_new)
            p = tl.exp(s - m_use[:, None])
            alpha = tl.exp(m_i - m_use)
            l_i = l_i * alpha + tl.sum(p, 1)
            v_ptr = (V + b * svb + h * svh + (gx + DX * kx)[:, None] * svx
                     + (gy + DY * ky)[:, None] * svy + offs_dv[None, :] * svd)
            vb = tl.load(v_ptr, mask=k_ok[:, None] & (offs_dv[None, :] < DV), other=0.0)
            if IEEE:
                pv = tl.dot(p.to(vb.dtype), vb, input_precision="ieee", out_dtype=acc_t)
            else:
                pv = tl.dot(p.to(vb.dtype), vb, out_dtype=acc_t)
            acc = acc * alpha[:, None] + pv
            m_i = m_new
    l_i = tl.where(l_i == 0.0, 1.0, l_i)
    out = acc / l_i[:, None]
    o_ptr = (O + b * sob + h * soh + (gx + DX * qx)[:, None] * sox
             + (gy + DY * qy)[:, None] * soy + offs_dv[None, :] * sod)
    tl.store(o_ptr, out.to(O.dtype.element_ty), mask=q_ok[:, None] & (offs_dv[None, :] < DV))


def _pow2(n: int) -> int:
    return 1 << max(0, (int(n) - 1).bit_length())


def _default_tiles(na_dim: int, on_gpu: bool):
    if na_dim == 1:
        return ((1, 64), (1, 64)) if on_gpu else ((1, 16), (1, 16))
    return ((8, 8), (8, 8)) if on_gpu else ((4, 4), (4, 4))


def na_triton_forward(q, k, v, spatial, ks, dil, causal, scale, tile_shape=None,
                      shift_borders=True, halo=True, info=None):
    """Launch the kernel on heads-last ``q, k [B, *S, H, D]``, ``v [B, *S, H, Dv]``.

    ``shift_borders=False`` / ``halo=False`` plant the bugs of
    :func:`reprobook.kernels.neighborhood.planted_bug` (controls only). A dict ``info`` is filled
    with the launch's tiles and per-program working set (see
    :func:`reprobook.kernels.neighborhood.fused_working_set`)."""
    check_triton_target("query", q)
    na_dim = len(spatial)
    if na_dim == 1:                                  # 1-D runs as 2-D with a unit first axis
        q, k, v = q.unsqueeze(1), k.unsqueeze(1), v.unsqueeze(1)
        spatial, ks, dil, causal = (1, *spatial), (1, *ks), (1, *dil), (False, *causal)
    (bx, by), (kbx, kby) = _default_tiles(na_dim, q.is_cuda)
    if tile_shape is not None:
        ts = tuple(tile_shape) if isinstance(tile_shape, (list, tuple)) else (tile_shape,)
        if len(ts) != na_dim:
            raise ValueError(f"tile_shape must have {na_dim} entries, got {tile_shape!r}")
        ts = (1, *ts) if na_dim == 1 else ts
        for t in ts:
            if isinstance(t, bool) or not isinstance(t, int) or t < 1 or t & (t - 1):
                raise ValueError(f"tile_shape entries must be powers of two for impl='triton', "
                                 f"got {tile_shape!r}")
        bx, by = ts
        kbx, kby = ts
    b, x, y, h, d = q.shape
    dv = v.shape[-1]
    o = torch.empty((b, x, y, h, dv), dtype=q.dtype, device=q.device)
    ntx = -(-(-(-x // dil[0])) // bx)
    nty = -(-(-(-y // dil[1])) // by)
    grid = (dil[0] * ntx * dil[1] * nty, b * h)
    bd, bdv = max(16, _pow2(d)), max(16, _pow2(dv))
    compiled = _na2d_fwd_kernel[grid](
        q, k, v, o,
        *q.stride(), *k.stride(), *v.stride(), *o.stride(),
        h, x, y, d, dv,
        ks[0], ks[1], dil[0], dil[1], ntx, nty,
        float(scale),
        CAUSAL_X=bool(causal[0]), CAUSAL_Y=bool(causal[1]),
        BX=bx, BY=by, KBX=kbx, KBY=kby,
        BD=bd, BDV=bdv,
        ACC_F64=q.dtype == torch.float64, IEEE=q.dtype in (torch.float32, torch.float64),
        SHIFT=bool(shift_borders), HALO=bool(halo),
    )
    if info is not None:
        m, n = bx * by, kbx * kby
        elements = m * bd + n * (bd + bdv) + m * n + m * bdv + 2 * m
        acc_bytes = 8 if q.dtype == torch.float64 else 4
        info.update(queries=m, keys=n, head_dim=bd, value_dim=bdv, elements=elements,
                    bytes=elements * acc_bytes, registers=getattr(compiled, "n_regs", None),
                    spills=getattr(compiled, "n_spills", None),
                    shared_bytes=getattr(getattr(compiled, "metadata", None), "shared", None),
                    num_warps=getattr(getattr(compiled, "metadata", None), "num_warps", None))
    return o.squeeze(1) if na_dim == 1 else o
