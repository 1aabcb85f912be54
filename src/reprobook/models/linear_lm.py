r"""A small causal language model with a pluggable token mixer (for synthetic recall tasks).

Architecture (pre-norm, as in the DeltaNet/GLA papers' small models)::

    tokens -> embedding -> n_layers × [x + Mixer(RMSNorm(x));  x + SwiGLU(RMSNorm(x))] -> RMSNorm -> LM head

The token mixer is chosen by name from :data:`MIXERS`. A mixer is any ``nn.Module`` built as
``Mixer(d_model, n_heads, **mixer_options)`` whose ``forward(x: [B, T, d_model])`` returns
``[B, T, d_model]`` and is causal (position ``t`` sees positions ``≤ t`` only). Add one with::

    @register_mixer("gla")
    class GLAMixer(QKVMixer):              # or any nn.Module with that signature
        def mix(self, q, k, v, beta, x): ...   # q, k: [B, T, H, dk], v: [B, T, H, dv] -> [B, T, H, dv]

Built-in mixers (all sharing :class:`QKVMixer`'s projections, so sizes match exactly):

* ``"deltanet"``: ``q, k = L2norm(SiLU(conv(W x)))``, ``v = SiLU(conv(W_v x))``,
  ``beta = sigmoid(W_beta x)``, then the delta rule
  ``S_t = S_{t-1} + beta_t k_t (v_t - S_{t-1}^T k_t)^T``, ``o_t = S_t^T q_t / sqrt(dk)``
  (:func:`reprobook.kernels.delta_rule.chunk_delta_rule`), per-head RMSNorm, output projection.
* ``"linear"``: the same layer with the delta rule's correction term removed,
  ``S_t = S_{t-1} + beta_t k_t v_t^T`` (plain linear attention with a write strength): the same
  parameters, feature map and state size, so it isolates what the delta rule adds.
* ``"softmax"``: causal softmax attention on the same (conv'd) projections, no beta (a reference).
"""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from ..kernels.delta_rule import chunk_delta_rule, l2norm

__all__ = ["MIXERS", "register_mixer", "ShortConv", "QKVMixer", "DeltaNetMixer",
           "LinearAttentionMixer", "SoftmaxAttentionMixer", "SwiGLU", "Block", "LinearLM"]

#: Registry of token mixers by name; see the module docstring for the protocol.
MIXERS: dict[str, type[nn.Module]] = {}


def register_mixer(name: str):
    """Class decorator: make a mixer available to :class:`LinearLM` as ``mixer=name``."""
    def deco(cls):
        if name in MIXERS and MIXERS[name] is not cls:
            raise ValueError(f"a mixer named {name!r} is already registered ({MIXERS[name].__name__})")
        MIXERS[name] = cls
        return cls
    return deco


class ShortConv(nn.Module):
    """Depthwise causal 1-D convolution over time (``[B, T, D] -> [B, T, D]``), kernel ``size``:
    ``y_t = sum_{i < size} w_i * x_{t-i}`` per channel (zeros before the start).

    Written as ``size`` shifted multiply-adds: on a CPU this is much cheaper to differentiate
    than a grouped ``nn.Conv1d`` for the few taps used here.
    """

    def __init__(self, dim: int, size: int = 4):
        super().__init__()
        if size < 1:
            raise ValueError(f"conv_size must be >= 1, got {size}")
        self.size = size
        self.weight = nn.Parameter(torch.empty(size, dim))
        nn.init.uniform_(self.weight, -size ** -0.5, size ** -0.5)   # Conv1d's default range

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        T = x.shape[1]
        y = x * self.weight[0]
        for i in range(1, min(self.size, T)):
            y = y + F.pad(x[:, :T - i], (0, 0, i, 0)) * self.weight[i]
        return y


