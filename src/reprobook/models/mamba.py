r"""A small Mamba-style selective SSM language model (pure PyTorch, on :mod:`reprobook.kernels.selective_scan`).

One mixer layer, as in Mamba (Gu & Dao 2023), on ``x: [B, L, d_model]`` with ``d_inner = expand *
d_model``::

    (x_in, z) = W_in x                              # two [B, L, d_inner] streams
    x_in      = SiLU(causal depthwise conv(x_in))   # kernel d_conv
    (dt, B, C) = W_x x_in                           # dt: [.., dt_rank], B, C: [.., d_state]
    Delta     = softplus(W_dt dt + b_dt)            # [B, L, d_inner], > 0
    h_t       = a_t * h_{t-1} + Delta_t B_t x_t     # per channel, d_state states
    y_t       = C_t h_t + D x_t ;   out = W_out (y * SiLU(z))

with the gate

* ``gate="nonneg"`` (Mamba): ``a_t = exp(Delta_t A)``, ``A = -exp(A_log) < 0``, so ``a_t in (0, 1)``;
* ``gate="signed"`` (a later proposal, not Mamba and not the paper's model: Grazzi et al. 2024,
  "Unlocking state-tracking in linear RNNs through negative eigenvalues"):
  ``a_t = 2 exp(Delta_t A) - 1 in (-1, 1)``, the same parameters with the range doubled.

``selective=False`` removes the selectivity (the ablation of S4-like models): ``Delta``, ``B`` and
``C`` no longer depend on the input (learned per-channel constants), so every gate is constant in
time.  Initialisation follows Mamba: ``A_log = log(1..d_state)``, ``D = 1``, ``dt`` log-uniform in
``[1e-3, 1e-1]`` through the bias of ``W_dt``.

The language model: embedding -> ``n_layers`` x [x + Mixer(RMSNorm(x))] -> RMSNorm -> head (Mamba
blocks have no separate MLP).
"""
from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from ..kernels.selective_scan import linear_scan, selective_scan
from .linear_lm import ShortConv

__all__ = ["GATES", "MambaMixer", "MambaLM"]

GATES = ("nonneg", "signed")


