r"""Triton forward kernels for the delta rule (see :mod:`reprobook.kernels.delta_rule` for the maths).

Two kernels implement the chunkwise WY/UT form, following the split of fla's ``chunk_delta_rule``
forward (prepare the WY representation in parallel over chunks, then one sequential pass over
chunks per (batch, head, value block)):

1. ``_wy_fwd_kernel``, grid ``(T/C, B*H)``: per chunk, ``A = tril(diag(beta) K K^T, -1)``, the
   inverse ``T = (I + A)^{-1}`` by forward substitution in registers, then ``W = T diag(beta) K``
   and ``U = T diag(beta) V``.
2. ``_chunk_fwd_kernel``, grid ``(V/BV, B*H)``: walks the chunks in order, keeping the state block
   ``S [K, BV]`` in registers: ``U' = U - W S``, ``O = s Q S + (s Q K^T ⊙ M) U'``,
   ``S += K^T U'``.

A third kernel, ``_recurrent_fwd_kernel``, is the token-by-token recurrence (grid ``(V/BV, B*H)``).

All tiles are at least 16 wide because ``tl.dot`` needs M, N, K ≥ 16 on a GPU (the interpreter
would accept less, which would hide the problem). Products use ``input_precision="ieee"`` so fp32
is not silently TF32 on NVIDIA hardware. Arithmetic runs in the dtype of the workspace tensors
(float64 for float64 inputs, else float32); inputs may be fp16/fp32/fp64 (bf16 on GPU only).
These are forward kernels: gradients come from the torch chunkwise form.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from ._checks import compute_dtype

__all__ = ["chunk_delta_rule_fwd", "fused_recurrent_delta_rule_fwd"]


@triton.jit
def _wy_fwd_kernel(k_ptr, v_ptr, beta_ptr, w_ptr, u_ptr, T,
                   H: tl.constexpr, K: tl.constexpr, V: tl.constexpr, C: tl.constexpr,
                   BK: tl.constexpr, BV: tl.constexpr):
    i_n = tl.program_id(0)
    i_bh = tl.program_id(1)
    i_b = i_bh // H
    i_h = i_bh % H
    ACC = w_ptr.dtype.element_ty

    o_c = tl.arange(0, C)
    rows = i_n * C + o_c
    m_r = rows < T
    tok = (i_b * T + rows) * H + i_h                      # token index into [B, T, H]
    o_k = tl.arange(0, BK)
    m_k = o_k < K

    b_beta = tl.load(beta_ptr + tok, mask=m_r, other=0.).to(ACC)
    p_k = k_ptr + tok[:, None] * K + o_k[None, :]
    b_k = tl.load(p_k, mask=m_r[:, None] & m_k[None, :], other=0.).to(ACC)
    b_kb = b_k * b_beta[:, None]

    # A = strictly lower part of diag(beta) K K^T
    b_A = tl.dot(b_kb, tl.trans(b_k), input_precision="ieee")
    b_A = tl.where(o_c[:, None] > o_c[None, :], b_A, 0.)
    # T = (I + A)^{-1} by forward substitution: row i of T is e_i - sum_{j<i} A_ij T_j.
    # Rows j < i are final when row i is formed, so one pass over the rows suffices.
    b_T = tl.where(o_c[:, None] == o_c[None, :], 1., 0.).to(ACC)
    for i in range(1, C):
        a_i = tl.sum(tl.where(o_c[:, None] == i, b_A, 0.), 0)           # row i of A, [C]
        t_i = tl.sum(a_i[:, None] * b_T, 0)                              # sum_j A_ij T_j, [C]
        b_T = tl.where(o_c[:, None] == i, b_T - t_i[None, :], b_T)

    b_w = tl.dot(b_T, b_kb, input_precision="ieee")
    tl.store(w_ptr + tok[:, None] * K + o_k[None, :], b_w.to(ACC),
             mask=m_r[:, None] & m_k[None, :])
    for i_v in range(0, tl.cdiv(V, BV)):
        o_v = i_v * BV + tl.arange(0, BV)
        m_v = o_v < V
        m_rv = m_r[:, None] & m_v[None, :]
        b_v = tl.load(v_ptr + tok[:, None] * V + o_v[None, :], mask=m_rv, other=0.).to(ACC)
        b_u = tl.dot(b_T, b_v * b_beta[:, None], input_precision="ieee")
        tl.store(u_ptr + tok[:, None] * V + o_v[None, :], b_u.to(ACC), mask=m_rv)


@triton.jit
def _chunk_fwd_kernel(q_ptr, k_ptr, w_ptr, u_ptr, h0_ptr, o_ptr, ht_ptr, scale, T,
                      H: tl.constexpr, K: tl.constexpr, V: tl.constexpr, C: tl.constexpr,
                      BK: tl.constexpr, BV: tl.constexpr, NT: tl.constexpr,
                      USE_H0: tl.constexpr, STORE_HT: tl.constexpr):
    i_v = tl.program_id(0)
    i_bh = tl.program_id(1)
    i_b = i_bh // H
    i_h = i_bh % H
    ACC = w_ptr.dtype.element_ty

    o_c = tl.arange(0, C)
    o_k = tl.arange(0, BK)
    o_v = i_v * BV + tl.arange(0, BV)
    m_k = o_k < K
    m_v = o_v < V
    causal = o_c[:, None] >= o_c[None, :]                 # diagonal included
    p_s = i_bh * K * V + o_k[:, None] * V + o_v[None, :]
    m_s = m_k[:, None] & m_v[None, :]

    b_S = tl.zeros([BK, BV], dtype=ACC)
    if USE_H0:
        b_S += tl.load(h0_ptr + p_s, mask=m_s, other=0.).to(ACC)
    for i_n in range(0, NT):
        rows = i_n * C + o_c
        m_r = rows < T
        tok = (i_b * T + rows) * H + i_h
        m_rk = m_r[:, None] & m_k[None, :]
        m_rv = m_r[:, None] & m_v[None, :]
        b_q = tl.load(q_ptr + tok[:, None] * K + o_k[None, :], mask=m_rk, other=0.).to(ACC) * scale
        b_k = tl.load(k_ptr + tok[:, None] * K + o_k[None, :], mask=m_rk, other=0.).to(ACC)
        b_w = tl.load(w_ptr + tok[:, None] * K + o_k[None, :], mask=m_rk, other=0.)
        b_u = tl.load(u_ptr + tok[:, None] * V + o_v[None, :], mask=m_rv, other=0.)
        b_u = b_u - tl.dot(b_w, b_S, input_precision="ieee")             # U' = U - W S
        b_A = tl.dot(b_q, tl.trans(b_k), input_precision="ieee")
        b_A = tl.where(causal, b_A, 0.)
        b_o = tl.dot(b_q, b_S, input_precision="ieee") + tl.dot(b_A, b_u, input_precision="ieee")
        tl.store(o_ptr + tok[:, None] * V + o_v[None, :], b_o.to(o_ptr.dtype.element_ty), mask=m_rv)
        b_S += tl.dot(tl.trans(b_k), b_u, input_precision="ieee")         # S += K^T U'
    if STORE_HT:
        tl.store(ht_ptr + p_s, b_S.to(ht_ptr.dtype.element_ty), mask=m_s)


@triton.jit
def _recurrent_fwd_kernel(q_ptr, k_ptr, v_ptr, beta_ptr, h0_ptr, o_ptr, ht_ptr, scale, T,
                          H: tl.constexpr, K: tl.constexpr, V: tl.constexpr,
                          BK: tl.constexpr, BV: tl.constexpr, USE_H0: tl.constexpr):
    i_v = tl.program_id(0)
    i_bh = tl.program_id(1)
    i_b = i_bh // H
    i_h = i_bh % H
    ACC = ht_ptr.dtype.element_ty

    o_k = tl.arange(0, BK)
    o_v = i_v * BV + tl.arange(0, BV)
    m_k = o_k < K
    m_v = o_v < V
    p_s = i_bh * K * V + o_k[:, None] * V + o_v[None, :]
    m_s = m_k[:, None] & m_v[None, :]
    b_S = tl.zeros([BK, BV], dtype=ACC)
    if USE_H0:
        b_S += tl.load(h0_ptr + p_s, mask=m_s, other=0.).to(ACC)
    for t in range(0, T):
        tok = (i_b * T + t) * H + i_h
        b_q = tl.load(q_ptr + tok * K + o_k, mask=m_k, other=0.).to(ACC) * scale
        b_k = tl.load(k_ptr + tok * K + o_k, mask=m_k, other=0.).to(ACC)
        b_v = tl.load(v_ptr + tok * V + o_v, mask=m_v, other=0.).to(ACC)
        b_beta = tl.load(beta_ptr + tok).to(ACC)
        b_u = b_beta * (b_v - tl.sum(b_S * b_k[:, None], 0))            # beta (v - S^T k)
        b_S += b_k[:, None] * b_u[None, :]
        b_o = tl.sum(b_S * b_q[:, None], 0)                              # S^T (s q)
        tl.store(o_ptr + tok * V + o_v, b_o.to(o_ptr.dtype.element_ty), mask=m_v)
    tl.store(ht_ptr + p_s, b_S, mask=m_s)


def _tile(n: int, cap: int) -> int:
    """Power-of-two tile ≥ 16 covering ``n`` (capped at ``cap`` when ``n`` is larger)."""
    return max(16, min(triton.next_power_of_2(n), cap))


def chunk_delta_rule_fwd(q, k, v, beta, scale: float, h0, chunk_size: int):
    """Chunkwise forward through the two Triton kernels; returns ``(o, final_state)``."""
    B, T, H, K = q.shape
    V = v.shape[-1]
    if K > 256:
        raise ValueError(f"q's head dim K={K} is above 256, the largest the Triton kernel keeps in registers")
    acc = compute_dtype(q.dtype)
    q, k, v, beta = (x.contiguous() for x in (q, k, v, beta))
    C = chunk_size
    NT = triton.cdiv(T, C)
    BK = _tile(K, 256)
    BV = _tile(V, 64)
    w = torch.empty(B, T, H, K, dtype=acc, device=q.device)
    u = torch.empty(B, T, H, V, dtype=acc, device=q.device)
    _wy_fwd_kernel[(NT, B * H)](k, v, beta, w, u, T, H=H, K=K, V=V, C=C, BK=BK, BV=BV)
    o = torch.empty(B, T, H, V, dtype=v.dtype, device=q.device)
    ht = torch.empty(B, H, K, V, dtype=acc, device=q.device)
    h0c = ht if h0 is None else h0.to(acc).contiguous()
    _chunk_fwd_kernel[(triton.cdiv(V, BV), B * H)](
        q, k, w, u, h0c, o, ht, scale, T, H=H, K=K, V=V, C=C, BK=BK, BV=BV, NT=NT,
        USE_H0=h0 is not None, STORE_HT=True)
    return o, ht


def fused_recurrent_delta_rule_fwd(q, k, v, beta, scale: float, h0):
    """The recurrence as one Triton kernel; returns ``(o, final_state)``."""
    B, T, H, K = q.shape
    V = v.shape[-1]
    acc = compute_dtype(q.dtype)
    q, k, v, beta = (x.contiguous() for x in (q, k, v, beta))
    BK = _tile(K, 1 << 30)
    BV = _tile(V, 32)
    o = torch.empty(B, T, H, V, dtype=v.dtype, device=q.device)
    ht = torch.empty(B, H, K, V, dtype=acc, device=q.device)
    h0c = ht if h0 is None else h0.to(acc).contiguous()
    _recurrent_fwd_kernel[(triton.cdiv(V, BV), B * H)](
        q, k, v, beta, h0c, o, ht, scale, T, H=H, K=K, V=V, BK=BK, BV=BV, USE_H0=h0 is not None)
    return o, ht
