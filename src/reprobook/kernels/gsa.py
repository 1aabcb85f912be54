r"""Gated slot attention (GSA; Zhang et al., NeurIPS 2024) and its ungated special case ABC.

Layout and names follow flash-linear-attention (``fla.ops.gsa``): ``q, k: [B, T, H, K]``,
``v: [B, T, H, V]``, slot write weights ``s: [B, T, H, M]`` and slot forget log-gates
``g: [B, T, H, M]`` (``<= 0``); the state is a pair ``(Hk [B, H, K, M], Hv [B, H, M, V])``.

Per head, with ``M`` memory slots and ``a_t = exp(g_t)``:

.. math::

    H^k_t = H^k_{t-1}\operatorname{diag}(a_t) + k_t s_t^\top, \qquad
    p_t = \operatorname{softmax}\big((H^k_t)^\top \text{scale}\cdot q_t\big) \in \mathbb{R}^M,

    H^v_t = \operatorname{diag}(a_t) H^v_{t-1} + s_t v_t^\top, \qquad
    o_t = (H^v_t)^\top p_t .

So GSA is two gated-linear-attention passes joined by a softmax over the slots: pass 1 is GLA
with ``(q, k, v=s)`` and the gate on the *value* (slot) side; pass 2 is GLA with ``(q=p, k=s, v)``,
the gate on the *key* (slot) side and scale 1.  In the layers the paper uses, ``s = 1 - a``
(write what is forgotten), which this kernel leaves to the caller as fla does.

The recurrent state holds ``K*M + M*V`` numbers per head, against ``K*V`` for GLA.

**ABC** (attention with bounded-memory control) is the case ``g=None``: with
``z_t = logcumsumexp_{tau<=t}(s_tau)`` the gates become ``g_t = z_{t-1} - z_t`` (``g_1 = 0``) and the
writes ``exp(s_t - z_t)``, i.e. each slot holds a softmax(``s``)-weighted average of the past with
no learned forgetting.

``impl="reference"``: one loop over tokens that updates both memories at each step;
``impl="torch"``: the two passes with the chunked GLA of :mod:`reprobook.kernels.gla`;
``impl="triton"``: the same two passes with the Triton GLA kernel (forward only).
"""

from __future__ import annotations

import torch

from ._checks import check_impl, check_power_of_two, check_shape, check_tensor, check_triton_target
from .gla import IMPLS, _forward_only, _prepare, gla_chunked

__all__ = ["chunk_gsa", "fused_recurrent_gsa", "gsa_recurrent", "gsa_two_pass", "abc_gates"]


