r"""The selective scan of Mamba (its S6 layer), in three forms.

Names, shapes and semantics follow ``mamba_ssm.ops.selective_scan_interface.selective_scan_fn``:
``u, delta: [B, D, L]``; ``A: [D, N]`` (real); ``B, C``: input-dependent ``[B, N, L]``, grouped
``[B, G, N, L]`` (channel ``d`` reads group ``d // (D / G)``) or time-invariant ``[D, N]``;
``D: [D]``; ``z: [B, D, L]``; ``delta_bias: [D]``.  For every batch row, channel ``d`` and state
index ``n``:

.. math::

    \Delta_t &= \operatorname{softplus}(\delta_t + b_\Delta) \text{ (or without the softplus)},\\
    h_t &= e^{\Delta_t A_{dn}}\, h_{t-1} + \Delta_t B_{t,n}\, u_t ,\qquad h_0 = 0,\\
    y_t &= \sum_n C_{t,n} h_t + D_d u_t, \qquad
    \text{out}_t = y_t \cdot \operatorname{silu}(z_t) \text{ when } z \text{ is given}.

The gate :math:`a_t = e^{\Delta_t A}` is the *transition* of the state; with ``A <= 0`` and
``Delta >= 0`` it lies in ``[0, 1]`` (Mamba's non-negative gates).  The input term
``Delta * B * u`` is Mamba's simplified (Euler) discretisation of ``B``, as in ``selective_scan_fn``.

**Chunked form** (``impl="chunked"``).  The recurrence is a first-order linear recurrence
``h_t = a_t h_{t-1} + b_t``, and pairs ``(a, b)`` compose associatively,
``(a_2, b_2) \circ (a_1, b_1) = (a_2 a_1,\, a_2 b_1 + b_2)``.  The sequence is cut into chunks of
``chunk_size`` steps; inside every chunk (all chunks at once) a Hillis-Steele doubling scan gives in
``log2(chunk_size)`` vectorised steps both the local state ``H_i`` (started from zero) and the
cumulative gate ``P_i = \prod_{k \le i} a_k``; the states entering the chunks come from the same
scan applied recursively to the chunks' end pairs, and ``h_i = H_i + P_i h_{\text{enter}}``.
Nothing is divided or exponentiated beyond the gates themselves, so it works for gates of any sign
(:func:`linear_scan` is exposed for that) and cannot overflow; products of small gates underflow
gracefully to 0.  Costs ``O(B D N L log C)`` work, all in tensor operations; differentiable, with a hand-written backward that is itself a
reverse scan (no graph of the doubling steps is kept).  When one time step holds many elements
(``>= SWEEP_MIN_STEP_NUMEL``: a training batch of a Mamba layer) one graph-free sequential sweep
replaces the doubling scan inside the same forward and backward: one pass over memory instead of
``log2 C`` passes.

``impl="reference"`` is the plain per-step loop (ground truth, float64-capable, differentiable);
``impl="triton"`` is a forward-only Triton kernel (one program per batch row and block of channels,
the ``[BD, N]`` state in registers, one step per loop iteration; ``TRITON_INTERPRET=1`` on CPU).

float64 inputs are computed in float64; every other float dtype in float32, and the output is cast
back to the dtype of ``u`` (the last state stays in the compute dtype).
"""

from __future__ import annotations

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

IMPLS = ("reference", "chunked", "triton")

__all__ = ["IMPLS", "selective_scan", "linear_scan"]


# ----------------------------------------------------------------------------------------------
# the generic first-order linear recurrence h_t = a_t h_{t-1} + b_t (time on the last dim)
# ----------------------------------------------------------------------------------------------
def _linear_scan_reference(a, b, h0):
    h = torch.zeros_like(b[..., 0]) if h0 is None else h0
    out = []
    for t in range(b.shape[-1]):
        h = a[..., t] * h + b[..., t]
        out.append(h)
    return torch.stack(out, dim=-1)


def _doubling_scan(a, b):
    """Inclusive scan along the last dim: returns ``(P, H)`` with ``P_i = prod_{k<=i} a_k`` and
    ``H_i = sum_{j<=i} (prod_{j<k<=i} a_k) b_j`` (Hillis-Steele: element ``i`` absorbs the pair
    ``s`` places back, ``s = 1, 2, 4, ...``)."""
    L = b.shape[-1]
    s = 1
    while s < L:
        # the first s elements have nothing s places back and stay as they are; the rest use the
        # old a: (a_i, b_i) o (a_{i-s}, b_{i-s})
        b = torch.cat([b[..., :s], b[..., s:] + a[..., s:] * b[..., :-s]], dim=-1)
        a = torch.cat([a[..., :s], a[..., s:] * a[..., :-s]], dim=-1)
        s *= 2
    return a, b


