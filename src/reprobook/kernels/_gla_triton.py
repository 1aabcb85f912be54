r"""Triton forward kernel for gated linear attention (imported lazily by ``gla.py``).

One program owns one (batch*head, block of value columns) pair and walks over the sequence in
chunks of ``BT = 16`` rows, carrying the ``[K, BV]`` state in registers (a "fused chunk" kernel).
Inside a chunk, with cumulative log-gates ``b`` (per channel):

* intra-chunk scores ``A_ij = sum_d q_id k_jd exp(bk_id - bk_jd)`` (``j <= i``) are formed from a
  ``[BT, BT, BK]`` log-space tensor, so no ``exp(-b)`` can overflow;
* with a value-side gate, ``o_im = sum_j A_ij v_jm exp(bv_im - bv_jm)`` likewise;
* the incoming state adds ``((q * e^{bk}) S) * e^{bv}`` and is then decayed to the chunk end and
  updated with ``(k e^{bk_C - bk})^T (v e^{bv_C - bv})`` (all exponents ``<= 0``).

The kernel computes in the dtype of its inputs (float32 or float64; the wrapper upcasts halves).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

BT = 16  # rows per chunk; also the minimum tl.dot size on GPUs


@triton.jit
def _gla_fwd_kernel(
    q, k, v, gk, gv, o, h0, ht,
    scale, T, K, V,
    BT: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr,
    USE_GK: tl.constexpr, USE_GV: tl.constexpr, USE_H0: tl.constexpr,
):
    i_v = tl.program_id(0)
    i_bh = tl.program_id(1)
    o_t = tl.arange(0, BT)
    o_k = tl.arange(0, BK)
    o_v = i_v * BV + tl.arange(0, BV)
    m_k = o_k < K
    m_v = o_v < V
    causal = o_t[:, None] >= o_t[None, :]

    p_state = i_bh * K * V + o_k[:, None] * V + o_v[None, :]
    m_state = m_k[:, None] & m_v[None, :]
    if USE_H0:
        S = tl.load(h0 + p_state, mask=m_state, other=0.0)
    else:
        S = tl.zeros([BK, BV], dtype=q.dtype.element_ty)

    for i_t in range(0, tl.cdiv(T, BT)):
        rows = i_t * BT + o_t
        m_t = rows < T
        p_k = i_bh * T * K + rows[:, None] * K + o_k[None, :]
        p_v = i_bh * T * V + rows[:, None] * V + o_v[None, :]
        m_tk = m_t[:, None] & m_k[None, :]
        m_tv = m_t[:, None] & m_v[None, :]
        b_q = tl.load(q + p_k, mask=m_tk, other=0.0) * scale
        b_k = tl.load(k + p_k, mask=m_tk, other=0.0)
        b_v = tl.load(v + p_v, mask=m_tv, other=0.0)

        if USE_GK:
            # padded rows/channels load gate 0 ("no decay"), so they change nothing
            b_gk = tl.load(gk + p_k, mask=m_tk, other=0.0)
            b_bk = tl.cumsum(b_gk, axis=0)
            b_end_k = tl.sum(b_gk, axis=0)
            d_k = tl.where(causal[:, :, None], b_bk[:, None, :] - b_bk[None, :, :], 0.0)
            b_A = tl.sum(b_q[:, None, :] * b_k[None, :, :] * tl.exp(d_k), axis=2)
            q_in = b_q * tl.exp(b_bk)
            k_end = b_k * tl.exp(b_end_k[None, :] - b_bk)
        else:
            b_A = tl.dot(b_q, tl.trans(b_k), input_precision="ieee")
            q_in = b_q
            k_end = b_k
        b_A = tl.where(causal, b_A, 0.0)

        b_o = tl.dot(q_in, S, input_precision="ieee")
        if USE_GV:
            b_gv = tl.load(gv + p_v, mask=m_tv, other=0.0)
            b_bv = tl.cumsum(b_gv, axis=0)
            b_end_v = tl.sum(b_gv, axis=0)
            d_v = tl.where(causal[:, :, None], b_bv[:, None, :] - b_bv[None, :, :], 0.0)
            b_o = b_o * tl.exp(b_bv) + tl.sum(b_A[:, :, None] * b_v[None, :, :] * tl.exp(d_v), axis=1)
            v_end = b_v * tl.exp(b_end_v[None, :] - b_bv)
        else:
            b_o = b_o + tl.dot(b_A.to(b_v.dtype), b_v, input_precision="ieee")
            v_end = b_v
        tl.store(o + p_v, b_o.to(o.dtype.element_ty), mask=m_tv)

        if USE_GK:
            S = S * tl.exp(b_end_k)[:, None]
        if USE_GV:
            S = S * tl.exp(b_end_v)[None, :]
        S = S + tl.dot(tl.trans(k_end), v_end, input_precision="ieee")

    tl.store(ht + p_state, S.to(ht.dtype.element_ty), mask=m_state)


def _next_pow2(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


def gla_fwd_triton(q, k, v, gk, gv, scale, h0):
    """Launch the kernel on ``[B, H, T, D]`` tensors (float32/float64). Returns ``(o, S_T)``."""
    B, H, T, K = q.shape
    V = v.shape[-1]
    BK = max(16, _next_pow2(K))
    BV = min(max(16, _next_pow2(V)), 64)

    def flat(x):
        return None if x is None else x.reshape(B * H, T, x.shape[-1]).contiguous()

    qf, kf, vf, gkf, gvf = (flat(x) for x in (q, k, v, gk, gv))
    o = torch.empty_like(vf)
    ht = q.new_empty(B * H, K, V)
    h0f = None if h0 is None else h0.reshape(B * H, K, V).contiguous()
    grid = (triton.cdiv(V, BV), B * H)
    _gla_fwd_kernel[grid](
        qf, kf, vf,
        gkf if gkf is not None else qf,  # dummy pointers are never read (constexpr flags)
        gvf if gvf is not None else vf,
        o,
        h0f if h0f is not None else ht,
        ht,
        scale, T, K, V,
        BT=BT, BK=BK, BV=BV,
        USE_GK=gk is not None, USE_GV=gv is not None, USE_H0=h0 is not None,
    )
    return o.reshape(B, H, T, V), ht.reshape(B, H, K, V)