def abc_gates(s: torch.Tensor, dim: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The ABC case: from raw slot scores ``s`` return ``(normalised writes, log-gates)`` along ``dim``."""
    z = s.logcumsumexp(dim)
    z_prev = torch.cat((z.narrow(dim, 0, 1), z.narrow(dim, 0, z.shape[dim] - 1)), dim)
    return (s - z).exp(), z_prev - z


def gsa_recurrent(q, k, v, s, g, scale, hk0, hv0):
    """Reference: both memories updated token by token, on ``[B, H, T, D]`` tensors."""
    B, H, T, K = q.shape
    V, M = v.shape[-1], s.shape[-1]
    hk = q.new_zeros(B, H, K, M) if hk0 is None else hk0
    hv = q.new_zeros(B, H, M, V) if hv0 is None else hv0
    outs = []
    for t in range(T):
        a = g[:, :, t].exp()
        hk = hk * a[..., None, :] + k[:, :, t, :, None] * s[:, :, t, None, :]
        p = torch.einsum("bhk,bhkm->bhm", q[:, :, t] * scale, hk).softmax(-1)
        hv = hv * a[..., :, None] + s[:, :, t, :, None] * v[:, :, t, None, :]
        outs.append(torch.einsum("bhm,bhmv->bhv", p, hv))
    return torch.stack(outs, dim=2), (hk, hv)


def gsa_two_pass(q, k, v, s, g, scale, hk0, hv0, gla, softmax=True):
    """GSA as two GLA passes joined by a softmax over slots; ``gla`` is one GLA implementation with
    the signature ``gla(q, k, v, gk, gv, scale, h0) -> (o, S)`` on ``[B, H, T, D]`` tensors.
    ``softmax=False`` drops the softmax (a deliberately broken variant, used to show that the
    exactness check can fail)."""
    ok, hk = gla(q, k, s, None, g, scale, hk0)
    p = ok.softmax(-1) if softmax else ok
    o, hv = gla(p, s, v, g, None, 1.0, hv0)
    return o, (hk, hv)


def _gsa(q, k, v, s, g, scale, initial_state, output_final_state, chunk_size, impl):
    check_impl(impl, IMPLS)
    check_power_of_two("chunk_size", chunk_size)
    in_dtype = q.dtype
    q_, k_, v_, _, _, scale, _ = _prepare(q, k, v, None, None, scale, None)
    B, T, H, K = q.shape
    V = v.shape[-1]
    check_tensor("s", s, ndim=4)
    check_shape("s", s, (B, T, H, None))
    M = s.shape[-1]
    if g is not None:
        check_tensor("g", g, ndim=4)
        check_shape("g", g, (B, T, H, M))
    hk0 = hv0 = None
    if initial_state is not None:
        if not isinstance(initial_state, (tuple, list)) or len(initial_state) != 2:
            raise TypeError("initial_state must be a pair (hk [B,H,K,M], hv [B,H,M,V]) or None")
        hk0, hv0 = initial_state
        check_tensor("initial_state[0]", hk0, ndim=4)
        check_shape("initial_state[0]", hk0, (B, H, K, M))
        check_tensor("initial_state[1]", hv0, ndim=4)
        check_shape("initial_state[1]", hv0, (B, H, M, V))
        hk0, hv0 = hk0.to(q_.dtype), hv0.to(q_.dtype)
    s_ = s.transpose(1, 2).to(q_.dtype)
    if g is None:
        s_, g_ = abc_gates(s_, dim=2)
    else:
        g_ = g.transpose(1, 2).to(q_.dtype)

    if impl == "reference":
        o, state = gsa_recurrent(q_, k_, v_, s_, g_, scale, hk0, hv0)
    elif impl == "torch":
        def gla(a, b, c, gk, gv, sc, h0):
            return gla_chunked(a, b, c, gk, gv, sc, h0, chunk_size)

        o, state = gsa_two_pass(q_, k_, v_, s_, g_, scale, hk0, hv0, gla)
    else:
        check_triton_target("q", q_)
        _forward_only(impl, q, k, v, s, g, hk0, hv0)
        from ._gla_triton import gla_fwd_triton

        o, state = gsa_two_pass(q_, k_, v_, s_, g_, scale, hk0, hv0, gla_fwd_triton)
    return o.transpose(1, 2).to(in_dtype), (state if output_final_state else None)


def chunk_gsa(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    s: torch.Tensor,
    g: torch.Tensor | None = None,
    scale: float | None = None,
    initial_state: tuple[torch.Tensor, torch.Tensor] | None = None,
    output_final_state: bool = False,
    chunk_size: int = 64,
    impl: str = "torch",
):
    """Gated slot attention, as ``fla.ops.gsa.chunk_gsa`` (default: the chunked two-pass form).

    Args:
        q, k: ``[B, T, H, K]``; v: ``[B, T, H, V]``; s: ``[B, T, H, M]`` slot writes;
        g: ``[B, T, H, M]`` log forget gates (``<= 0``), or None for ABC.
        scale: multiplies ``q`` in pass 1; ``None`` means ``K ** -0.5``.
        initial_state: ``(hk [B, H, K, M], hv [B, H, M, V])`` or None.
        output_final_state: also return the final ``(hk, hv)`` (float32, or float64 for float64 input).
        chunk_size: power of two, used by ``impl="torch"``.
        impl: ``"reference"``, ``"torch"`` or ``"triton"`` (forward only).

    Returns:
        ``(o [B, T, H, V], (hk, hv) or None)``.
    """
    return _gsa(q, k, v, s, g, scale, initial_state, output_final_state, chunk_size, impl)


def fused_recurrent_gsa(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    s: torch.Tensor,
    g: torch.Tensor | None = None,
    scale: float | None = None,
    initial_state: tuple[torch.Tensor, torch.Tensor] | None = None,
    output_final_state: bool = False,
    impl: str = "reference",
):
    """Gated slot attention, as ``fla.ops.gsa.fused_recurrent_gsa``; the default is the token-by-token
    recurrence. Same arguments and returns as :func:`chunk_gsa`."""
    return _gsa(q, k, v, s, g, scale, initial_state, output_final_state, 64, impl)