class QKVMixer(nn.Module):
    """Shared multi-head projections: q, k, v (each through a short causal conv), beta, output.

    Subclasses implement :meth:`mix`. Class attributes choose the feature map:
    ``qk_feature`` is ``"silu_l2"`` (SiLU then L2 norm, DeltaNet's choice) or ``"none"``;
    ``use_beta`` adds the ``beta = sigmoid(W_beta x)`` projection (one value per head and token);
    ``use_out_norm`` applies a per-head RMSNorm to the mixer's output before the projection.
    """

    qk_feature = "silu_l2"
    v_silu = True
    use_beta = True
    use_out_norm = True

    def __init__(self, d_model: int, n_heads: int = 1, head_dim: int | None = None,
                 v_head_dim: int | None = None, conv_size: int = 4, **options):
        super().__init__()
        if d_model < 1 or n_heads < 1:
            raise ValueError(f"d_model and n_heads must be positive, got {d_model}, {n_heads}")
        if head_dim is None and d_model % n_heads:
            raise ValueError(f"d_model={d_model} must be divisible by n_heads={n_heads} "
                             f"(or give head_dim)")
        self.n_heads = n_heads
        self.dk = head_dim or d_model // n_heads
        self.dv = v_head_dim or self.dk
        self.options = options
        H = n_heads
        self.q_proj = nn.Linear(d_model, H * self.dk, bias=False)
        self.k_proj = nn.Linear(d_model, H * self.dk, bias=False)
        self.v_proj = nn.Linear(d_model, H * self.dv, bias=False)
        self.q_conv, self.k_conv = ShortConv(H * self.dk, conv_size), ShortConv(H * self.dk, conv_size)
        self.v_conv = ShortConv(H * self.dv, conv_size)
        self.b_proj = nn.Linear(d_model, H, bias=False) if self.use_beta else None
        self.o_norm = nn.RMSNorm(self.dv, eps=1e-5) if self.use_out_norm else None
        self.o_proj = nn.Linear(H * self.dv, d_model, bias=False)

    def features(self, x: torch.Tensor):
        """``(q, k, v, beta)`` in ``[B, T, H, ·]`` layout (beta ``[B, T, H]`` or None)."""
        B, T, _ = x.shape
        H = self.n_heads
        q = self.q_conv(self.q_proj(x)).view(B, T, H, self.dk)
        k = self.k_conv(self.k_proj(x)).view(B, T, H, self.dk)
        v = self.v_conv(self.v_proj(x)).view(B, T, H, self.dv)
        if self.qk_feature == "silu_l2":
            q, k = l2norm(F.silu(q)), l2norm(F.silu(k))
        if self.v_silu:
            v = F.silu(v)
        beta = torch.sigmoid(self.b_proj(x)) if self.b_proj is not None else None
        return q, k, v, beta

    def mix(self, q, k, v, beta, x):
        """The sequence operator: ``[B, T, H, ·]`` in, ``[B, T, H, dv]`` out (causal)."""
        raise NotImplementedError

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v, beta = self.features(x)
        o = self.mix(q, k, v, beta, x)
        if self.o_norm is not None:
            o = self.o_norm(o)
        return self.o_proj(o.reshape(*x.shape[:2], -1))


@register_mixer("deltanet")
class DeltaNetMixer(QKVMixer):
    """DeltaNet: the delta rule, computed with the chunkwise WY/UT algorithm (``impl="torch"``)."""

    def mix(self, q, k, v, beta, x):
        o, _ = chunk_delta_rule(q, k, v, beta, chunk_size=self.options.get("chunk_size", 64),
                                impl=self.options.get("impl", "torch"))
        return o


def linear_attention(q, k, v, beta, scale: float) -> torch.Tensor:
    r"""Causal linear attention with write strengths, in its parallel (masked) form.

    ``o_t = sum_{s <= t} scale (q_t . k_s) beta_s v_s``, i.e. the state ``S_t = S_{t-1} +
    beta_t k_t v_t^T`` read out as ``S_t^T (scale q_t)``. ``[B, T, H, ·]`` layout; exact, and
    quadratic in T, which is fine for the short sequences this model is used on.
    """
    T = q.shape[1]
    scores = torch.einsum("bthd,bshd->bhts", q * scale, k)
    mask = torch.ones(T, T, dtype=torch.bool, device=q.device).tril()
    scores = scores.masked_fill(~mask, 0)
    return torch.einsum("bhts,bshd->bthd", scores, v * beta[..., None])


@register_mixer("linear")
class LinearAttentionMixer(QKVMixer):
    """Linear attention: DeltaNet's layer without the delta rule's ``- S^T k`` correction."""

    def mix(self, q, k, v, beta, x):
        return linear_attention(q, k, v, beta, self.dk ** -0.5)