def _linear_scan_chunked(a, b, h0, chunk_size):
    if h0 is not None:  # fold the initial state into the first input: h_1 = a_1 h0 + b_1
        b = torch.cat([(b[..., :1] + a[..., :1] * h0[..., None]), b[..., 1:]], dim=-1)
    L = b.shape[-1]
    # chunks of at least 2, so that every level of the recursion below at least halves the length
    C = max(2, min(chunk_size, 1 << max(0, (L - 1).bit_length())))
    if L <= C:
        return _doubling_scan(a, b)[1]
    n = -(-L // C)
    pad = n * C - L
    a = F.pad(a, (0, pad), value=1.0).unflatten(-1, (n, C))   # padding: a = 1, b = 0 changes nothing
    b = F.pad(b, (0, pad), value=0.0).unflatten(-1, (n, C))
    P, H = _doubling_scan(a, b)                               # [..., n, C], every chunk at once
    # state at the end of each chunk, then shifted by one chunk: the state entering each chunk
    ends = _linear_scan_chunked(P[..., -1], H[..., -1], None, chunk_size)   # [..., n]
    enter = F.pad(ends[..., :-1], (1, 0), value=0.0)
    h = H + P * enter[..., None]
    return h.flatten(-2)[..., :L]


#: Per-step size (elements of one time slice) from which the graph-free sequential sweep replaces
#: the doubling scan: with many elements per step one pass over the data beats log2(C) passes, with
#: few the per-operation overhead of L small steps dominates.
SWEEP_MIN_STEP_NUMEL = 1024


def _linear_scan_sweep(a, b, h0):
    """Graph-free sequential sweep, time moved to the front so every step reads contiguous memory."""
    at, bt = a.movedim(-1, 0).contiguous(), b.movedim(-1, 0).contiguous()
    out = torch.empty_like(bt)
    cur = torch.zeros_like(bt[0]) if h0 is None else h0.expand_as(bt[0])
    for t in range(bt.shape[0]):
        cur = torch.addcmul(bt[t], at[t], cur)
        out[t] = cur
    return out.movedim(0, -1)


def _scan_nograd(a, b, h0, chunk_size):
    a, b = torch.broadcast_tensors(a, b)
    if b[..., 0].numel() >= SWEEP_MIN_STEP_NUMEL:
        return _linear_scan_sweep(a, b, h0)
    return _linear_scan_chunked(a, b, h0, chunk_size)


class _ChunkedScan(torch.autograd.Function):
    """The chunked scan with a hand-written backward, itself a reverse scan:
    with ``g_t = dL/dh_t + a_{t+1} g_{t+1}`` (total gradient reaching ``h_t``),
    ``dL/db_t = g_t``, ``dL/da_t = g_t h_{t-1}`` and ``dL/dh_0 = a_1 g_1``.  No graph of the
    ``log2(C)`` doubling steps is kept, which makes training several times cheaper."""

    @staticmethod
    def forward(ctx, a, b, h0, chunk_size):
        h = _scan_nograd(a, b, h0, chunk_size)
        ctx.save_for_backward(a, h, h0)
        ctx.chunk_size = chunk_size
        return h

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, gh):
        a, h, h0 = ctx.saved_tensors
        a_next = F.pad(a[..., 1:], (0, 1), value=0.0)        # a_{t+1}; nothing after the end
        g = _scan_nograd(a_next.flip(-1), gh.flip(-1), None, ctx.chunk_size).flip(-1)
        first = torch.zeros_like(h[..., :1]) if h0 is None else h0[..., None]
        h_prev = torch.cat([first, h[..., :-1]], dim=-1)
        dh0 = None if h0 is None else a[..., 0] * g[..., 0]
        return g * h_prev, g, dh0, None


def _scan_fast(a, b, h0, chunk_size):
    """The chunked scan, through :class:`_ChunkedScan` when a gradient is needed."""
    if torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in (a, b, h0)):
        a, b = torch.broadcast_tensors(a, b)
        return _ChunkedScan.apply(a.contiguous(), b.contiguous(), h0, chunk_size)
    return _scan_nograd(a, b, h0, chunk_size)


