r"""The "inverted" forecaster skeleton shared by iTransformer and SOFTS: each *channel's whole
look-back* is one token.

``x [B, L, C]`` -> RevIN -> series embedding :math:`h_c = W_e x_{:,c} + b` (a Linear ``L -> d`` on
each channel) -> ``n_blocks`` encoder layers -> LayerNorm -> Linear ``d -> H`` per channel -> undo
RevIN -> ``[B, H, C]``.

An encoder layer mixes channels with a pluggable ``mixer`` (``[B, C, d] -> [B, C, d]``) and then
transforms each token with a position-wise feed-forward network (the 1x1 convolutions of the
official code are Linear layers on the last axis):

.. math:: h \leftarrow \mathrm{LN}(h + \mathrm{Drop}(\mathrm{mixer}(h))),\qquad
          h \leftarrow \mathrm{LN}(h + \mathrm{Drop}(W_2\,\mathrm{Drop}(\mathrm{GELU}(W_1 h)))).

The mixer is STAR for SOFTS, multi-head self-attention over channel tokens for iTransformer, and a
per-token MLP (no cross-channel path at all) for the channel-independent baseline.
"""
from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from reprobook.timeseries.revin import RevIN

__all__ = ["EncoderLayer", "InvertedForecaster", "TokenMLP"]


class TokenMLP(nn.Module):
    """``Linear(d, d) -> GELU -> Linear(d, d)`` on each channel token alone: a mixer with no
    cross-channel path (the channel-independent control)."""

    def __init__(self, d_model: int):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(d_model, d_model), nn.Linear(d_model, d_model)

    def forward(self, h):
        return self.fc2(nn.functional.gelu(self.fc1(h)))


class EncoderLayer(nn.Module):
    def __init__(self, mixer: nn.Module, d_model: int, d_ff: int, dropout: float = 0.1):
        super().__init__()
        self.mixer = mixer
        self.ff1, self.ff2 = nn.Linear(d_model, d_ff), nn.Linear(d_ff, d_model)
        self.norm1, self.norm2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.drop = nn.Dropout(dropout)

    def forward(self, h):
        h = self.norm1(h + self.drop(self.mixer(h)))
        y = self.drop(self.ff2(self.drop(nn.functional.gelu(self.ff1(h)))))
        return self.norm2(h + y)


class InvertedForecaster(nn.Module):
    """``forward(x [B, L, C]) -> [B, H, C]``; ``make_mixer(d_model)`` builds each layer's mixer."""

    def __init__(self, lookback: int, horizon: int, make_mixer: Callable[[int], nn.Module], *,
                 d_model: int = 128, d_ff: int = 128, n_blocks: int = 2, dropout: float = 0.1,
                 revin: bool = True):
        super().__init__()
        for n, v in (("lookback", lookback), ("horizon", horizon), ("d_model", d_model),
                     ("d_ff", d_ff), ("n_blocks", n_blocks)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{n} must be a positive int, got {v!r}")
        self.lookback, self.horizon = lookback, horizon
        self.embed = nn.Linear(lookback, d_model)
        self.drop = nn.Dropout(dropout)
        self.layers = nn.ModuleList(EncoderLayer(make_mixer(d_model), d_model, d_ff, dropout)
                                    for _ in range(n_blocks))
        self.norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, horizon)
        self.revin = RevIN() if revin else None

    def tokens(self, x):
        """Channel tokens ``[B, C, d]`` after the encoder (before the head)."""
        if x.ndim != 3 or x.shape[1] != self.lookback:
            raise ValueError(f"expected input [batch, {self.lookback}, channels], got {tuple(x.shape)}")
        if self.revin is not None:
            x = self.revin.norm(x)
        h = self.drop(self.embed(x.transpose(1, 2)))
        for layer in self.layers:
            h = layer(h)
        return self.norm(h)

    def forward(self, x):
        y = self.head(self.tokens(x)).transpose(1, 2)
        return self.revin.denorm(y) if self.revin is not None else y