@register_mixer("softmax")
class SoftmaxAttentionMixer(QKVMixer):
    """Causal softmax attention on the conv'd projections (a reference; no beta, no L2 norm)."""

    qk_feature = "none"
    v_silu = False
    use_beta = False
    use_out_norm = False

    def mix(self, q, k, v, beta, x):
        o = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                           is_causal=True)
        return o.transpose(1, 2)


class SwiGLU(nn.Module):
    """``W_down (SiLU(W_gate x) * W_up x)``."""

    def __init__(self, d_model: int, hidden: int):
        super().__init__()
        self.gate = nn.Linear(d_model, hidden, bias=False)
        self.up = nn.Linear(d_model, hidden, bias=False)
        self.down = nn.Linear(hidden, d_model, bias=False)

    def forward(self, x):
        return self.down(F.silu(self.gate(x)) * self.up(x))


class Block(nn.Module):
    """Pre-norm residual block: token mixer, then SwiGLU MLP."""

    def __init__(self, d_model: int, n_heads: int, mixer: str, mlp_ratio: float, mixer_options: dict):
        super().__init__()
        self.norm1 = nn.RMSNorm(d_model, eps=1e-5)
        self.mixer = MIXERS[mixer](d_model, n_heads, **mixer_options)
        self.norm2 = nn.RMSNorm(d_model, eps=1e-5)
        self.mlp = SwiGLU(d_model, max(1, int(round(mlp_ratio * d_model))))

    def forward(self, x):
        x = x + self.mixer(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class LinearLM(nn.Module):
    """Embedding, ``n_layers`` blocks with the chosen token mixer, final norm, LM head.

    Args:
        vocab_size: number of tokens.
        d_model: residual width. n_layers: blocks. n_heads: mixer heads.
        mixer: a key of :data:`MIXERS` (``"deltanet"``, ``"linear"``, ``"softmax"``, or one a
            chapter registered).
        mlp_ratio: SwiGLU hidden width / d_model (0 removes the MLP).
        mixer_options: keyword arguments for the mixer (e.g. ``conv_size``, ``chunk_size``).
        init_std: standard deviation of the normal init of embeddings and linear weights.
    """

    def __init__(self, vocab_size: int, d_model: int = 64, n_layers: int = 2, n_heads: int = 1,
                 mixer: str = "deltanet", mlp_ratio: float = 2.0, mixer_options: dict | None = None,
                 init_std: float = 0.02):
        super().__init__()
        for name, x in (("vocab_size", vocab_size), ("d_model", d_model), ("n_layers", n_layers),
                        ("n_heads", n_heads)):
            if isinstance(x, bool) or not isinstance(x, int) or x < 1:
                raise ValueError(f"{name} must be a positive int, got {x!r}")
        if mixer not in MIXERS:
            raise ValueError(f"mixer must be one of {sorted(MIXERS)}, got {mixer!r}")
        if mlp_ratio < 0:
            raise ValueError(f"mlp_ratio must be >= 0, got {mlp_ratio}")
        self.config = dict(vocab_size=vocab_size, d_model=d_model, n_layers=n_layers,
                           n_heads=n_heads, mixer=mixer, mlp_ratio=mlp_ratio,
                           mixer_options=dict(mixer_options or {}))
        self.embed = nn.Embedding(vocab_size, d_model)
        self.blocks = nn.ModuleList(Block(d_model, n_heads, mixer, mlp_ratio, dict(mixer_options or {}))
                                    for _ in range(n_layers))
        if mlp_ratio == 0:
            for b in self.blocks:
                b.mlp, b.norm2 = _Zero(), nn.Identity()
        self.norm = nn.RMSNorm(d_model, eps=1e-5)
        self.head = nn.Linear(d_model, vocab_size, bias=False)
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, std=init_std)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """``tokens: [B, T]`` int64 -> logits ``[B, T, vocab_size]``."""
        if tokens.dtype not in (torch.int64, torch.int32) or tokens.ndim != 2:
            raise ValueError(f"tokens must be a [B, T] integer tensor, got {tuple(tokens.shape)} "
                             f"{tokens.dtype}")
        x = self.embed(tokens)
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x))

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())


class _Zero(nn.Module):
    def forward(self, x):
        return torch.zeros_like(x)
