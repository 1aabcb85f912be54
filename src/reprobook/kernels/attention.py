r"""Softmax attention in three forms: naive reference, tiled online softmax (torch), Triton forward.

The public entry point mirrors ``flash_attn.flash_attn_func`` (FlashAttention-2/3):
``q`` is ``[B, Sq, H, D]``, ``k`` is ``[B, Sk, H_kv, D]`` and ``v`` is ``[B, Sk, H_kv, Dv]``,
with ``H % H_kv == 0`` (grouped-query attention: query head ``h`` reads key/value head
``h // (H / H_kv)``). For each batch ``b`` and head ``h``

.. math::

    S = \tau\, Q K^\top,\qquad P = \operatorname{softmax}_\text{row}(S),\qquad O = P V,
    \qquad \mathrm{LSE}_i = \log \textstyle\sum_j e^{S_{ij}},

with ``softmax_scale`` :math:`\tau` defaulting to :math:`1/\sqrt{D}`.

**Causal masking, bottom-right aligned** (the flash-attn convention when ``Sq != Sk``): query row
``i`` may attend to key ``j`` iff ``j <= i + Sk - Sq``. So the *last* query row always sees every
key, and when ``Sq > Sk`` the first ``Sq - Sk`` query rows see no key at all. Such empty rows
return ``O = 0`` and ``LSE = +inf`` (what flash-attn stores, so that a backward pass computing
``exp(S - LSE)`` gets exactly zero).

**Tiled online softmax** (FlashAttention-2/3 forward). Q is cut into row blocks of ``block_q``;
for each row block we stream over key/value blocks of ``block_k`` keeping, per row, a running max
``m``, a running sum ``l`` and an unnormalised accumulator ``A``:

.. math::

    m' = \max(m, \operatorname{rowmax} S_j),\quad P_j = e^{S_j - m'},\quad
    l \leftarrow e^{m - m'} l + \operatorname{rowsum} P_j,\quad
    A \leftarrow e^{m - m'} A + P_j V_j,\quad m \leftarrow m'.

At the end ``O = A / l`` and ``LSE = m + log l``. Only a ``block_q x block_k`` tile of scores
exists at any time. The backward pass (FlashAttention-2's) recomputes each tile from the saved
LSE: ``P = exp(S - LSE)``, ``dV += P^T dO``, ``dP = dO V^T``,
``dS = P * (dP - rowsum(dO * O))``, ``dQ += tau dS K``, ``dK += tau dS^T Q``.
"""

from __future__ import annotations

import contextlib
import math

import torch

from ._checks import check_impl, check_same_device, check_tensor, compute_dtype

__all__ = [
    "flash_attn_func",
    "planted_bug",
    "PLANTED_BUGS",
    "attention_reference",
    "tiled_attention_forward",
    "causal_mask",
    "attention_flops",
]

_IMPLS = ("reference", "torch", "triton")

#: Bugs :func:`planted_bug` can plant in the tiled forms (never in the reference), for a chapter's
#: controls: ``"no-rescale"`` drops the factor ``e^{m - m'}`` that rescales the accumulator when the
#: running max grows (tiled torch forward and Triton kernel); ``"no-delta"`` drops the
#: ``rowsum(dO * O)`` term of ``dS`` in the tiled backward.
PLANTED_BUGS = ("no-rescale", "no-delta")
_planted: str | None = None


@contextlib.contextmanager
def planted_bug(name: str):
    """Run the tiled forms with one of :data:`PLANTED_BUGS` planted, inside a ``with`` block.

    A chapter re-runs its exactness checks under it to show they can fail (a control on a broken
    method); the naive reference is never affected.
    """
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


