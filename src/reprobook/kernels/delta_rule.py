r"""The delta rule (DeltaNet): a linear-attention state updated by error correction.

Conventions follow flash-linear-attention (``fla.ops.delta_rule``): inputs are sequence-first,
``q, k: [B, T, H, K]``, ``v: [B, T, H, V]`` (``V`` may differ from ``K``), ``beta: [B, T, H]``,
and the recurrent state is ``S: [B, H, K, V]`` (fla's K×V orientation, the transpose of the paper's
``S``). For every batch row and head, starting from ``S_0`` (zero or ``initial_state``):

.. math::

    u_t &= \beta_t\,(v_t - S_{t-1}^\top k_t)            \qquad\text{(the prediction error, scaled)}\\
    S_t &= S_{t-1} + k_t u_t^\top = (I - \beta_t k_t k_t^\top) S_{t-1} + \beta_t k_t v_t^\top\\
    o_t &= S_t^\top (s\,q_t),\qquad s = \text{scale} = K^{-1/2}\ \text{by default.}

With L2-normalised keys and ``beta`` in (0, 1) each ``I - beta k k^T`` is a contraction (a
generalised Householder reflection), which is why DeltaNet normalises its keys; doing so is the
caller's job here, as in fla, unless ``use_qk_l2norm_in_kernel=True``.

**Chunkwise (WY/UT) form** (Yang et al., NeurIPS 2024). Split the sequence into chunks of ``C``
rows ``Q, K, V`` (``C × ·``) with ``K_b = diag(beta) K``, ``V_b = diag(beta) V``. The product of the
chunk's Householder factors has the compact WY representation
``prod_i (I - beta_i k_i k_i^T) = I - K^T W`` (rightmost factor first), where

.. math::

    \mathcal T = (I + \operatorname{tril}(K_b K^\top, -1))^{-1},\qquad W = \mathcal T K_b,\qquad
    U = \mathcal T V_b

(the "UT transform": one unit-lower-triangular solve per chunk). With ``S`` the state entering the
chunk, the chunk's pseudo-values, outputs and the next state are

.. math::

    U' = U - W S,\qquad O = s\,Q S + (s\,Q K^\top \odot M) U',\qquad S \leftarrow S + K^\top U',

where ``M`` is the causal mask *including* the diagonal. Only the ``T / C`` state updates are
sequential; everything else is a batched matrix product, which is what makes training parallel
over the sequence. For ``C = 1`` it reduces to the recurrence.

Public functions (names, argument order and return values mirror fla's):

* :func:`chunk_delta_rule` — ``impl="torch"`` (the chunkwise form above, autograd-capable),
  ``"reference"`` (the recurrence) or ``"triton"`` (chunkwise Triton forward kernels).
* :func:`fused_recurrent_delta_rule` — ``impl="reference"`` (the recurrence in torch, float64
  capable, autograd-capable) or ``"triton"`` (the recurrence as one Triton forward kernel).
* :func:`wy_representation` — ``W`` and ``U`` for one chunk (exposed for the WY identity check).

Every function returns ``(o, final_state)`` with ``o: [B, T, H, V]`` in the dtype of ``v`` and
``final_state: [B, H, K, V]`` in the compute dtype (float64 for float64 inputs, else float32), or
``None`` unless ``output_final_state=True``.
"""
from __future__ import annotations


import torch
import torch.nn.functional as F

from ._checks import (check_impl, check_power_of_two, check_same_device, check_shape, check_tensor,
                      check_triton_target, compute_dtype)

__all__ = ["chunk_delta_rule", "fused_recurrent_delta_rule", "wy_representation", "l2norm"]

_CHUNK_IMPLS = ("torch", "reference", "triton")
_RECURRENT_IMPLS = ("reference", "triton")


