r"""2-D selective scan (VMamba's SS2D) on :func:`reprobook.kernels.selective_scan.selective_scan`.

A Mamba scan is 1-D and causal.  To mix an image ``[B, C, H, W]`` globally, the feature map is
unrolled into :math:`K` sequences of length :math:`L = HW` (:func:`cross_scan`):

* ``k = 0``: row-major (raster), ``k = 1``: column-major,
* ``k = 2, 3``: the same two orders reversed,

each scanned by its own selective SSM
:math:`h_t = e^{\Delta_t A} h_{t-1} + \Delta_t B_t u_t,\; y_t = C_t h_t + D u_t` with input-dependent
:math:`\Delta_t, B_t, C_t`, and the :math:`K` outputs are put back on the grid and summed
(:func:`cross_merge`).  With :math:`K = 4` every pixel sees every other pixel through at least one
scan, at cost linear in :math:`HW`; ``directions=2`` keeps the raster order and its reverse (a
bidirectional scan, as in Vision Mamba), ``directions=1`` the raster order alone (causal).

The block (:class:`SS2D`), channels-first ``[B, d_model, H, W] -> [B, d_model, H, W]``::

    (u, z) = W_in x ;  u = SiLU(depthwise 3x3 conv(u))
    y = cross_merge(scan_k(cross_scan(u)))          # K selective scans, d_state states each
    out = W_out(LayerNorm(y) * SiLU(z))

The :math:`K` scans run as one call: directions are folded into the channel axis, and
:math:`B_t, C_t` are grouped per direction.  :meth:`SS2D.scan_parameters` returns the
input-dependent parameters, for methods that read or perturb them.
"""
from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from ..kernels.selective_scan import selective_scan

__all__ = ["DIRECTIONS", "cross_scan", "cross_merge", "SS2D"]

DIRECTIONS = (1, 2, 4)


def _check_directions(directions: int) -> None:
    if directions not in DIRECTIONS:
        raise ValueError(f"directions must be one of {DIRECTIONS}, got {directions!r}")


def cross_scan(x: torch.Tensor, directions: int = 4) -> torch.Tensor:
    """Unroll ``[B, C, H, W]`` into ``[B, K, C, H*W]`` sequences (module docstring, ``K = directions``)."""
    _check_directions(directions)
    if x.dim() != 4:
        raise ValueError(f"cross_scan expects [B, C, H, W], got shape {tuple(x.shape)}")
    rows = x.flatten(2)
    if directions == 1:
        return rows[:, None]
    if directions == 2:
        return torch.stack([rows, rows.flip(-1)], 1)
    cols = x.transpose(2, 3).flatten(2)
    return torch.stack([rows, cols, rows.flip(-1), cols.flip(-1)], 1)


def cross_merge(y: torch.Tensor, H: int, W: int) -> torch.Tensor:
    """Inverse of :func:`cross_scan` summed over directions: ``[B, K, C, H*W] -> [B, C, H, W]``."""
    if y.dim() != 4 or y.shape[-1] != H * W:
        raise ValueError(f"cross_merge expects [B, K, C, {H * W}], got shape {tuple(y.shape)}")
    K = y.shape[1]
    _check_directions(K)
    Bsz, _, C, _ = y.shape
    out = y[:, 0]
    if K >= 2:
        rev = y[:, 1] if K == 2 else y[:, 2]
        out = out + rev.flip(-1)
    if K == 4:
        cols = y[:, 1] + y[:, 3].flip(-1)
        out = out + cols.view(Bsz, C, W, H).transpose(2, 3).reshape(Bsz, C, H * W)
    return out.view(Bsz, C, H, W)


