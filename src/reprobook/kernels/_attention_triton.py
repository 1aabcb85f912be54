"""Triton forward kernel for softmax attention (FlashAttention-2 style online softmax).

Imported lazily by :func:`reprobook.kernels.attention.flash_attn_func` so that ``TRITON_INTERPRET``
can still be set after ``reprobook`` is imported but before the first Triton call. One program
handles ``BLOCK_M`` query rows of one (batch, head) and streams over keys in blocks of ``BLOCK_N``;
the running max/sum/accumulator are kept in float32 (float64 for float64 inputs).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ._checks import check_triton_target


@triton.jit
def _attn_fwd(
    Q, K, V, O, LSE,
    sq_b, sq_s, sq_h, sq_d,
    sk_b, sk_s, sk_h, sk_d,
    sv_b, sv_s, sv_h, sv_d,
    so_b, so_s, so_h, so_d,
    sl_b, sl_h, sl_s,
    H, GROUP, SQ, SK, D, DV, scale,
    CAUSAL: tl.constexpr, ACC: tl.constexpr, IEEE: tl.constexpr, RESCALE: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_DV: tl.constexpr,
):
    pid_m = tl.program_id(0)
    pid_bh = tl.program_id(1)
    b = pid_bh // H
    h = pid_bh % H
    hk = h // GROUP  # grouped-query attention: GROUP query heads share one k/v head
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, BLOCK_D)
    offs_dv = tl.arange(0, BLOCK_DV)
    row_ok = offs_m < SQ

    q_ptrs = Q + b * sq_b + h * sq_h + offs_m[:, None] * sq_s + offs_d[None, :] * sq_d
    q = tl.load(q_ptrs, mask=row_ok[:, None] & (offs_d[None, :] < D), other=0.0)

    m_i = tl.full([BLOCK_M], float("-inf"), dtype=ACC)
    l_i = tl.zeros([BLOCK_M], dtype=ACC)
    acc = tl.zeros([BLOCK_M, BLOCK_DV], dtype=ACC)

    shift = SK - SQ  # bottom-right causal alignment: row i sees keys j <= i + SK - SQ
    hi = SK
    if CAUSAL:
        hi = tl.maximum(tl.minimum(SK, (pid_m + 1) * BLOCK_M + shift), 0)

    k_base = K + b * sk_b + hk * sk_h
    v_base = V + b * sv_b + hk * sv_h
    for start_n in range(0, hi, BLOCK_N):
        cols = start_n + offs_n
        col_ok = cols < SK
        kt = tl.load(k_base + cols[None, :] * sk_s + offs_d[:, None] * sk_d,
                     mask=col_ok[None, :] & (offs_d[:, None] < D), other=0.0)
        if IEEE:  # full-precision fp32 products on GPU (the default there is TF32)
            s = tl.dot(q, kt, input_precision="ieee").to(ACC) * scale
        else:
            s = tl.dot(q, kt).to(ACC) * scale
        ok = col_ok[None, :]
        if CAUSAL:
            ok = ok & (cols[None, :] <= offs_m[:, None] + shift)
        s = tl.where(ok, s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)  # rows with no key seen yet
        alpha = tl.exp(m_i - m_safe)
        p = tl.exp(s - m_safe[:, None])
        l_i = l_i * alpha + tl.sum(p, 1)
        vv = tl.load(v_base + cols[:, None] * sv_s + offs_dv[None, :] * sv_d,
                     mask=col_ok[:, None] & (offs_dv[None, :] < DV), other=0.0)
        if IEEE:
            pv = tl.dot(p.to(vv.dtype), vv, input_precision="ieee")
        else:
            pv = tl.dot(p.to(vv.dtype), vv)
        if RESCALE:
            acc = acc * alpha[:, None] + pv.to(ACC)
        else:  # a planted bug (reprobook.kernels.attention.planted_bug("no-rescale"))
            acc = acc + pv.to(ACC)
        m_i = m_new

    empty = l_i == 0.0
    out = acc / tl.where(empty, 1.0, l_i)[:, None]
    lse = tl.where(empty, float("inf"), m_i + tl.log(tl.where(empty, 1.0, l_i)))
    o_ptrs = O + b * so_b + h * so_h + offs_m[:, None] * so_s + offs_dv[None, :] * so_d
    tl.store(o_ptrs, out.to(O.dtype.element_ty), mask=row_ok[:, None] & (offs_dv[None, :] < DV))
    tl.store(LSE + b * sl_b + h * sl_h + offs_m * sl_s, lse.to(LSE.dtype.element_ty), mask=row_ok)


def attention_triton_forward(q, k, v, scale, causal, block_q, block_k, rescale=True):
    """Launch :func:`_attn_fwd` on ``[B, S, H, D]`` tensors; returns ``(out, lse)``.

    ``rescale=False`` plants a bug (the accumulator is not rescaled when the running max grows),
    for controls only."""
    check_triton_target("q", q)
    for name, blk in (("block_q", block_q), ("block_k", block_k)):
        if blk < 16 or blk & (blk - 1):
            raise ValueError(f"{name} must be a power of two >= 16 for impl='triton', got {blk}")
    B, Sq, H, D = q.shape
    Sk, Hkv, Dv = k.shape[1], k.shape[2], v.shape[3]
    acc_dtype = torch.float64 if q.dtype == torch.float64 else torch.float32
    out = torch.empty(B, Sq, H, Dv, device=q.device, dtype=q.dtype)
    lse = torch.empty(B, H, Sq, device=q.device, dtype=acc_dtype)
    grid = (triton.cdiv(Sq, block_q), B * H)
    _attn_fwd[grid](
        q, k, v, out, lse,
        *q.stride(), *k.stride(), *v.stride(), *out.stride(), *lse.stride(),
        H, H // Hkv, Sq, Sk, D, Dv, scale,
        CAUSAL=bool(causal),
        ACC=tl.float64 if acc_dtype == torch.float64 else tl.float32,
        IEEE=q.dtype in (torch.float32, torch.float64), RESCALE=bool(rescale),
        BLOCK_M=block_q, BLOCK_N=block_k,
        BLOCK_D=max(16, triton.next_power_of_2(D)), BLOCK_DV=max(16, triton.next_power_of_2(Dv)),
    )
    return out, lse
