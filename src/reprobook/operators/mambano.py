r"""MambaNO (Zheng et al., NeurIPS 2024): a 2-D selective scan for global integration and CNO's
alias-free convolutions for local integration, in one U-Net neural operator.

**SS2D** (:class:`SS2D`, after VMamba and the MambaNO code). On ``v: [B, c, n, n]`` with
``d = expand * c`` inner channels:

1. ``(x, z) = W_in v`` (pointwise, ``c -> 2d``); ``x <- AliasFree-LReLU(depthwise 3x3 conv(x))``.
2. ``x`` is flattened four ways into sequences of length ``L = n^2``: row-major, column-major, and
   both reversed. Each direction ``k`` has its own projections: ``(dt, B, C) = W_x^k x_t`` and
   ``Delta = softplus(W_dt^k dt + b^k)``, and its own ``A^k = -exp(A_log^k)`` and ``D^k``. The
   selective scan (:func:`reprobook.kernels.selective_scan.selective_scan`, all four directions in
   one call with ``B, C`` grouped by direction)

   .. math:: h_t = e^{\Delta_t A}\odot h_{t-1} + \Delta_t B_t x_t,\qquad y_t = C_t h_t + D x_t

   runs over every point of the grid, so each output point depends on every input point before it
   in that order: with four orders, on the whole grid (global integration), in ``O(L)`` time.
3. The four outputs are put back in row-major order and summed, layer-normed, gated by the
   alias-free ``SiLU(z)`` and projected back to ``c`` channels (``W_out``).

A :class:`VSSBlock` is ``v + SS2D(LayerNorm(v))``. Initialisation follows Mamba: ``A_log =
log(1..N)``, ``D = 1``, ``softplus(b)`` log-uniform in ``[1e-3, 1e-1]``.

**The operator** (:class:`OperatorUNet`), a two-level U-Net like MambaNO's (which has four):
lift (:class:`~reprobook.operators.cno.CNOBlock`, ``in -> c``) -> mixer at ``n`` -> alias-free
down-sampling to ``n/2`` (``c -> 2c``) -> mixer at ``n/2`` -> neck -> alias-free up-sampling to
``n`` (``2c -> c``) plus the skip path -> mixer at ``n`` -> projection (``CNOBlock`` then a 3x3
convolution to one channel). ``variant`` chooses what the mixers and the skip/neck paths are:

==========  ==================================  ===================================
variant      mixers (main path)                  skip and neck paths
==========  ==================================  ===================================
mambano      VSSBlock (global)                   CNO residual blocks (local)
ssm          VSSBlock (global)                   identity (global only)
cno          CNO residual blocks (local)         CNO residual blocks (local only)
==========  ==================================  ===================================

:func:`match_width` picks each variant's width so that parameter counts match a target.
:class:`TokenAttention` is a softmax self-attention layer over the same ``n^2`` tokens, the
``O(L^2)`` integration of transformer neural operators, for the timing comparison.
"""
from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from ..kernels.selective_scan import selective_scan
from .cno import AliasFree, CNOBlock, CNOResidualBlock

__all__ = ["VARIANTS", "SS2D", "VSSBlock", "OperatorUNet", "TokenAttention", "match_width",
           "count_parameters", "scan_orders", "merge_orders"]

VARIANTS = ("mambano", "ssm", "cno")


def _pos_int(name, v):
    if isinstance(v, bool) or not isinstance(v, int) or v < 1:
        raise ValueError(f"{name} must be a positive int, got {v!r}")
    return v


def scan_orders(x: torch.Tensor) -> torch.Tensor:
    """``[B, d, n, n] -> [B, 4, d, n*n]``: row-major, column-major, and the two reversed."""
    B, d, H, W = x.shape
    rows = x.reshape(B, d, H * W)
    cols = x.transpose(2, 3).reshape(B, d, H * W)
    hw = torch.stack([rows, cols], dim=1)
    return torch.cat([hw, hw.flip(-1)], dim=1)


def merge_orders(y: torch.Tensor, H: int, W: int) -> torch.Tensor:
    """Inverse of :func:`scan_orders`, summed: ``[B, 4, d, L] -> [B, d, H, W]``."""
    B, K, d, L = y.shape
    if K != 4 or L != H * W:
        raise ValueError(f"y must be [B, 4, d, {H * W}], got {tuple(y.shape)}")
    rows = y[:, 0] + y[:, 2].flip(-1)
    cols = y[:, 1] + y[:, 3].flip(-1)
    return rows.reshape(B, d, H, W) + cols.reshape(B, d, W, H).transpose(2, 3)


