r"""Gated token mixers for :class:`~reprobook.models.linear_lm.LinearLM`: GLA, GSA and ABC.

Importing this module registers three mixers (``LinearLM(..., mixer="gla" | "gsa" | "abc")``).
All three reuse :class:`~reprobook.models.linear_lm.QKVMixer`'s projections (q, k, v through a
short causal convolution, per-head RMSNorm on the output, output projection), so they differ only
in their sequence operator and its gate/slot projection:

* ``"gla"`` (gated linear attention): per-channel forget gate on the key side,
  ``g = logsigmoid(W_2 W_1 x + b) / tau`` (low-rank ``W_1 W_2`` of rank ``gate_rank``, ``tau = 16``),
  state ``S_t = diag(e^{g_t}) S_{t-1} + k_t v_t^T``, ``o_t = S_t^T q_t / sqrt(dk)``
  (:func:`reprobook.kernels.gla.chunk_gla`). State: ``dk * dv`` numbers per head.
* ``"gsa"`` (gated slot attention): ``M = n_slots`` slots with forget gates
  ``g = logsigmoid(W_f x) / tau`` (``tau = 8``) and writes ``s = 1 - e^{g}``; ``q, k = SiLU(.)``;
  two GLA passes joined by a softmax over slots, scale 1
  (:func:`reprobook.kernels.gsa.chunk_gsa`). State: ``dk * M + M * dv`` per head.
* ``"abc"`` (attention with bounded-memory control): the same layer without gates, ``s = W_s x``
  turned into running-softmax writes (``g=None`` in ``chunk_gsa``). Same state size as GSA.

These follow the defaults of flash-linear-attention's layers (gate normalisers, feature maps,
scale, GSA's ``RMSNorm(SiLU(o))`` read-out); the one difference is that GLA here has no output
gate, so that the three share :class:`QKVMixer`'s output path and the comparison isolates the
sequence operator. :func:`recurrent_state_size` gives the per-layer state size for accounting.
"""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from ..kernels.gla import chunk_gla
from ..kernels.gsa import chunk_gsa
from .linear_lm import QKVMixer, SoftmaxAttentionMixer, register_mixer

__all__ = ["GLAMixer", "GSAMixer", "ABCMixer", "recurrent_state_size"]


def _positive_int(name, x):
    if isinstance(x, bool) or not isinstance(x, int) or x < 1:
        raise ValueError(f"{name} must be a positive int, got {x!r}")
    return x


def _positive_float(name, x):
    if isinstance(x, bool) or not isinstance(x, (int, float)) or not x > 0:
        raise ValueError(f"{name} must be a positive number, got {x!r}")
    return float(x)


@register_mixer("gla")
class GLAMixer(QKVMixer):
    """Gated linear attention token mixer (options: ``gate_normalizer=16``, ``gate_rank=16``,
    ``chunk_size=64``, ``impl="torch"``, plus :class:`QKVMixer`'s ``head_dim``/``v_head_dim``)."""

    qk_feature = "none"
    use_beta = False

    def __init__(self, d_model, n_heads=1, gate_normalizer=16.0, gate_rank=16, chunk_size=64,
                 impl="torch", **options):
        super().__init__(d_model, n_heads, **options)
        self.gate_normalizer = _positive_float("gate_normalizer", gate_normalizer)
        rank = _positive_int("gate_rank", gate_rank)
        self.chunk_size, self.impl = chunk_size, impl
        self.gk_proj = nn.Sequential(nn.Linear(d_model, rank, bias=False),
                                     nn.Linear(rank, n_heads * self.dk, bias=True))

    def mix(self, q, k, v, beta, x):
        B, T = x.shape[:2]
        gk = F.logsigmoid(self.gk_proj(x)).view(B, T, self.n_heads, self.dk) / self.gate_normalizer
        o, _ = chunk_gla(q, k, v, gk, chunk_size=self.chunk_size, impl=self.impl)
        return o

    def state_size(self) -> int:
        return self.n_heads * self.dk * self.dv


