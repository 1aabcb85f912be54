r"""Triton forward kernel for the selective scan (imported lazily by ``selective_scan.py``).

One program owns one batch row and a block of ``BD`` channels, keeps the ``[BD, BN]`` state in
registers and walks the sequence one step at a time:
``h = exp(delta_t * A) * h + delta_t * B_t * u_t``, ``y_t = sum_n C_t h + D u_t``, times
``silu(z_t)`` when a gate is given.  ``delta`` arrives already biased and soft-plussed (the wrapper
does that elementwise in torch), ``B`` and ``C`` arrive as ``[B, G, N, L]`` (a time-invariant
``[D, N]`` is expanded to ``G = D`` by the wrapper), so a channel ``d`` reads group
``d // (D / G)``: an arithmetic offset, not an indirect load.  The kernel computes in the dtype of
its inputs (float32 or float64; the wrapper upcasts halves).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def _selective_scan_fwd_kernel(
    u, delta, A, Bm, Cm, Dv, z, out, last,
    Dm, N, L, G,
    BD: tl.constexpr, BN: tl.constexpr, USE_D: tl.constexpr, USE_Z: tl.constexpr,
):
    i_b = tl.program_id(0)
    i_d = tl.program_id(1)
    o_d = i_d * BD + tl.arange(0, BD)
    o_n = tl.arange(0, BN)
    m_d = o_d < Dm
    m_n = o_n < N
    m_dn = m_d[:, None] & m_n[None, :]
    b_A = tl.load(A + o_d[:, None] * N + o_n[None, :], mask=m_dn, other=0.0)
    if USE_D:
        b_D = tl.load(Dv + o_d, mask=m_d, other=0.0)
    grp = o_d // (Dm // G)                                     # the B/C group of each channel
    p_bc = ((i_b * G + grp[:, None]) * N + o_n[None, :]) * L    # + t gives (b, g, n, t)
    p_x = (i_b * Dm + o_d) * L                                  # + t gives (b, d, t)
    h = tl.zeros([BD, BN], dtype=b_A.dtype)
    for t in range(0, L):
        b_u = tl.load(u + p_x + t, mask=m_d, other=0.0)
        b_dt = tl.load(delta + p_x + t, mask=m_d, other=0.0)
        b_B = tl.load(Bm + p_bc + t, mask=m_dn, other=0.0)
        b_C = tl.load(Cm + p_bc + t, mask=m_dn, other=0.0)
        h = tl.exp(b_dt[:, None] * b_A) * h + (b_dt * b_u)[:, None] * b_B
        y = tl.sum(h * b_C, axis=1)
        if USE_D:
            y = y + b_D * b_u
        if USE_Z:
            b_z = tl.load(z + p_x + t, mask=m_d, other=0.0)
            y = y * (b_z / (1.0 + tl.exp(-b_z)))
        tl.store(out + p_x + t, y, mask=m_d)
    tl.store(last + (i_b * Dm + o_d[:, None]) * N + o_n[None, :], h, mask=m_dn)


def _grouped(x: torch.Tensor, Bsz: int, L: int) -> torch.Tensor:
    """``[D, N]`` / ``[B, N, L]`` / ``[B, G, N, L]`` -> contiguous ``[B, G, N, L]``."""
    if x.dim() == 2:
        return x[None, :, :, None].expand(Bsz, -1, -1, L).contiguous()
    if x.dim() == 3:
        return x[:, None].contiguous()
    return x.contiguous()


def selective_scan_fwd_triton(u, delta, A, B, C, D, z):
    """Forward selective scan on prepared tensors; returns ``(out [B, D, L], last [B, D, N])``."""
    Bsz, Dm, L = u.shape
    N = A.shape[1]
    Bg, Cg = _grouped(B, Bsz, L), _grouped(C, Bsz, L)
    if Bg.shape[1] != Cg.shape[1]:            # mixed layouts: give both one group per channel
        Bg = Bg.repeat_interleave(Dm // Bg.shape[1], dim=1)
        Cg = Cg.repeat_interleave(Dm // Cg.shape[1], dim=1)
    G = Bg.shape[1]
    u, delta, A = u.contiguous(), delta.contiguous(), A.contiguous()
    out = torch.empty_like(u)
    last = torch.empty(Bsz, Dm, N, dtype=u.dtype, device=u.device)
    BD = min(16, triton.next_power_of_2(Dm))
    BN = triton.next_power_of_2(N)
    dummy = u  # never read when the flag is off
    grid = (Bsz, triton.cdiv(Dm, BD))
    _selective_scan_fwd_kernel[grid](
        u, delta, A, Bg, Cg,
        D.contiguous() if D is not None else dummy,
        z.contiguous() if z is not None else dummy,
        out, last, Dm, N, L, G,
        BD=BD, BN=BN, USE_D=D is not None, USE_Z=z is not None,
    )
    return out, last
