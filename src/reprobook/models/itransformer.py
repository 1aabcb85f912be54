r"""iTransformer (Liu et al., ICLR 2024) at small scale: the inverted forecaster of
:mod:`reprobook.models.inverted` with multi-head self-attention across channel tokens as the mixer.

For tokens :math:`h \in \mathbb R^{B\times C\times d}` and ``n_heads`` heads of width
:math:`d_h = d/n_{heads}`:
:math:`\mathrm{head}_i = \mathrm{softmax}(Q_iK_i^\top/\sqrt{d_h})\,V_i` with
:math:`Q_i, K_i, V_i = hW^Q_i, hW^K_i, hW^V_i`, output :math:`W^O[\mathrm{head}_1;\dots]`.
The score and value products cost :math:`4BC^2d` FLOPs per layer: quadratic in the channels.
The products are explicit ``matmul`` calls so that any FLOP counter sees them.
"""
from __future__ import annotations

import math

import torch
from torch import nn

from reprobook.models.inverted import InvertedForecaster

__all__ = ["ChannelAttention", "itransformer"]


class ChannelAttention(nn.Module):
    def __init__(self, d_model: int, n_heads: int = 4, dropout: float = 0.1):
        super().__init__()
        if d_model % n_heads:
            raise ValueError(f"d_model={d_model} is not divisible by n_heads={n_heads}")
        self.h, self.dh = n_heads, d_model // n_heads
        self.q, self.k, self.v, self.o = (nn.Linear(d_model, d_model) for _ in range(4))
        self.drop = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.ndim != 3:
            raise ValueError(f"ChannelAttention expects [batch, channels, d_model], got {tuple(x.shape)}")
        B, C, _ = x.shape
        q, k, v = (f(x).view(B, C, self.h, self.dh).transpose(1, 2) for f in (self.q, self.k, self.v))
        a = self.drop(torch.softmax(torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.dh), dim=-1))
        return self.o(torch.matmul(a, v).transpose(1, 2).reshape(B, C, -1))


def itransformer(lookback: int, horizon: int, *, d_model: int = 128, d_ff: int = 128,
                 n_blocks: int = 2, n_heads: int = 4, dropout: float = 0.1,
                 revin: bool = True) -> InvertedForecaster:
    """iTransformer: RevIN, series embedding, ``n_blocks`` channel-attention layers, linear head."""
    return InvertedForecaster(lookback, horizon, lambda d: ChannelAttention(d, n_heads, dropout),
                              d_model=d_model, d_ff=d_ff, n_blocks=n_blocks, dropout=dropout,
                              revin=revin)