def linear_scan(a: torch.Tensor, b: torch.Tensor, initial_state: torch.Tensor | None = None,
                impl: str = "chunked", chunk_size: int = 64) -> torch.Tensor:
    r"""All states of ``h_t = a_t * h_{t-1} + b_t`` (elementwise; time on the last dim).

    ``a`` may have any sign (e.g. the signed gates ``a in [-1, 1]`` of later work on state
    tracking); ``a`` and ``b`` have the same shape ``[..., L]``, ``initial_state`` is ``[...]``
    (default 0). ``impl``: ``"reference"`` (loop) or ``"chunked"`` (doubling scan in chunks).
    Returns ``h: [..., L]`` (differentiable in both forms).
    """
    check_impl(impl, ("reference", "chunked"))
    check_power_of_two("chunk_size", chunk_size)
    check_tensor("a", a)
    check_tensor("b", b)
    if a.dim() < 1 or a.shape[-1] < 1:
        raise ValueError(f"a needs a time dim (last) of length >= 1, got shape {tuple(a.shape)}")
    check_shape("b", b, tuple(a.shape))
    if initial_state is not None:
        check_tensor("initial_state", initial_state)
        check_shape("initial_state", initial_state, tuple(a.shape[:-1]))
    check_same_device(a=a, b=b, initial_state=initial_state)
    if impl == "reference":
        return _linear_scan_reference(a, b, initial_state)
    return _scan_fast(a, b, initial_state, chunk_size)


# ----------------------------------------------------------------------------------------------
# input handling for the selective scan
# ----------------------------------------------------------------------------------------------
def _check_bc(name, x, Bsz, Dm, N, L):
    """``[D, N]`` (time-invariant), ``[B, N, L]`` or ``[B, G, N, L]`` with ``G`` dividing ``D``."""
    check_tensor(name, x)
    if x.dim() == 2:
        check_shape(name, x, (Dm, N))
    elif x.dim() == 3:
        check_shape(name, x, (Bsz, N, L))
    elif x.dim() == 4:
        check_shape(name, x, (Bsz, None, N, L))
        G = x.shape[1]
        if G < 1 or Dm % G:
            raise ValueError(f"{name} has {G} groups (dim 1), which must divide D = {Dm}")
    else:
        raise ValueError(f"{name} must be [D, N], [B, N, L] or [B, G, N, L] (D={Dm}, N={N}, L={L}, "
                         f"B={Bsz}), got shape {tuple(x.shape)}")