# --------------------------------------------------------------------------------------- helpers
def l2norm(x: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """``x / sqrt(sum(x^2) + eps)`` over the last dimension (fla's ``l2norm``)."""
    return x * torch.rsqrt((x * x).sum(-1, keepdim=True) + eps)


def _intra_chunk_mask(c: int, device) -> torch.Tensor:
    """Causal mask of a chunk, diagonal included: row i (a query) sees keys j <= i.

    Kept as a separate function so the chapter can plant an off-by-one here (``j < i``) and watch
    the exactness check fail.
    """
    return torch.ones(c, c, dtype=torch.bool, device=device).tril(0)


def _check_inputs(q, k, v, beta, initial_state, scale, cu_seqlens, need_beta=True):
    """Validate shapes and dtypes; return (B, T, H, K, V, scale)."""
    check_tensor("q", q, ndim=4)
    check_tensor("k", k, ndim=4)
    check_tensor("v", v, ndim=4)
    B, T, H, K = q.shape
    check_shape("k", k, (B, T, H, K))
    check_shape("v", v, (B, T, H, None))
    V = v.shape[-1]
    if T == 0 or K == 0 or V == 0:
        raise ValueError(f"q and v must have T, K, V >= 1, got q {tuple(q.shape)}, v {tuple(v.shape)}")
    for name, x in (("k", k), ("v", v)):
        if x.dtype != q.dtype:
            raise TypeError(f"{name} must have the dtype of q ({q.dtype}), got {x.dtype}")
    if beta is not None:
        check_tensor("beta", beta, ndim=3)
        check_shape("beta", beta, (B, T, H))
        if beta.dtype != q.dtype:
            raise TypeError(f"beta must have the dtype of q ({q.dtype}), got {beta.dtype}")
    elif need_beta:
        raise ValueError("beta is required: a [B, T, H] tensor of write strengths in (0, 1)")
    N = B
    if cu_seqlens is not None:
        check_tensor("cu_seqlens", cu_seqlens, ndim=1, dtypes=(torch.int32, torch.int64))
        if B != 1:
            raise ValueError(f"with cu_seqlens the batch size must be 1 (sequences are packed), got B={B}")
        cs = cu_seqlens.tolist()
        if len(cs) < 2 or cs[0] != 0 or cs[-1] != T or any(b <= a for a, b in zip(cs, cs[1:])):
            raise ValueError(f"cu_seqlens must rise strictly from 0 to T={T}, got {cs}")
        N = len(cs) - 1
    if initial_state is not None:
        check_tensor("initial_state", initial_state, ndim=4)
        check_shape("initial_state", initial_state, (N, H, K, V))
    check_same_device(q=q, k=k, v=v, beta=beta, initial_state=initial_state)
    if scale is None:
        scale = K ** -0.5
    elif isinstance(scale, bool) or not isinstance(scale, (int, float)):
        raise TypeError(f"scale must be a float or None, got {scale!r}")
    return B, T, H, K, V, float(scale)


def _over_segments(fn, q, k, v, beta, scale, initial_state, output_final_state, cu_seqlens):
    """Run ``fn`` on each packed sequence of ``cu_seqlens`` and concatenate (B must be 1)."""
    cs = cu_seqlens.tolist()
    outs, finals = [], []
    for n, (a, b) in enumerate(zip(cs, cs[1:])):
        h0 = None if initial_state is None else initial_state[n:n + 1]
        o, ht = fn(q[:, a:b], k[:, a:b], v[:, a:b], beta[:, a:b], scale, h0)
        outs.append(o)
        finals.append(ht)
    ht = torch.cat(finals, 0) if output_final_state else None
    return torch.cat(outs, 1), ht


def _prologue(q, k, beta, use_qk_l2norm_in_kernel):
    if use_qk_l2norm_in_kernel:
        q, k = l2norm(q), l2norm(k)
    if beta is None:
        beta = torch.ones(q.shape[:3], dtype=q.dtype, device=q.device)
    return q, k, beta


# ------------------------------------------------------------------------------- the recurrence
def _recurrent_torch(q, k, v, beta, scale, h0):
    """The plain recurrence, one token at a time (ground truth; autograd-capable)."""
    B, T, H, K = q.shape
    V = v.shape[-1]
    dt = compute_dtype(q.dtype)
    q, k, v, beta = (x.to(dt) for x in (q, k, v, beta))
    S = torch.zeros(B, H, K, V, dtype=dt, device=q.device) if h0 is None else h0.to(dt)
    outs = []
    for t in range(T):
        k_t, q_t = k[:, t], q[:, t] * scale                            # [B, H, K]
        pred = torch.einsum("bhkv,bhk->bhv", S, k_t)                     # S^T k
        u_t = beta[:, t, :, None] * (v[:, t] - pred)                     # [B, H, V]
        S = S + k_t[..., :, None] * u_t[..., None, :]
        outs.append(torch.einsum("bhkv,bhk->bhv", S, q_t))
    return torch.stack(outs, 1), S


# ---------------------------------------------------------------------------- the chunkwise form
def wy_representation(k: torch.Tensor, beta: torch.Tensor, v: torch.Tensor | None = None):
    r"""WY representation of one chunk's Householder product, batched over leading dimensions.

    For ``k: [..., C, K]`` and ``beta: [..., C]`` return ``W = T diag(beta) K`` (and
    ``U = T diag(beta) V`` when ``v: [..., C, V]`` is given) with
    ``T = (I + tril(diag(beta) K K^T, -1))^{-1}``, so that
    ``(I - beta_C k_C k_C^T) ... (I - beta_1 k_1 k_1^T) = I - K^T W`` (``K × K``).
    """
    K = k.shape[-1]
    kb = k * beta[..., None]
    A = (kb @ k.transpose(-1, -2)).tril(-1)
    rhs = kb if v is None else torch.cat([kb, v * beta[..., None]], -1)
    # T X = (I + A)^{-1} X is one unit-lower-triangular solve (no pivoting, exact up to rounding);
    # solving for W and U together never forms T. unitriangular=True reads only A's strict lower part.
    WU = torch.linalg.solve_triangular(A, rhs, upper=False, unitriangular=True)
    if v is None:
        return WU
    return WU[..., :K], WU[..., K:]


def _chunk_torch(q, k, v, beta, scale, h0, chunk_size):
    """The chunkwise WY/UT algorithm in torch (see the module docstring)."""
    B, T, H, K = q.shape
    V = v.shape[-1]
    # A chunk longer than the sequence only adds padding; the result does not depend on C.
    C = min(chunk_size, 1 << (T - 1).bit_length())
    dt = compute_dtype(q.dtype)
    pad = (-T) % C
    N = (T + pad) // C

    def chunks(x):
        """[B, T, H, D] -> [N, B*H, C, D]: chunk-major, so every chunk is one contiguous block."""
        x = x.to(dt)
        if pad:
            # Zero keys and zero beta write nothing into the state, so padding leaves S untouched.
            x = F.pad(x, (0, 0) * (x.ndim - 2) + (0, pad))
        x = x.reshape(B, N, C, H, -1).permute(1, 0, 3, 2, 4)
        return x.reshape(N, B * H, C, x.shape[-1])

    q, k, v = chunks(q) * scale, chunks(k), chunks(v)
    beta = chunks(beta[..., None])[..., 0]                                  # [N, BH, C]

    W, U = wy_representation(k, beta, v)                                   # all chunks at once
    A_qk = (q @ k.transpose(-1, -2)).masked_fill(~_intra_chunk_mask(C, q.device), 0)
    S = (torch.zeros(B * H, K, V, dtype=dt, device=q.device) if h0 is None
         else h0.to(dt).reshape(B * H, K, V))
    states, pseudo = [], []
    for n in range(N):                       # the only sequential part: T / C small steps
        states.append(S)
        u = torch.baddbmm(U[n], W[n], S, alpha=-1)                      # U' = U - W S
        pseudo.append(u)
        S = torch.baddbmm(S, k[n].transpose(-1, -2), u)                 # S + K^T U'
    S_in = torch.stack(states)                                           # [N, BH, K, V]
    Up = torch.stack(pseudo)                                             # [N, BH, C, V]
    o = torch.baddbmm((A_qk @ Up).flatten(0, 1), q.flatten(0, 1), S_in.flatten(0, 1))
    o = o.reshape(N, B, H, C, V).permute(1, 0, 3, 2, 4).reshape(B, N * C, H, V)[:, :T]
    return o, S.reshape(B, H, K, V)


# ------------------------------------------------------------------------------- public functions
def chunk_delta_rule(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, beta: torch.Tensor,
                     scale: float | None = None, initial_state: torch.Tensor | None = None,
                     output_final_state: bool = False, use_qk_l2norm_in_kernel: bool = False,
                     cu_seqlens: torch.LongTensor | None = None, chunk_size: int = 64,
                     impl: str = "torch"):
    """Delta-rule attention computed chunk by chunk (mirrors ``fla.ops.delta_rule.chunk_delta_rule``).

    Args:
        q, k: ``[B, T, H, K]``; v: ``[B, T, H, V]``; beta: ``[B, T, H]`` (all one float dtype).
        scale: multiplies q; ``None`` means ``K ** -0.5``.
        initial_state: ``[N, H, K, V]`` (``N = B``, or the number of packed sequences).
        output_final_state: also return the final state ``[N, H, K, V]``.
        use_qk_l2norm_in_kernel: L2-normalise q and k first (otherwise the caller should).
        cu_seqlens: ``[N + 1]`` boundaries of packed sequences (B must be 1); runs each separately.
        chunk_size: chunk length ``C`` (a power of two; ≥ 16 for ``impl="triton"``).
        impl: ``"torch"`` (chunkwise, differentiable), ``"reference"`` (recurrence) or ``"triton"``
            (chunkwise forward kernels; CUDA, or the CPU interpreter with ``TRITON_INTERPRET=1``).

    Returns:
        ``(o, final_state)``: ``o`` ``[B, T, H, V]`` in q's dtype, ``final_state`` or ``None``.
    """
    check_impl(impl, _CHUNK_IMPLS)
    check_power_of_two("chunk_size", chunk_size)
    B, T, H, K, V, scale = _check_inputs(q, k, v, beta, initial_state, scale, cu_seqlens)
    q, k, beta = _prologue(q, k, beta, use_qk_l2norm_in_kernel)
    if impl == "reference":
        fn = _recurrent_torch
    elif impl == "torch":
        def fn(q, k, v, beta, scale, h0):
            return _chunk_torch(q, k, v, beta, scale, h0, chunk_size)
    else:
        _check_triton(q, chunk_size, k=k, v=v, beta=beta, initial_state=initial_state)
        from ._delta_rule_triton import chunk_delta_rule_fwd

        def fn(q, k, v, beta, scale, h0):
            return chunk_delta_rule_fwd(q, k, v, beta, scale, h0, chunk_size)
    return _run(fn, q, k, v, beta, scale, initial_state, output_final_state, cu_seqlens)


def fused_recurrent_delta_rule(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                               beta: torch.Tensor | None = None, scale: float | None = None,
                               initial_state: torch.Tensor | None = None,
                               output_final_state: bool = False,
                               use_qk_l2norm_in_kernel: bool = False,
                               cu_seqlens: torch.LongTensor | None = None,
                               impl: str = "reference"):
    """Delta-rule attention one token at a time (mirrors ``fused_recurrent_delta_rule`` of fla).

    Same arguments and return values as :func:`chunk_delta_rule`; ``beta=None`` means all ones.
    ``impl="reference"`` is the torch recurrence (float64-capable ground truth, differentiable);
    ``impl="triton"`` runs the same loop as one Triton forward kernel.
    """
    check_impl(impl, _RECURRENT_IMPLS)
    B, T, H, K, V, scale = _check_inputs(q, k, v, beta, initial_state, scale, cu_seqlens,
                                         need_beta=False)
    q, k, beta = _prologue(q, k, beta, use_qk_l2norm_in_kernel)
    if impl == "reference":
        fn = _recurrent_torch
    else:
        _check_triton(q, None, k=k, v=v, beta=beta, initial_state=initial_state)
        from ._delta_rule_triton import fused_recurrent_delta_rule_fwd as fn
    return _run(fn, q, k, v, beta, scale, initial_state, output_final_state, cu_seqlens)


def _run(fn, q, k, v, beta, scale, initial_state, output_final_state, cu_seqlens):
    if cu_seqlens is not None:
        o, ht = _over_segments(fn, q, k, v, beta, scale, initial_state, output_final_state, cu_seqlens)
    else:
        o, ht = fn(q, k, v, beta, scale, initial_state)
    return o.to(v.dtype), (ht if output_final_state else None)


def _check_triton(q: torch.Tensor, chunk_size: int | None, **others) -> None:
    """The Triton path needs a GPU tensor (or the interpreter), no bf16 on CPU, and C ≥ 16."""
    check_triton_target("q", q)
    for name, x in {"q": q, **others}.items():
        if torch.is_grad_enabled() and x is not None and x.requires_grad:
            raise ValueError(f"impl='triton' is forward only, but {name} requires grad; use "
                             f"impl='torch' to differentiate, or call under torch.no_grad()")
    if chunk_size is not None and chunk_size < 16:
        raise ValueError(f"chunk_size must be >= 16 for impl='triton' (tl.dot needs 16), got {chunk_size}")