# ----------------------------------------------------------------------------- input handling
def _check_block(name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return value


def _check_inputs(q, k, v, softmax_scale):
    """Validate shapes/dtypes; return (B, Sq, H, D, Sk, H_kv, Dv, scale)."""
    check_tensor("q", q, ndim=4)
    check_tensor("k", k, ndim=4)
    check_tensor("v", v, ndim=4)
    check_same_device(q=q, k=k, v=v)
    if not (q.dtype == k.dtype == v.dtype):
        raise TypeError(f"q, k, v must share a dtype, got {q.dtype}, {k.dtype}, {v.dtype}")
    B, Sq, H, D = q.shape
    Bk, Sk, Hkv, Dk = k.shape
    if Bk != B or v.shape[0] != B:
        raise ValueError(f"k and v must have batch size {B} like q, got {Bk} and {v.shape[0]}")
    if Dk != D:
        raise ValueError(f"k must have head dim {D} like q, got {Dk}")
    if v.shape[1] != Sk or v.shape[2] != Hkv:
        raise ValueError(f"v must have shape [B, Sk={Sk}, H_kv={Hkv}, Dv], got {tuple(v.shape)}")
    if min(Sq, Sk, H, D, v.shape[3]) < 1:
        raise ValueError(f"empty dimension in q {tuple(q.shape)} / k {tuple(k.shape)} / v {tuple(v.shape)}")
    if H % Hkv != 0:
        raise ValueError(f"the number of query heads ({H}) must be a multiple of k/v heads ({Hkv})")
    if softmax_scale is None:
        softmax_scale = 1.0 / math.sqrt(D)
    elif not isinstance(softmax_scale, (int, float)) or isinstance(softmax_scale, bool):
        raise TypeError(f"softmax_scale must be a float or None, got {type(softmax_scale).__name__}")
    return B, Sq, H, D, Sk, Hkv, v.shape[3], float(softmax_scale)


def _expand_kv(x: torch.Tensor, groups: int) -> torch.Tensor:
    """[B, S, H_kv, D] -> [B, S, H_kv*groups, D]; query head h reads kv head h // groups."""
    return x if groups == 1 else x.repeat_interleave(groups, dim=2)


def causal_mask(sq: int, sk: int, device=None) -> torch.Tensor:
    """Bool ``[sq, sk]``, True where query ``i`` may see key ``j``: ``j <= i + sk - sq``."""
    i = torch.arange(sq, device=device)[:, None]
    j = torch.arange(sk, device=device)[None, :]
    return j <= i + (sk - sq)


def attention_flops(batch: int, heads: int, sq: int, sk: int, d: int, causal: bool = False) -> float:
    """Forward FLOPs as the FlashAttention papers count them: ``4 B H Sq Sk D``, halved if causal."""
    flops = 4.0 * batch * heads * sq * sk * d
    return flops / 2 if causal else flops


# ----------------------------------------------------------------------------- reference
def attention_reference(q, k, v, softmax_scale=None, causal=False):
    """Naive attention on ``[B, S, H, D]`` inputs: build all of ``S``, softmax, multiply by ``V``.

    Computed in float64 for float64 inputs and float32 otherwise. Returns ``(out, lse)`` with
    ``out`` in the input dtype and ``lse`` ``[B, H, Sq]`` in the compute dtype. Differentiable.
    """
    B, Sq, H, D, Sk, Hkv, Dv, scale = _check_inputs(q, k, v, softmax_scale)
    dt = compute_dtype(q.dtype)
    qh = q.to(dt).transpose(1, 2)
    kh = _expand_kv(k, H // Hkv).to(dt).transpose(1, 2)
    vh = _expand_kv(v, H // Hkv).to(dt).transpose(1, 2)
    s = scale * (qh @ kh.transpose(-1, -2))
    if causal:
        s = s.masked_fill(~causal_mask(Sq, Sk, q.device), float("-inf"))
    # Shift by the (detached) row max: softmax is shift invariant, and the shift keeps rows that
    # are entirely masked at exp(-inf) = 0 instead of NaN (also in the backward pass).
    m = s.amax(dim=-1, keepdim=True).detach()
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    p = torch.exp(s - m)
    denom = p.sum(dim=-1, keepdim=True)
    empty = denom == 0
    out = (p @ vh) / torch.where(empty, torch.ones_like(denom), denom)
    lse = torch.where(empty, torch.full_like(denom, float("inf")), m + torch.log(denom)).squeeze(-1)
    return out.transpose(1, 2).to(q.dtype), lse


# ----------------------------------------------------------------------------- tiled (torch)
def _kv_end(i0: int, bq: int, sq: int, sk: int, causal: bool) -> int:
    """One past the last key any row of the block ``[i0, i0+bq)`` can see."""
    if not causal:
        return sk
    last_row = min(i0 + bq, sq) - 1
    return max(0, min(sk, last_row + (sk - sq) + 1))


def _scores(qi, kj, scale, causal, i0, j0, sq, sk):
    """One ``block_q x block_k`` tile of scaled, masked scores."""
    s = scale * (qi @ kj.transpose(-1, -2))
    if causal:
        rows = torch.arange(i0, i0 + qi.shape[-2], device=qi.device)[:, None]
        cols = torch.arange(j0, j0 + kj.shape[-2], device=qi.device)[None, :]
        s = s.masked_fill(cols > rows + (sk - sq), float("-inf"))
    return s


def tiled_attention_forward(q, k, v, scale, causal=False, block_q=64, block_k=64, schedule="plain"):
    """Online-softmax forward on head-major tensors ``q [B, H, Sq, D]``, ``k/v [B, H, Sk, ·]``.

    Returns ``(out [B, H, Sq, Dv], lse [B, H, Sq])`` in the dtype of ``q`` (use float32/float64).

    ``schedule="pipelined"`` issues the score GEMM of key block ``j+1`` before the softmax and PV
    GEMM of block ``j`` (FlashAttention-3's intra-warpgroup two-stage schedule). It only reorders
    independent operations, so the result is bit-identical to ``schedule="plain"``.
    """
    if schedule not in ("plain", "pipelined"):
        raise ValueError(f"schedule must be 'plain' or 'pipelined', got {schedule!r}")
    _check_block("block_q", block_q)
    _check_block("block_k", block_k)
    B, H, Sq, _ = q.shape
    Sk, Dv = k.shape[-2], v.shape[-1]
    out = q.new_empty(B, H, Sq, Dv)
    lse = q.new_empty(B, H, Sq)
    for i0 in range(0, Sq, block_q):
        qi = q[:, :, i0:i0 + block_q]
        rows = qi.shape[-2]
        m = q.new_full((B, H, rows), float("-inf"))
        l = q.new_zeros(B, H, rows)
        acc = q.new_zeros(B, H, rows, Dv)
        starts = list(range(0, _kv_end(i0, block_q, Sq, Sk, causal), block_k))

        def score(j0):
            return _scores(qi, k[:, :, j0:j0 + block_k], scale, causal, i0, j0, Sq, Sk)

        s_next = score(starts[0]) if (starts and schedule == "pipelined") else None
        for n, j0 in enumerate(starts):
            if schedule == "pipelined":
                s = s_next
                if n + 1 < len(starts):  # the next tile's GEMM is issued before this softmax
                    s_next = score(starts[n + 1])
            else:
                s = score(j0)
            m_new = torch.maximum(m, s.amax(dim=-1))
            # A row that has seen only masked keys so far keeps m = -inf; shift it by 0 instead so
            # that exp(-inf - (-inf)) never produces NaN.
            m_safe = torch.where(torch.isinf(m_new), torch.zeros_like(m_new), m_new)
            alpha = torch.exp(m - m_safe)
            p = torch.exp(s - m_safe[..., None])
            l = alpha * l + p.sum(dim=-1)
            if _planted == "no-rescale":  # planted bug: the old accumulator is not rescaled
                acc = acc + p @ v[:, :, j0:j0 + block_k]
            else:
                acc = alpha[..., None] * acc + p @ v[:, :, j0:j0 + block_k]
            m = m_new
        empty = l == 0
        out[:, :, i0:i0 + rows] = acc / torch.where(empty, torch.ones_like(l), l)[..., None]
        lse[:, :, i0:i0 + rows] = torch.where(empty, torch.full_like(l, float("inf")), m + torch.log(l))
    return out, lse


def _tiled_backward(q, k, v, out, lse, dout, scale, causal, block_q, block_k):
    """FlashAttention-2 backward: recompute each tile of P from the LSE; never store all of P."""
    Sq, Sk = q.shape[-2], k.shape[-2]
    delta = (dout * out).sum(dim=-1)  # rowsum(dO * O) = rowsum(P * dP)
    if _planted == "no-delta":  # planted bug: the softmax Jacobian's rank-one term is dropped
        delta = torch.zeros_like(delta)
    dq, dk, dv = torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
    for i0 in range(0, Sq, block_q):
        sl = slice(i0, i0 + block_q)
        qi, doi = q[:, :, sl], dout[:, :, sl]
        for j0 in range(0, _kv_end(i0, block_q, Sq, Sk, causal), block_k):
            sk_ = slice(j0, j0 + block_k)
            kj, vj = k[:, :, sk_], v[:, :, sk_]
            p = torch.exp(_scores(qi, kj, scale, causal, i0, j0, Sq, Sk) - lse[:, :, sl, None])
            dv[:, :, sk_] += p.transpose(-1, -2) @ doi
            ds = p * (doi @ vj.transpose(-1, -2) - delta[:, :, sl, None])
            dq[:, :, sl] += scale * (ds @ kj)
            dk[:, :, sk_] += scale * (ds.transpose(-1, -2) @ qi)
    return dq, dk, dv


class _TiledAttention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, scale, causal, block_q, block_k):
        out, lse = tiled_attention_forward(q, k, v, scale, causal, block_q, block_k)
        ctx.save_for_backward(q, k, v, out, lse)
        ctx.cfg = (scale, causal, block_q, block_k)
        ctx.mark_non_differentiable(lse)
        return out, lse

    @staticmethod
    def backward(ctx, dout, _dlse):
        q, k, v, out, lse = ctx.saved_tensors
        dq, dk, dv = _tiled_backward(q, k, v, out, lse, dout.contiguous(), *ctx.cfg)
        return dq, dk, dv, None, None, None, None


def _attention_tiled(q, k, v, scale, causal, block_q, block_k):
    H, Hkv = q.shape[2], k.shape[2]
    dt = compute_dtype(q.dtype)
    # Layout changes and the GQA expansion stay outside the autograd.Function, so autograd sums
    # the expanded heads' dK/dV back onto the shared k/v heads.
    qh = q.to(dt).transpose(1, 2).contiguous()
    kh = _expand_kv(k, H // Hkv).to(dt).transpose(1, 2).contiguous()
    vh = _expand_kv(v, H // Hkv).to(dt).transpose(1, 2).contiguous()
    out, lse = _TiledAttention.apply(qh, kh, vh, scale, causal, block_q, block_k)
    return out.transpose(1, 2).to(q.dtype), lse


# ----------------------------------------------------------------------------- public API
def flash_attn_func(
    q,
    k,
    v,
    softmax_scale=None,
    causal=False,
    return_attn_probs=False,
    impl="torch",
    block_q=64,
    block_k=64,
):
    """Softmax attention with flash-attn's signature; see the module docstring for the maths.

    Args:
        q: ``[B, Sq, H, D]``; k: ``[B, Sk, H_kv, D]``; v: ``[B, Sk, H_kv, Dv]``; ``H % H_kv == 0``.
        softmax_scale: multiplies ``Q K^T``; default ``1/sqrt(D)``.
        causal: bottom-right aligned causal mask (query ``i`` sees keys ``j <= i + Sk - Sq``).
        return_attn_probs: also return the log-sum-exp ``[B, H, Sq]`` (as FA3 does; FA2 returns
            further debug tensors that are not reproduced here).
        impl: ``"reference"`` (naive, materialises ``S``), ``"torch"`` (tiled online softmax with a
            tiled backward), ``"triton"`` (forward kernel; CUDA, or CPU with ``TRITON_INTERPRET=1``).
        block_q, block_k: tile sizes of the tiled forms (ignored by the reference).

    Returns:
        ``out`` ``[B, Sq, H, Dv]`` in the dtype of ``q``, or ``(out, lse)``. ``lse`` is float64 for
        float64 inputs, float32 otherwise; rows with no visible key give ``out = 0, lse = +inf``.
    """
    check_impl(impl, _IMPLS)
    _, _, _, _, _, _, _, scale = _check_inputs(q, k, v, softmax_scale)
    _check_block("block_q", block_q)
    _check_block("block_k", block_k)
    causal = bool(causal)
    if impl == "reference":
        out, lse = attention_reference(q, k, v, scale, causal)
    elif impl == "torch":
        out, lse = _attention_tiled(q, k, v, scale, causal, block_q, block_k)
    else:
        from ._attention_triton import attention_triton_forward  # lazy: keeps triton optional

        out, lse = attention_triton_forward(q, k, v, scale, causal, block_q, block_k,
                                            rescale=_planted != "no-rescale")
    return (out, lse) if return_attn_probs else out
