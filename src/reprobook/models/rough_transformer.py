r"""The Rough Transformer (Moreno-Pino, Arroyo, Waldon, Dong, Cartea; NeurIPS 2024) and the vanilla
transformer it is compared with: one encoder classifier over tokens, fed either signature tokens
or raw observations.

:class:`SequenceTransformer` maps tokens ``x [B, T, F]`` (with optional ``lengths [B]``: tokens
past a sample's length are padding) to class logits::

    standardise (fixed train statistics) -> Linear(F, d_model)
      -> n_layers x pre-norm encoder block [x + MHA(LN x); x + FFN(LN x)] (padding keys masked)
      -> LayerNorm -> mean over the real tokens -> Linear(d_model, n_classes)

Positions are times, not indices: with ``time_encoding=K`` the first feature of every token is read
as its time :math:`\tau` and :math:`[\sin(2\pi 2^j\tau), \cos(2\pi 2^j\tau)]_{j<K}`, projected
to ``d_model``, is added to the embedding (a continuous-time version of the sinusoidal position
encoding, which lets attention compare nearby times). For raw tokens :math:`\tau = t_i`; for
multi-view signature tokens the first feature is the time increment of the global view,
:math:`S(X)^{(t)}_{u_0,u_k} = u_k - u_0`, the window's end.

* **Vanilla** (:func:`vanilla_tokens`): one token per *observed* point, :math:`(t_i, x_i)`;
  attention costs :math:`O(n^2)` in the number of points.
* **Rough Transformer** (:class:`RoughTransformer`): one token per *window* of the continuous-time
  path, the multi-view signature :math:`[S(X)_{0,u_k}, S(X)_{u_{k-1},u_k}]` of
  :func:`reprobook.timeseries.signatures.multiview_signatures`; attention over :math:`W` tokens costs
  :math:`O(W^2)` whatever the number of points, and the signatures :math:`O(n\,d^N)` once.
"""
from __future__ import annotations

import numpy as np
import torch
from torch import nn

from reprobook.timeseries.signatures import multiview_signatures, observed_path

__all__ = ["SequenceTransformer", "RoughTransformer", "vanilla_tokens", "padding_mask"]


def padding_mask(lengths: torch.Tensor | None, T: int) -> torch.Tensor | None:
    """``[B, T]`` True where a token is padding (position >= length)."""
    if lengths is None:
        return None
    return torch.arange(T, device=lengths.device)[None, :] >= lengths[:, None]


class SequenceTransformer(nn.Module):
    """Encoder classifier over ``[B, T, in_features]`` tokens (see the module docstring)."""

    def __init__(self, in_features: int, n_classes: int, *, d_model: int = 32, n_heads: int = 4,
                 n_layers: int = 2, d_ff: int | None = None, dropout: float = 0.0,
                 time_encoding: int = 0):
        super().__init__()
        if in_features < 1 or n_classes < 2 or d_model % n_heads:
            raise ValueError(f"need in_features >= 1, n_classes >= 2 and n_heads | d_model, got "
                             f"{in_features}, {n_classes}, d_model={d_model}, n_heads={n_heads}")
        self.in_features = int(in_features)
        self.register_buffer("mean", torch.zeros(in_features))
        self.register_buffer("std", torch.ones(in_features))
        self.embed = nn.Linear(in_features, d_model)
        if time_encoding < 0:
            raise ValueError(f"time_encoding must be >= 0, got {time_encoding}")
        self.register_buffer("freqs", 2 * torch.pi * 2.0 ** torch.arange(int(time_encoding)))
        self.time_embed = nn.Linear(2 * int(time_encoding), d_model) if time_encoding else None
        layer = nn.TransformerEncoderLayer(d_model, n_heads, d_ff or 2 * d_model, dropout,
                                           batch_first=True, norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, n_layers, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, n_classes)

    @torch.no_grad()
    def fit_scaling(self, x: torch.Tensor, lengths: torch.Tensor | None = None, eps: float = 1e-6):
        """Fix the per-feature standardisation to the statistics of the real training tokens."""
        self._check(x, lengths)
        real = x.reshape(-1, x.shape[-1]) if lengths is None else x[~padding_mask(lengths, x.shape[1])]
        real = real.double()
        self.mean.copy_(real.mean(0))
        self.std.copy_(real.std(0).clamp_min(eps))
        return self

    def _check(self, x, lengths):
        if x.ndim != 3 or x.shape[-1] != self.in_features:
            raise ValueError(f"expected tokens [batch, tokens, {self.in_features}], got {tuple(x.shape)}")
        if lengths is not None and (lengths.shape != x.shape[:1] or int(lengths.min()) < 1):
            raise ValueError(f"lengths must be [batch] with every length >= 1, got {tuple(lengths.shape)}")

    def forward(self, x: torch.Tensor, lengths: torch.Tensor | None = None) -> torch.Tensor:
        self._check(x, lengths)
        pad = padding_mask(lengths, x.shape[1])
        h = self.embed(((x - self.mean) / self.std).to(self.embed.weight.dtype))
        if self.time_embed is not None:
            ang = x[..., :1].to(h.dtype) * self.freqs
            h = h + self.time_embed(torch.cat([ang.sin(), ang.cos()], -1))
        h = self.norm(self.encoder(h, src_key_padding_mask=pad))
        if pad is None:
            pooled = h.mean(1)
        else:
            keep = (~pad).to(h.dtype)[..., None]
            pooled = (h * keep).sum(1) / keep.sum(1)
        return self.head(pooled)


def vanilla_tokens(times, values, mask=None) -> tuple[torch.Tensor, torch.Tensor]:
    """Raw tokens ``(t_i, x_i)`` of the observed points ``[B, n_max, C+1]`` (float32) and ``lengths``."""
    pts, lengths = observed_path(times, values, mask)
    return pts.float(), lengths


class RoughTransformer(nn.Module):
    """Multi-view signature attention: :meth:`tokens` turns irregular samples into ``n_windows``
    signature tokens (computed once, outside autograd: they depend on the data only), and the
    encoder classifies them. ``view`` and ``windows`` select the ablations
    (``"global"``/``"local"``; ``"index"`` windows)."""

    def __init__(self, n_channels: int, n_classes: int, *, n_windows: int = 64, depth: int = 3,
                 view: str = "global+local", windows: str = "time", span=(0.0, 1.0), **encoder):
        super().__init__()
        from reprobook.timeseries.signatures import VIEWS, WINDOWS, signature_length
        if view not in VIEWS or windows not in WINDOWS:
            raise ValueError(f"view must be one of {VIEWS} and windows one of {WINDOWS}, "
                             f"got {view!r}, {windows!r}")
        self.n_windows, self.depth, self.view, self.windows = int(n_windows), int(depth), view, windows
        self.span = (float(span[0]), float(span[1]))
        per_view = signature_length(n_channels + 1, depth)
        self.in_features = per_view * (2 if view == "global+local" else 1)
        self.encoder = SequenceTransformer(self.in_features, n_classes, **encoder)

    def tokens(self, times, values, mask=None) -> torch.Tensor:
        """Signature tokens ``[B, n_windows, in_features]`` (float32) of irregular samples."""
        z = multiview_signatures(times, values, self.n_windows, self.depth, mask=mask, view=self.view,
                                 windows=self.windows, span=self.span)
        return z.float()

    def fit_scaling(self, tokens: torch.Tensor):
        self.encoder.fit_scaling(tokens)
        return self

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.encoder(tokens)