def _expand_bc(x, Dm):
    """``B`` or ``C`` as a tensor that broadcasts against ``[B, D, N, L]``."""
    if x.dim() == 2:                       # [D, N] -> [1, D, N, 1]
        return x[None, :, :, None]
    if x.dim() == 3:                       # [B, N, L] -> [B, 1, N, L]
        return x[:, None]
    G = x.shape[1]                         # [B, G, N, L] -> [B, D, N, L]
    return x.repeat_interleave(Dm // G, dim=1)


def _prepare(u, delta, A, B, C, D, z, delta_bias, delta_softplus):
    check_tensor("u", u, ndim=3)
    Bsz, Dm, L = u.shape
    if L < 1:
        raise ValueError(f"u must have at least one time step (dim 2), got shape {tuple(u.shape)}")
    check_tensor("delta", delta, ndim=3)
    check_shape("delta", delta, (Bsz, Dm, L))
    if isinstance(A, torch.Tensor) and A.is_complex():
        raise TypeError("A is complex; only real A (Mamba's S6) is implemented")
    check_tensor("A", A, ndim=2)
    check_shape("A", A, (Dm, None))
    N = A.shape[1]
    _check_bc("B", B, Bsz, Dm, N, L)
    _check_bc("C", C, Bsz, Dm, N, L)
    if D is not None:
        check_tensor("D", D, ndim=1)
        check_shape("D", D, (Dm,))
    if z is not None:
        check_tensor("z", z, ndim=3)
        check_shape("z", z, (Bsz, Dm, L))
    if delta_bias is not None:
        check_tensor("delta_bias", delta_bias, ndim=1)
        check_shape("delta_bias", delta_bias, (Dm,))
    check_same_device(u=u, delta=delta, A=A, B=B, C=C, D=D, z=z, delta_bias=delta_bias)
    cdt = compute_dtype(u.dtype)
    cast = (lambda x: None if x is None else x.to(cdt))
    u, delta, A, B, C, D, z, delta_bias = map(cast, (u, delta, A, B, C, D, z, delta_bias))
    if delta_bias is not None:
        delta = delta + delta_bias[:, None]
    if delta_softplus:
        delta = F.softplus(delta)
    return u, delta, A, B, C, D, z


def _finish(y, u, D, z, out_dtype):
    if D is not None:
        y = y + u * D[:, None]
    if z is not None:
        y = y * F.silu(z)
    return y.to(out_dtype)


# ----------------------------------------------------------------------------------------------
# the two torch forms
# ----------------------------------------------------------------------------------------------
def _scan_reference(u, delta, A, B, C):
    """Per-step loop, exactly the recurrence. Returns ``(y [B, D, L], h_L [B, D, N])``."""
    Bsz, Dm, L = u.shape
    Bx, Cx = _expand_bc(B, Dm), _expand_bc(C, Dm)
    h = u.new_zeros(Bsz, Dm, A.shape[1])
    ys = []
    for t in range(L):
        d = delta[:, :, t, None]                                   # [B, D, 1]
        bt = Bx[..., min(t, Bx.shape[-1] - 1)]                     # [B|1, D|1, N]
        ct = Cx[..., min(t, Cx.shape[-1] - 1)]
        h = torch.exp(d * A) * h + d * bt * u[:, :, t, None]
        ys.append((h * ct).sum(-1))
    return torch.stack(ys, dim=-1), h


def _scan_chunked(u, delta, A, B, C, chunk_size):
    """All states at once via :func:`_linear_scan_chunked`; ``[B, D, N, L]`` is materialised."""
    Dm = u.shape[1]
    dt = delta[:, :, None, :]                                      # [B, D, 1, L]
    a = torch.exp(dt * A[None, :, :, None])                        # [B, D, N, L]
    b = dt * _expand_bc(B, Dm) * u[:, :, None, :]
    h = _scan_fast(a, b, None, chunk_size)
    y = (h * _expand_bc(C, Dm)).sum(2)
    return y, h[..., -1]


def selective_scan(u: torch.Tensor, delta: torch.Tensor, A: torch.Tensor, B: torch.Tensor,
                   C: torch.Tensor, D: torch.Tensor | None = None, z: torch.Tensor | None = None,
                   delta_bias: torch.Tensor | None = None, delta_softplus: bool = False,
                   return_last_state: bool = False, impl: str = "chunked", chunk_size: int = 64):
    """Mamba's selective scan, as ``mamba_ssm``'s ``selective_scan_fn`` (see the module docstring).

    Args:
        u, delta: ``[B, D, L]``. A: ``[D, N]``, real (Mamba uses ``A = -exp(A_log) < 0``).
        B, C: ``[B, N, L]``, grouped ``[B, G, N, L]`` or time-invariant ``[D, N]``.
        D: ``[D]`` skip connection; z: ``[B, D, L]`` gate (output times ``silu(z)``);
        delta_bias: ``[D]`` added to ``delta`` before the optional softplus.
        return_last_state: also return ``h_L: [B, D, N]`` (compute dtype).
        impl: ``"reference"`` (loop), ``"chunked"`` (doubling scan in chunks; default) or
            ``"triton"`` (forward only).
        chunk_size: power of two, the chunk of the ``"chunked"`` form.

    Returns:
        ``out [B, D, L]`` in the dtype of ``u``, or ``(out, last_state)``.
    """
    check_impl(impl, IMPLS)
    check_power_of_two("chunk_size", chunk_size)
    if not isinstance(delta_softplus, bool):
        raise TypeError(f"delta_softplus must be a bool, got {delta_softplus!r}")
    out_dtype = u.dtype if isinstance(u, torch.Tensor) else None
    u_, delta_, A_, B_, C_, D_, z_ = _prepare(u, delta, A, B, C, D, z, delta_bias, delta_softplus)
    if impl == "reference":
        y, last = _scan_reference(u_, delta_, A_, B_, C_)
    elif impl == "chunked":
        y, last = _scan_chunked(u_, delta_, A_, B_, C_, chunk_size)
    else:
        check_triton_target("u", u)
        leaves = (u, delta, A, B, C, D, z, delta_bias)
        if torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in leaves):
            raise NotImplementedError("impl='triton' is forward-only; use impl='chunked' (or "
                                      "'reference') for gradients")
        from ._selective_scan_triton import selective_scan_fwd_triton  # lazy: only when asked for

        out, last = selective_scan_fwd_triton(u_, delta_, A_, B_, C_, D_, z_)
        out = out.to(out_dtype)
        return (out, last) if return_last_state else out
    out = _finish(y, u_, D_, z_, out_dtype)
    return (out, last) if return_last_state else out