class SS2D(nn.Module):
    """VMamba's 2-D selective-scan block (module docstring)."""

    def __init__(self, d_model: int, d_state: int = 8, expand: int = 2, directions: int = 4,
                 dt_rank: int | None = None, dt_min: float = 1e-3, dt_max: float = 1e-1,
                 impl: str = "chunked"):
        super().__init__()
        for name, v in (("d_model", d_model), ("d_state", d_state), ("expand", expand)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{name} must be a positive int, got {v!r}")
        _check_directions(directions)
        if impl not in ("reference", "chunked"):
            raise ValueError(f"impl must be 'reference' or 'chunked' (training needs gradients), got {impl!r}")
        self.d_model, self.d_state, self.K, self.impl = d_model, d_state, directions, impl
        self.d_inner = D = expand * d_model
        self.dt_rank = R = dt_rank or max(1, math.ceil(d_model / 16))
        K = directions
        self.in_proj = nn.Linear(d_model, 2 * D, bias=False)
        self.conv = nn.Conv2d(D, D, 3, padding=1, groups=D)
        # one projection per direction, as grouped weights [K, out, in]
        self.x_proj = nn.Parameter(torch.randn(K, R + 2 * d_state, D) * D ** -0.5)
        self.dt_proj = nn.Parameter(torch.empty(K, D, R).uniform_(-R ** -0.5, R ** -0.5))
        dt = torch.exp(torch.rand(K * D) * (math.log(dt_max) - math.log(dt_min)) + math.log(dt_min))
        self.dt_bias = nn.Parameter(dt + torch.log(-torch.expm1(-dt)))      # softplus^{-1}(dt)
        self.A_log = nn.Parameter(torch.log(torch.arange(1, d_state + 1, dtype=torch.float32)).repeat(K * D, 1))
        self.Ds = nn.Parameter(torch.ones(K * D))
        self.out_norm = nn.LayerNorm(D)
        self.out_proj = nn.Linear(D, d_model, bias=False)

    def _check(self, x: torch.Tensor) -> None:
        if x.dim() != 4 or x.shape[1] != self.d_model:
            raise ValueError(f"SS2D expects [B, {self.d_model}, H, W], got shape {tuple(x.shape)}")

    def _inner(self, x: torch.Tensor):
        u, z = self.in_proj(x.permute(0, 2, 3, 1)).chunk(2, dim=-1)          # [B, H, W, D]
        u = F.silu(self.conv(u.permute(0, 3, 1, 2)))                           # [B, D, H, W]
        return u, z

    def scan_parameters(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        """The scans' inputs for ``x``: ``u, delta [B, K, D, L]`` (delta after softplus and bias),
        ``B, C [B, K, N, L]``, ``A [K, D, N]``, and the gate ``z [B, H, W, D]``."""
        self._check(x)
        u, z = self._inner(x)
        seq = cross_scan(u, self.K)                                            # [B, K, D, L]
        proj = torch.einsum("bkdl,kcd->bkcl", seq, self.x_proj)
        dt, Bm, Cm = proj.split([self.dt_rank, self.d_state, self.d_state], dim=2)
        delta = torch.einsum("bkrl,kdr->bkdl", dt, self.dt_proj)
        delta = F.softplus(delta + self.dt_bias.view(1, self.K, -1, 1))
        A = -torch.exp(self.A_log).view(self.K, self.d_inner, self.d_state)
        return {"u": seq, "delta": delta, "B": Bm, "C": Cm, "A": A, "z": z}

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self._check(x)
        Bsz, _, H, W = x.shape
        p = self.scan_parameters(x)
        K, D, L = self.K, self.d_inner, H * W
        y = selective_scan(p["u"].reshape(Bsz, K * D, L), p["delta"].reshape(Bsz, K * D, L),
                           p["A"].reshape(K * D, self.d_state), p["B"], p["C"], self.Ds,
                           impl=self.impl)                                     # [B, K*D, L]
        y = cross_merge(y.view(Bsz, K, D, L), H, W).permute(0, 2, 3, 1)        # [B, H, W, D]
        y = self.out_norm(y) * F.silu(p["z"])
        return self.out_proj(y).permute(0, 3, 1, 2)