@register_mixer("gsa")
class GSAMixer(QKVMixer):
    """Gated slot attention token mixer (options: ``n_slots=32``, ``gate_normalizer=8``,
    ``chunk_size=64``, ``impl="torch"``, ``scale=1.0``, ``gate_bias=None``).

    ``gate_bias=b`` gives the gate projection a bias initialised to ``b`` (trained with the rest),
    so the forget gates start near ``alpha = exp(logsigmoid(b) / tau)``: ``b = 0`` is about 0.92
    at ``tau = 8`` (the default, no bias), ``b = 5`` about 0.999 (slots that barely forget at
    first, as in the T2R initialisation). ABC has no gates, so it refuses ``gate_bias``.
    """

    qk_feature = "none"  # SiLU is applied in mix (fla's "swish" feature map)
    use_beta = False
    gated = True

    def __init__(self, d_model, n_heads=1, n_slots=32, gate_normalizer=8.0, chunk_size=64,
                 impl="torch", scale=1.0, gate_bias=None, **options):
        super().__init__(d_model, n_heads, **options)
        self.n_slots = _positive_int("n_slots", n_slots)
        self.gate_normalizer = _positive_float("gate_normalizer", gate_normalizer)
        self.chunk_size, self.impl, self.scale = chunk_size, impl, scale
        if gate_bias is not None:
            if not self.gated:
                raise ValueError("gate_bias is for GSA's forget gates; ABC has none")
            if isinstance(gate_bias, bool) or not isinstance(gate_bias, (int, float)) \
                    or not torch.isfinite(torch.tensor(float(gate_bias))):
                raise ValueError(f"gate_bias must be a finite number or None, got {gate_bias!r}")
        # GSA: forget-gate logits; ABC: raw slot scores
        self.f_proj = nn.Linear(d_model, n_heads * self.n_slots, bias=gate_bias is not None)
        if gate_bias is not None:
            nn.init.constant_(self.f_proj.bias, float(gate_bias))

    def mix(self, q, k, v, beta, x):
        B, T = x.shape[:2]
        f = self.f_proj(x).view(B, T, self.n_heads, self.n_slots)
        if self.gated:
            g = F.logsigmoid(f) / self.gate_normalizer
            s = 1 - g.exp()
        else:
            g, s = None, f
        o, _ = chunk_gsa(F.silu(q), F.silu(k), v, s, g, scale=self.scale, chunk_size=self.chunk_size,
                         impl=self.impl)
        return F.silu(o)  # fla's GSA layer: RMSNorm(SiLU(o)) before the output projection

    def state_size(self) -> int:
        return self.n_heads * self.n_slots * (self.dk + self.dv)


@register_mixer("abc")
class ABCMixer(GSAMixer):
    """ABC: :class:`GSAMixer` without forget gates (slot writes normalised by a running softmax)."""

    gated = False


def recurrent_state_size(mixer: nn.Module, seq_len: int | None = None) -> int:
    """Numbers a mixer keeps between tokens at inference (per layer, per sequence).

    Recurrent mixers report their own ``state_size()``; other :class:`QKVMixer` mixers keep a
    ``dk x dv`` matrix per head; softmax attention keeps its KV cache, ``seq_len * (dk + dv)`` per
    head (``seq_len`` is then required).
    """
    if hasattr(mixer, "state_size"):
        return int(mixer.state_size())
    if isinstance(mixer, SoftmaxAttentionMixer):
        if seq_len is None:
            raise ValueError("seq_len is required for softmax attention's KV cache")
        return mixer.n_heads * seq_len * (mixer.dk + mixer.dv)
    if isinstance(mixer, QKVMixer):
        return mixer.n_heads * mixer.dk * mixer.dv
    raise TypeError(f"unknown mixer type {type(mixer).__name__}")