class SS2D(nn.Module):
    """The four-direction selective scan over a 2-D grid (module docstring)."""

    def __init__(self, d_model: int, d_state: int = 8, expand: int = 2, dt_rank: int | None = None,
                 d_conv: int = 3, dt_min: float = 1e-3, dt_max: float = 1e-1, impl: str = "chunked"):
        super().__init__()
        _pos_int("d_model", d_model), _pos_int("d_state", d_state), _pos_int("expand", expand)
        if impl not in ("reference", "chunked"):
            raise ValueError(f"impl must be 'reference' or 'chunked', got {impl!r}")
        self.impl = impl
        self.d_inner = d = expand * d_model
        self.d_state = N = d_state
        self.dt_rank = r = dt_rank or max(1, math.ceil(d_model / 16))
        K = 4
        self.in_proj = nn.Conv2d(d_model, 2 * d, 1, bias=False)
        self.conv = nn.Conv2d(d, d, d_conv, padding=d_conv // 2, groups=d)
        self.act = AliasFree("lrelu")
        self.gate = AliasFree("silu")
        self.x_proj = nn.Parameter(torch.empty(K, r + 2 * N, d).uniform_(-d ** -0.5, d ** -0.5))
        self.dt_proj = nn.Parameter(torch.empty(K, d, r).uniform_(-r ** -0.5, r ** -0.5))
        dt = torch.exp(torch.rand(K, d) * (math.log(dt_max) - math.log(dt_min)) + math.log(dt_min))
        self.dt_bias = nn.Parameter(dt + torch.log(-torch.expm1(-dt)))        # softplus^{-1}(dt)
        self.A_log = nn.Parameter(torch.log(torch.arange(1, N + 1, dtype=torch.float32)).repeat(K * d, 1))
        self.D = nn.Parameter(torch.ones(K * d))
        self.out_norm = nn.LayerNorm(d)
        self.out_proj = nn.Conv2d(d, d_model, 1, bias=False)

    def forward(self, v):
        if v.dim() != 4:
            raise ValueError(f"SS2D expects [B, C, H, W], got shape {tuple(v.shape)}")
        B, _, H, W = v.shape
        L, K, d, N, r = H * W, 4, self.d_inner, self.d_state, self.dt_rank
        x, z = self.in_proj(v).chunk(2, dim=1)
        x = self.act(self.conv(x))
        xs = scan_orders(x)                                             # [B, K, d, L]
        dbl = torch.einsum("bkdl,kcd->bkcl", xs, self.x_proj)
        dts, Bs, Cs = dbl.split([r, N, N], dim=2)
        dts = torch.einsum("bkrl,kdr->bkdl", dts, self.dt_proj)
        y = selective_scan(xs.reshape(B, K * d, L), dts.reshape(B, K * d, L),
                           -torch.exp(self.A_log), Bs.contiguous(), Cs.contiguous(), self.D,
                           delta_bias=self.dt_bias.reshape(-1), delta_softplus=True, impl=self.impl)
        y = merge_orders(y.reshape(B, K, d, L), H, W)                   # [B, d, H, W]
        y = self.out_norm(y.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)
        return self.out_proj(y * self.gate(z))


class VSSBlock(nn.Module):
    """``v + SS2D(LayerNorm(v))`` (LayerNorm over channels)."""

    def __init__(self, d_model: int, **kw):
        super().__init__()
        self.norm = nn.LayerNorm(d_model)
        self.ss2d = SS2D(d_model, **kw)

    def forward(self, v):
        return v + self.ss2d(self.norm(v.permute(0, 2, 3, 1)).permute(0, 3, 1, 2))


class OperatorUNet(nn.Module):
    """``[B, in_ch, n, n] -> [B, 1, n, n]``, ``n`` divisible by ``2^(levels-1)`` (module docstring).

    ``levels`` resolutions ``n, n/2, ...`` with widths ``c, 2c, ...``; the mixers sit on the levels
    ``mixer_from, ..., levels-1`` (one in the encoder, one in the decoder but none in the decoder at
    the deepest level, where the neck is), so that the costly scans can be kept off the finest grid."""

    def __init__(self, variant: str = "mambano", width: int = 16, in_ch: int = 3, d_state: int = 8,
                 expand: int = 2, levels: int = 2, mixer_from: int = 0, impl: str = "chunked"):
        super().__init__()
        if variant not in VARIANTS:
            raise ValueError(f"variant must be one of {VARIANTS}, got {variant!r}")
        _pos_int("width", width), _pos_int("in_ch", in_ch), _pos_int("levels", levels)
        if isinstance(mixer_from, bool) or not isinstance(mixer_from, int) or not 0 <= mixer_from < levels:
            raise ValueError(f"mixer_from must be an int in [0, levels), got {mixer_from!r}")
        self.variant, self.in_ch, self.levels, self.mixer_from = variant, in_ch, levels, mixer_from
        ch = [width * 2 ** l for l in range(levels)]

        def mixer(l):
            if l < mixer_from:
                return nn.Identity()
            if variant == "cno":
                return CNOResidualBlock(ch[l])
            return VSSBlock(ch[l], d_state=d_state, expand=expand, impl=impl)

        def local(l):
            return nn.Identity() if variant == "ssm" else CNOResidualBlock(ch[l])

        self.lift = CNOBlock(in_ch, ch[0])
        self.enc = nn.ModuleList(mixer(l) for l in range(levels))
        self.down = nn.ModuleList(CNOBlock(ch[l], ch[l + 1], scale=0.5, kernel=1, batch_norm=False)
                                  for l in range(levels - 1))
        self.neck = local(levels - 1)
        self.up = nn.ModuleList(CNOBlock(ch[l + 1], ch[l], scale=2.0, kernel=1, batch_norm=False)
                                for l in range(levels - 1))
        self.skip = nn.ModuleList(local(l) for l in range(levels - 1))
        self.dec = nn.ModuleList(mixer(l) for l in range(levels - 1))
        self.head = CNOBlock(ch[0], ch[0])
        self.out = nn.Conv2d(ch[0], 1, 3, padding=1)

    def forward(self, x):
        q = 2 ** (self.levels - 1)
        if x.dim() != 4 or x.shape[1] != self.in_ch or x.shape[-1] != x.shape[-2] or x.shape[-1] % (2 * q):
            raise ValueError(f"OperatorUNet expects [B, {self.in_ch}, n, n] with n divisible by "
                             f"{2 * q}, got {tuple(x.shape)}")
        v = self.lift(x)
        skips = []
        for l in range(self.levels):
            if l:
                v = self.down[l - 1](v)
            v = self.enc[l](v)
            skips.append(v)
        v = self.neck(v)
        for l in range(self.levels - 2, -1, -1):
            v = self.dec[l](self.up[l](v) + self.skip[l](skips[l]))
        return self.out(self.head(v))


class TokenAttention(nn.Module):
    """Pre-norm softmax self-attention over all ``n^2`` grid points (``heads`` heads), residual:
    the ``O(L^2)`` global integration of transformer neural operators."""

    def __init__(self, d_model: int, heads: int = 1):
        super().__init__()
        _pos_int("d_model", d_model), _pos_int("heads", heads)
        if d_model % heads:
            raise ValueError(f"heads={heads} must divide d_model={d_model}")
        self.heads = heads
        self.norm = nn.LayerNorm(d_model)
        self.qkv = nn.Linear(d_model, 3 * d_model, bias=False)
        self.proj = nn.Linear(d_model, d_model, bias=False)

    def forward(self, v):
        B, C, H, W = v.shape
        t = v.flatten(2).transpose(1, 2)                                  # [B, L, C]
        q, k, w = self.qkv(self.norm(t)).view(B, H * W, 3, self.heads, C // self.heads).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, w).transpose(1, 2).reshape(B, H * W, C)
        return v + self.proj(a).transpose(1, 2).reshape(B, C, H, W)


def count_parameters(model: nn.Module) -> int:
    """Trainable real parameters (a complex one counts twice)."""
    return sum(p.numel() * (2 if p.is_complex() else 1) for p in model.parameters() if p.requires_grad)


def match_width(build, target: int, widths=range(2, 257)) -> int:
    """The width ``w`` in ``widths`` whose ``build(w)`` has the parameter count closest to
    ``target`` (counts grow with ``w``, so the search stops once they pass the target)."""
    best, best_gap = None, None
    for w in widths:
        gap = count_parameters(build(w)) - target
        if best_gap is None or abs(gap) < abs(best_gap):
            best, best_gap = w, gap
        if gap > 0:
            break
    return best
