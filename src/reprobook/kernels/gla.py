r"""Gated linear attention (GLA) with per-channel forget gates, in three forms.

Layout and names follow flash-linear-attention (``fla.ops.gla``): ``q, k: [B, T, H, K]``,
``v: [B, T, H, V]``, log-space forget gates ``g`` (``gk``) ``: [B, T, H, K]`` and optionally
``gv: [B, T, H, V]`` (every entry ``<= 0``), the recurrent state ``S: [B, H, K, V]``.

For each batch row and head the recurrence is

.. math::

    S_t = \operatorname{diag}(e^{g^k_t})\, S_{t-1}\, \operatorname{diag}(e^{g^v_t}) + k_t v_t^\top,
    \qquad o_t = S_t^\top (\text{scale}\cdot q_t),

with ``scale = K ** -0.5`` by default and an absent gate meaning "no decay" on that side.

**Chunked form.**  Cut the sequence into chunks of ``C`` tokens, let ``b_i = \sum_{j\le i} g_j``
be the cumulative log-gate inside the chunk (per channel) and ``S^0`` the state entering it:

.. math::

    o_i = \big((q_i \odot e^{b^k_i})^\top S^0\big) \odot e^{b^v_i}
          + \sum_{j \le i} \Big(\sum_d q_{id} k_{jd} e^{b^k_{id}-b^k_{jd}}\Big)\, v_j \odot e^{b^v_i-b^v_j},

    S^{\text{next}} = \operatorname{diag}(e^{b^k_C}) S^0 \operatorname{diag}(e^{b^v_C})
          + \sum_j (k_j \odot e^{b^k_C-b^k_j})(v_j \odot e^{b^v_C-b^v_j})^\top .

Every exponent in the inter-chunk terms is a difference ``b_late - b_early <= 0``, so nothing
overflows.  The intra-chunk sum cannot be written as ``(Q e^{b})(K e^{-b})^\top`` without
``e^{-b}`` overflowing for strong gates, so it uses *secondary chunking*: inside a chunk the
rows are cut into sub-chunks of 16; for a query sub-chunk ``I`` with reference point
``r_I = b`` at its first row, a key ``j`` in an earlier sub-chunk contributes
``(q_i e^{b_i - r_I}) \cdot (k_j e^{r_I - b_j})`` (both factors ``<= 1``), while pairs inside the
same sub-chunk are formed directly in log space (a ``[16, 16, K]`` tensor).  The value-side gate
is handled the same way on the product with ``v``.

When the gates are mild, the overflow cannot happen and the log-space tensors are wasted work: if
``|b_i - b_1| < L`` for every row of every chunk (``L = 30`` in float32, ``300`` in float64), the
intra-chunk sum is formed as one matrix product ``(Q e^{b - b_1})(K e^{b_1 - b})^\top`` with the
chunk's first row as the reference point, every factor between ``e^{-L}`` and ``e^{L}``.  It is the
same sum, term by term (each term is rounded differently, by a few ulps), so the result and its
gradient equal the recurrence's to the same tolerance; the choice is made once per call
(:func:`_factorisable`), and strong gates always take the secondary-chunk path.

``impl="reference"`` is the plain per-token loop (ground truth, float64 capable);
``impl="torch"`` is the chunked form above (differentiable, gradients equal the reference's);
``impl="triton"`` is a forward-only Triton kernel (chunks of 16 in log space, state in registers;
``TRITON_INTERPRET=1`` on CPU).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from ._checks import (
    check_impl,
    check_power_of_two,
    check_same_device,
    check_shape,
    check_tensor,
    check_triton_target,
    compute_dtype,
)

IMPLS = ("reference", "torch", "triton")
SUB_CHUNK = 16

__all__ = ["chunk_gla", "fused_recurrent_gla", "gla_recurrent", "gla_chunked"]


# ----------------------------------------------------------------------------------------------
# input handling
# ----------------------------------------------------------------------------------------------
def _prepare(q, k, v, gk, gv, scale, initial_state, names=("q", "k", "v", "gk", "gv")):
    """Validate ``[B, T, H, D]`` inputs; return them as ``[B, H, T, D]`` in the compute dtype."""
    nq, nk, nv, ngk, ngv = names
    check_tensor(nq, q, ndim=4)
    B, T, H, K = q.shape
    if T < 1:
        raise ValueError(f"{nq} must have at least one time step (dim 1), got shape {tuple(q.shape)}")
    check_tensor(nk, k, ndim=4)
    check_shape(nk, k, (B, T, H, K))
    check_tensor(nv, v, ndim=4)
    check_shape(nv, v, (B, T, H, None))
    V = v.shape[-1]
    if gk is not None:
        check_tensor(ngk, gk, ndim=4)
        check_shape(ngk, gk, (B, T, H, K))
    if gv is not None:
        check_tensor(ngv, gv, ndim=4)
        check_shape(ngv, gv, (B, T, H, V))
    if initial_state is not None:
        check_tensor("initial_state", initial_state, ndim=4)
        check_shape("initial_state", initial_state, (B, H, K, V))
    check_same_device(**{nq: q, nk: k, nv: v, ngk: gk, ngv: gv, "initial_state": initial_state})
    if scale is None:
        scale = K ** -0.5
    if isinstance(scale, bool) or not isinstance(scale, (int, float)) or not math.isfinite(scale):
        raise ValueError(f"scale must be a finite number or None, got {scale!r}")
    cdt = compute_dtype(q.dtype)

    def bhtd(x):
        return None if x is None else x.transpose(1, 2).to(cdt)

    h0 = None if initial_state is None else initial_state.to(cdt)
    return bhtd(q), bhtd(k), bhtd(v), bhtd(gk), bhtd(gv), float(scale), h0


def _finish(o, state, in_dtype, output_final_state):
    """``[B, H, T, V]`` -> ``[B, T, H, V]`` in the input dtype; the state stays in compute dtype."""
    return o.transpose(1, 2).to(in_dtype), (state if output_final_state else None)


# ----------------------------------------------------------------------------------------------
# the reference: one token at a time
# ----------------------------------------------------------------------------------------------
def gla_recurrent(q, k, v, gk, gv, scale, h0):
    """Per-token recurrence on ``[B, H, T, D]`` tensors. Returns ``(o [B,H,T,V], S_T [B,H,K,V])``."""
    B, H, T, K = q.shape
    V = v.shape[-1]
    S = q.new_zeros(B, H, K, V) if h0 is None else h0
    outs = []
    for t in range(T):
        if gk is not None:
            S = S * gk[:, :, t].exp()[..., :, None]
        if gv is not None:
            S = S * gv[:, :, t].exp()[..., None, :]
        S = S + k[:, :, t, :, None] * v[:, :, t, None, :]
        outs.append(torch.einsum("bhk,bhkv->bhv", q[:, :, t] * scale, S))
    return torch.stack(outs, dim=2), S


# ----------------------------------------------------------------------------------------------
# the chunked form (torch)
# ----------------------------------------------------------------------------------------------
def _masked_exp(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """``exp(x)`` where ``mask`` else 0. Masked entries (which may be large and positive) are set
    to ``-inf`` before the exponential, so neither the value nor the gradient becomes inf/NaN."""
    return x.masked_fill(~mask, float("-inf")).exp()


def _index_masks(C: int, Cs: int, device):
    n = C // Cs
    sub = torch.arange(n, device=device)
    col = torch.arange(C, device=device)
    before = col[None, :] < (sub[:, None] * Cs)  # [n, C]: key j lies in an earlier sub-chunk than I
    r = torch.arange(Cs, device=device)
    causal = r[:, None] >= r[None, :]  # [Cs, Cs]: j <= i inside one sub-chunk
    return before, causal


#: Largest ``|b_i - b_1|`` (cumulative log-gate against the chunk's first row) for which the
#: factorised intra-chunk product is used, by compute dtype: ``e^{30}`` and ``e^{300}`` are far
#: from float32's and float64's overflow, with room for the sizes of q, k and v.
FACTOR_LIMIT = {torch.float32: 30.0, torch.float64: 300.0}


def _factorisable(b: torch.Tensor) -> bool:
    """True when every chunk's cumulative gates stay within :data:`FACTOR_LIMIT` of the chunk's first
    row, so that ``e^{b - b_1}`` and ``e^{b_1 - b}`` can be formed without overflow or underflow.
    (One host sync per call on a GPU.)"""
    limit = FACTOR_LIMIT.get(b.dtype)
    if limit is None:
        return False
    reach = (b.detach() - b.detach()[..., :1, :]).abs().amax()
    return bool(reach < limit)


def _intra_scores(q, k, bk, Cs):
    r"""``A_ij = \sum_d q_id k_jd exp(bk_id - bk_jd)`` for ``j <= i`` inside each chunk, else 0.

    ``q, k, bk: [..., C, K]`` -> ``A: [..., C, C]``.
    """
    C = q.shape[-2]
    causal_chunk = torch.ones(C, C, dtype=torch.bool, device=q.device).tril()
    if bk is None:
        return (q @ k.transpose(-1, -2)) * causal_chunk
    if _factorisable(bk):  # mild gates: one product, both factors within e^{+-FACTOR_LIMIT}
        ref = bk[..., :1, :]
        return ((q * (bk - ref).exp()) @ (k * (ref - bk).exp()).transpose(-1, -2)) * causal_chunk
    n = C // Cs
    before, causal = _index_masks(C, Cs, q.device)
    qs, ks, bks = (x.unflatten(-2, (n, Cs)) for x in (q, k, bk))  # [..., n, Cs, K]
    dd = bks.unsqueeze(-2) - bks.unsqueeze(-3)  # [..., n, Cs_i, Cs_j, K]
    a_diag = (qs.unsqueeze(-2) * ks.unsqueeze(-3) * _masked_exp(dd, causal[..., None])).sum(-1)
    if n == 1:  # the chunk is one sub-chunk: nothing off the diagonal
        return a_diag.squeeze(-3)
    ref = bks[..., :, :1, :]  # [..., n, 1, K]: cumulative gate at each sub-chunk's first row
    q_off = qs * (bks - ref).exp()  # exponent <= 0
    k_off = k.unsqueeze(-3) * _masked_exp(ref - bk.unsqueeze(-3), before[..., None])  # [..., n, C, K]
    a_off = q_off @ k_off.transpose(-1, -2)  # [..., n, Cs, C]
    eye = torch.eye(n, dtype=q.dtype, device=q.device)
    a_diag = torch.einsum("...Iij,IJ->...IiJj", a_diag, eye).flatten(-2)  # [..., n, Cs, C]
    return (a_off + a_diag).flatten(-3, -2)


def _intra_apply(A, v, bv, Cs):
    r"""``o_im = \sum_{j<=i} A_ij v_jm exp(bv_im - bv_jm)``; ``A: [..., C, C]``, ``v, bv: [..., C, V]``."""
    if bv is None:
        return A @ v
    if _factorisable(bv):  # mild gates: e^{bv_i - bv_j} = e^{bv_i - r} e^{r - bv_j}, r the first row
        ref = bv[..., :1, :]
        return (A @ (v * (ref - bv).exp())) * (bv - ref).exp()
    C = A.shape[-1]
    n = C // Cs
    before, causal = _index_masks(C, Cs, A.device)
    As = A.unflatten(-2, (n, Cs))  # [..., n, Cs, C]
    vs, bvs = v.unflatten(-2, (n, Cs)), bv.unflatten(-2, (n, Cs))
    a_diag = As.unflatten(-1, (n, Cs)).diagonal(dim1=-4, dim2=-2).movedim(-1, -3)  # [..., n, Cs, Cs]
    dd = bvs.unsqueeze(-2) - bvs.unsqueeze(-3)  # [..., n, Cs_i, Cs_j, V]
    o = (a_diag.unsqueeze(-1) * vs.unsqueeze(-3) * _masked_exp(dd, causal[..., None])).sum(-2)
    if n > 1:  # keys in earlier sub-chunks, through the reference point r_I
        ref = bvs[..., :, :1, :]
        v_off = v.unsqueeze(-3) * _masked_exp(ref - bv.unsqueeze(-3), before[..., None])  # [..., n, C, V]
        o = o + (As @ v_off) * (bvs - ref).exp()
    return o.flatten(-3, -2)


def _chunk_cumsum(g: torch.Tensor) -> torch.Tensor:
    """Inclusive cumulative log-gate inside each chunk, ``b_i = sum_{j <= i} g_j`` (dim -2).

    A separate function so that the chapter can plant the classic off-by-one here (an exclusive
    sum, ``j < i``) and watch the exactness check fail."""
    return g.cumsum(-2)


def gla_chunked(q, k, v, gk, gv, scale, h0, chunk_size=64):
    """Chunked GLA on ``[B, H, T, D]`` tensors (see the module docstring). Differentiable."""
    B, H, T, K = q.shape
    V = v.shape[-1]
    C = min(chunk_size, 1 << (T - 1).bit_length())  # a short sequence needs no longer chunk
    Cs = min(C, SUB_CHUNK)
    NT = -(-T // C)
    pad = NT * C - T

    def chunks(x):
        # zero padding is harmless: q = k = v = 0 adds nothing, and g = 0 means "no decay"
        return None if x is None else F.pad(x, (0, 0, 0, pad)).unflatten(2, (NT, C))

    q, k, v, gk, gv = (chunks(x) for x in (q, k, v, gk, gv))  # [B, H, NT, C, D]
    q = q * scale
    bk = None if gk is None else _chunk_cumsum(gk)
    bv = None if gv is None else _chunk_cumsum(gv)

    o = _intra_apply(_intra_scores(q, k, bk, Cs), v, bv, Cs)

    # what each chunk adds to the state, and how much it decays the incoming state
    k_end = k if bk is None else k * (bk[..., -1:, :] - bk).exp()
    v_end = v if bv is None else v * (bv[..., -1:, :] - bv).exp()
    dS = k_end.transpose(-1, -2) @ v_end  # [B, H, NT, K, V]
    S = q.new_zeros(B, H, K, V) if h0 is None else h0
    entering = []
    for c in range(NT):  # only NT small steps run sequentially
        entering.append(S)
        if bk is not None:
            S = S * bk[:, :, c, -1, :, None].exp()
        if bv is not None:
            S = S * bv[:, :, c, -1, None, :].exp()
        S = S + dS[:, :, c]
    entering = torch.stack(entering, dim=2)  # [B, H, NT, K, V]
    q_in = q if bk is None else q * bk.exp()
    inter = q_in @ entering
    if bv is not None:
        inter = inter * bv.exp()
    o = (o + inter).flatten(2, 3)[:, :, :T]
    return o, S


# ----------------------------------------------------------------------------------------------
# dispatch
# ----------------------------------------------------------------------------------------------
def _forward_only(impl: str, *tensors) -> None:
    if torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in tensors):
        raise NotImplementedError(
            f"impl={impl!r} is forward-only; use impl='torch' (or 'reference') for gradients"
        )


def gla_dispatch(q, k, v, gk, gv, scale, h0, chunk_size, impl):
    """Run one GLA form on prepared ``[B, H, T, D]`` tensors (used by GSA as well)."""
    if impl == "reference":
        return gla_recurrent(q, k, v, gk, gv, scale, h0)
    if impl == "torch":
        return gla_chunked(q, k, v, gk, gv, scale, h0, chunk_size)
    check_triton_target("q", q)
    _forward_only(impl, q, k, v, gk, gv, h0)
    from ._gla_triton import gla_fwd_triton  # lazy: triton is imported only when asked for

    return gla_fwd_triton(q, k, v, gk, gv, scale, h0)


def chunk_gla(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    g: torch.Tensor,
    scale: float | None = None,
    initial_state: torch.Tensor | None = None,
    output_final_state: bool = False,
    chunk_size: int = 64,
    impl: str = "torch",
):
    """GLA with the forget gate ``g`` (log space, ``<= 0``) on the key dimension, as ``fla.ops.gla.chunk_gla``.

    Args:
        q, k: ``[B, T, H, K]``; v: ``[B, T, H, V]``; g: ``[B, T, H, K]``.
        scale: multiplies ``q``; ``None`` means ``K ** -0.5``.
        initial_state: ``[B, H, K, V]`` or None.
        output_final_state: also return ``S_T`` (``[B, H, K, V]``, float32 or float64).
        chunk_size: a power of two (``impl="torch"``; the Triton kernel uses 16).
        impl: ``"reference"`` (recurrence), ``"torch"`` (chunked) or ``"triton"`` (forward only).

    Returns:
        ``(o [B, T, H, V], final_state or None)``; ``o`` has the dtype of ``q``.
    """
    check_impl(impl, IMPLS)
    check_power_of_two("chunk_size", chunk_size)
    check_tensor("g", g, ndim=4)
    in_dtype = q.dtype
    q_, k_, v_, g_, _, scale, h0 = _prepare(q, k, v, g, None, scale, initial_state, ("q", "k", "v", "g", "gv"))
    o, S = gla_dispatch(q_, k_, v_, g_, None, scale, h0, chunk_size, impl)
    return _finish(o, S, in_dtype, output_final_state)


def fused_recurrent_gla(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    gk: torch.Tensor | None = None,
    gv: torch.Tensor | None = None,
    scale: float | None = None,
    initial_state: torch.Tensor | None = None,
    output_final_state: bool = False,
    impl: str = "reference",
):
    """GLA with optional gates on the key (``gk: [B,T,H,K]``) and value (``gv: [B,T,H,V]``) side,
    as ``fla.ops.gla.fused_recurrent_gla``. The default ``impl="reference"`` is the recurrence itself;
    ``"torch"`` and ``"triton"`` compute the same thing chunk-wise. Returns ``(o, final_state or None)``.
    """
    check_impl(impl, IMPLS)
    in_dtype = q.dtype
    q_, k_, v_, gk_, gv_, scale, h0 = _prepare(q, k, v, gk, gv, scale, initial_state)
    o, S = gla_dispatch(q_, k_, v_, gk_, gv_, scale, h0, 64, impl)
    return _finish(o, S, in_dtype, output_final_state)