class MambaMixer(nn.Module):
    """Mamba's selective SSM mixer (module docstring): ``[B, L, d_model] -> [B, L, d_model]``, causal."""

    def __init__(self, d_model: int, d_state: int = 8, expand: int = 2, d_conv: int = 4,
                 dt_rank: int | None = None, gate: str = "nonneg", selective: bool = True,
                 dt_min: float = 1e-3, dt_max: float = 1e-1, impl: str = "chunked"):
        super().__init__()
        for name, v in (("d_model", d_model), ("d_state", d_state), ("expand", expand), ("d_conv", d_conv)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{name} must be a positive int, got {v!r}")
        if gate not in GATES:
            raise ValueError(f"gate must be one of {GATES}, got {gate!r}")
        if impl not in ("reference", "chunked"):
            raise ValueError(f"impl must be 'reference' or 'chunked' (training needs gradients), got {impl!r}")
        self.gate, self.selective, self.impl = gate, bool(selective), impl
        self.d_inner = d_inner = expand * d_model
        self.d_state = d_state
        self.dt_rank = dt_rank = dt_rank or max(1, math.ceil(d_model / 16))
        self.in_proj = nn.Linear(d_model, 2 * d_inner, bias=False)
        self.conv = ShortConv(d_inner, d_conv)
        self.conv_bias = nn.Parameter(torch.zeros(d_inner))
        if self.selective:
            self.x_proj = nn.Linear(d_inner, dt_rank + 2 * d_state, bias=False)
            self.dt_proj = nn.Linear(dt_rank, d_inner, bias=False)
            nn.init.uniform_(self.dt_proj.weight, -dt_rank ** -0.5, dt_rank ** -0.5)
        else:
            self.B = nn.Parameter(torch.randn(d_inner, d_state) * d_state ** -0.5)
            self.C = nn.Parameter(torch.randn(d_inner, d_state) * d_state ** -0.5)
        dt = torch.exp(torch.rand(d_inner) * (math.log(dt_max) - math.log(dt_min)) + math.log(dt_min))
        self.dt_bias = nn.Parameter(dt + torch.log(-torch.expm1(-dt)))     # softplus^{-1}(dt)
        self.A_log = nn.Parameter(torch.log(torch.arange(1, d_state + 1, dtype=torch.float32)).repeat(d_inner, 1))
        self.D = nn.Parameter(torch.ones(d_inner))
        self.out_proj = nn.Linear(d_inner, d_model, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dim() != 3:
            raise ValueError(f"MambaMixer expects [B, L, d_model], got shape {tuple(x.shape)}")
        Bsz, L, _ = x.shape
        xin, z = self.in_proj(x).chunk(2, dim=-1)
        xin = F.silu(self.conv(xin) + self.conv_bias)
        A = -torch.exp(self.A_log)
        u = xin.transpose(1, 2)                                          # [B, D, L]
        if self.selective:
            dt, Bm, Cm = self.x_proj(xin).split([self.dt_rank, self.d_state, self.d_state], dim=-1)
            delta = self.dt_proj(dt).transpose(1, 2)                     # [B, D, L]
            Bm, Cm = Bm.transpose(1, 2), Cm.transpose(1, 2)              # [B, N, L]
        else:
            delta = torch.zeros_like(u)                                   # Delta = softplus(bias)
            Bm, Cm = self.B, self.C                                       # time-invariant [D, N]
        zt = z.transpose(1, 2)
        if self.gate == "nonneg":
            y = selective_scan(u, delta, A, Bm, Cm, self.D, zt, self.dt_bias, delta_softplus=True,
                               impl=self.impl)
        else:
            Delta = F.softplus(delta + self.dt_bias[:, None])[:, :, None, :]   # [B, D, 1, L]
            a = 2.0 * torch.exp(Delta * A[None, :, :, None]) - 1.0           # (-1, 1)
            Bx = Bm[:, None] if Bm.dim() == 3 else Bm[None, :, :, None]
            Cx = Cm[:, None] if Cm.dim() == 3 else Cm[None, :, :, None]
            h = linear_scan(a, Delta * Bx * u[:, :, None, :], impl=self.impl)  # [B, D, N, L]
            y = ((h * Cx).sum(2) + u * self.D[:, None]) * F.silu(zt)
        return self.out_proj(y.transpose(1, 2))


class MambaLM(nn.Module):
    """Token model: ``tokens [B, L] -> logits [B, L, vocab_size]`` (module docstring)."""

    def __init__(self, vocab_size: int, d_model: int = 32, n_layers: int = 2, d_state: int = 8,
                 expand: int = 2, d_conv: int = 4, gate: str = "nonneg", selective: bool = True,
                 impl: str = "chunked"):
        super().__init__()
        for name, v in (("vocab_size", vocab_size), ("n_layers", n_layers)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{name} must be a positive int, got {v!r}")
        self.embed = nn.Embedding(vocab_size, d_model)
        self.norms = nn.ModuleList(nn.RMSNorm(d_model, eps=1e-5) for _ in range(n_layers))
        self.mixers = nn.ModuleList(
            MambaMixer(d_model, d_state, expand, d_conv, gate=gate, selective=selective, impl=impl)
            for _ in range(n_layers))
        self.norm = nn.RMSNorm(d_model, eps=1e-5)
        self.head = nn.Linear(d_model, vocab_size, bias=False)
        self.vocab_size = vocab_size

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        if tokens.dim() != 2 or tokens.dtype not in (torch.int64, torch.int32):
            raise ValueError(f"tokens must be a [B, L] integer tensor, got {tuple(tokens.shape)} {tokens.dtype}")
        x = self.embed(tokens)
        for norm, mixer in zip(self.norms, self.mixers):
            x = x + mixer(norm(x))
        return self.head(self.norm(x))
