r"""SOFTS (Han, Chen, Ye & Zhan, NeurIPS 2024): the inverted forecaster of
:mod:`reprobook.models.inverted` with STAR (STar Aggregate-Redistribute) as the channel mixer.

**STAR** on channel tokens :math:`S \in \mathbb R^{B\times C\times d}`:

1. core candidates :math:`\hat C = W_2\,\mathrm{GELU}(W_1 S) \in \mathbb R^{B\times C\times d_c}`;
2. aggregation into one core :math:`o \in \mathbb R^{B\times d_c}`, per core dimension :math:`j`,
   with :math:`p_{cj} = \mathrm{softmax}_c(\hat C_{cj})` (softmax over *channels*):

   * training -- stochastic pooling: draw :math:`c_j \sim \mathrm{Categorical}(p_{\cdot j})` and
     take :math:`o_j = \hat C_{c_j j}`;
   * evaluation -- the expectation :math:`o_j = \sum_c p_{cj}\hat C_{cj}`;
3. redistribution and fusion: :math:`\mathrm{out}_c = W_4\,\mathrm{GELU}(W_3 [S_c; o])`.

Every step is per channel except the pooling, a sum over channels, so a layer costs
:math:`O(C\,d\,(d + d_c))` -- linear in the number of channels -- against attention's
:math:`O(C^2 d)`, and permuting the channels permutes the output (the pooling is symmetric).

``pool`` switches the aggregation for ablations: ``"stochastic"`` (the paper), ``"mean"`` (plain
average of the candidates), ``"self"`` (each channel's own candidate as its core: the same
parameters and computation with the cross-channel path cut), ``"first"`` (the core is channel 0's
candidate: cross-channel but not permutation-equivariant).
"""
from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from reprobook.models.inverted import InvertedForecaster, TokenMLP

__all__ = ["STAR", "SOFTS", "ci_mlp", "POOLS"]

POOLS = ("stochastic", "mean", "self", "first")


class STAR(nn.Module):
    def __init__(self, d_model: int, d_core: int, pool: str = "stochastic"):
        super().__init__()
        if pool not in POOLS:
            raise ValueError(f"unknown pool {pool!r}; choose from {POOLS}")
        self.pool = pool
        self.gen1, self.gen2 = nn.Linear(d_model, d_model), nn.Linear(d_model, d_core)
        self.gen3, self.gen4 = nn.Linear(d_model + d_core, d_model), nn.Linear(d_model, d_model)

    def candidates(self, s: torch.Tensor) -> torch.Tensor:
        """Core candidates ``[B, C, d_core]``."""
        return self.gen2(F.gelu(self.gen1(s)))

    def core(self, cand: torch.Tensor) -> torch.Tensor:
        """Aggregate candidates ``[B, C, d_c]`` into the core, broadcast to ``[B, C, d_c]``."""
        B, C, dc = cand.shape
        if self.pool == "self":
            return cand
        if self.pool == "first":
            return cand[:, :1].expand(B, C, dc)
        if self.pool == "mean":
            return cand.mean(1, keepdim=True).expand(B, C, dc)
        p = torch.softmax(cand, dim=1)                                   # over channels
        if self.training:
            # one channel per (batch, core dimension), drawn with probability p
            idx = torch.multinomial(p.transpose(1, 2).reshape(B * dc, C), 1).view(B, dc)
            o = cand.gather(1, idx.unsqueeze(1))                          # [B, 1, dc]
        else:
            o = (p * cand).sum(1, keepdim=True)
        return o.expand(B, C, dc)

    def forward(self, s: torch.Tensor) -> torch.Tensor:
        if s.ndim != 3:
            raise ValueError(f"STAR expects [batch, channels, d_model], got {tuple(s.shape)}")
        o = self.core(self.candidates(s))
        return self.gen4(F.gelu(self.gen3(torch.cat([s, o], dim=-1))))


def SOFTS(lookback: int, horizon: int, *, d_model: int = 128, d_core: int = 64, d_ff: int = 128,
          n_blocks: int = 2, dropout: float = 0.1, pool: str = "stochastic",
          revin: bool = True) -> InvertedForecaster:
    """SOFTS: RevIN, series embedding, ``n_blocks`` STAR encoder layers, linear head."""
    if pool not in POOLS:
        raise ValueError(f"unknown pool {pool!r}; choose from {POOLS}")
    return InvertedForecaster(lookback, horizon, lambda d: STAR(d, d_core, pool), d_model=d_model,
                              d_ff=d_ff, n_blocks=n_blocks, dropout=dropout, revin=revin)


def ci_mlp(lookback: int, horizon: int, *, d_model: int = 128, d_ff: int = 128, n_blocks: int = 2,
           dropout: float = 0.1, revin: bool = True) -> InvertedForecaster:
    """SOFTS with STAR replaced by a per-channel MLP: channel-independent, same skeleton."""
    return InvertedForecaster(lookback, horizon, TokenMLP, d_model=d_model, d_ff=d_ff,
                              n_blocks=n_blocks, dropout=dropout, revin=revin)
