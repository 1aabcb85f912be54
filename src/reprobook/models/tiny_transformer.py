r"""A small decoder-only transformer with pluggable attention and feed-forward blocks.

Pre-norm, as in GPT-2 and its successors::

    tokens -> embedding (+ learned positions) -> n_layers x [x + Attn(Norm(x)); x + FFN(Norm(x))]
           -> Norm -> LM head

* **Attention** is chosen by name: ``"softmax"`` is causal multi-head softmax attention
  (:class:`CausalSelfAttention`, PyTorch's fused ``scaled_dot_product_attention``), with rotary
  position embeddings when ``pos="rotary"``; any token mixer of
  :data:`reprobook.models.linear_lm.MIXERS` (``"deltanet"``, ``"linear"``, ...) also works, with
  learned or no positions.
* **Positions**: ``"learned"`` (an embedding per position, added to the token embedding),
  ``"rotary"`` (RoPE: queries and keys rotated pairwise by angle :math:`t\,\theta_i`,
  :math:`\theta_i = 10000^{-2i/d_h}`, so attention scores depend on relative offsets only) or
  ``"none"``.
* **Feed-forward** blocks come from :data:`reprobook.models.ffn.FFNS` by name, with options:
  ``"mlp"`` (dense), ``"nested"`` (MatFormer), ``"moe"`` (top-k SMoE), ``"mh-moe"`` (multi-head
  MoE). ``ffn`` and ``ffn_options`` may also be lists, one entry per layer (MoE in some layers only,
  or a Mix'n'Match model with a different width per layer).

Auxiliary losses of the FFNs (a mixture of experts' load-balancing loss) are summed by
:meth:`TinyTransformer.aux_loss` after a forward. For nested FFNs, :meth:`TinyTransformer.set_ffn_width`
selects the width of every layer (a MatFormer granularity or a Mix'n'Match choice), and
:func:`extract_submodel` builds the standalone dense model those widths describe.

Example::

    model = TinyTransformer(vocab_size=100, d_model=64, n_layers=2, n_heads=4, max_len=128,
                            pos="rotary", ffn="mh-moe",
                            ffn_options={"heads": 4, "n_experts": 16, "hidden": 64})
    logits = model(tokens)                # [B, T, vocab]
    loss = ce(logits, targets) + 0.01 * model.aux_loss()
"""
from __future__ import annotations

import copy

import torch
import torch.nn as nn
import torch.nn.functional as F

from . import moe as _moe  # noqa: F401  (registers "moe" and "mh-moe")
from .ffn import FFNS, MLP, NestedMLP
from .linear_lm import MIXERS

__all__ = ["ATTENTIONS", "POSITIONS", "rotary", "CausalSelfAttention", "Block", "TinyTransformer",
           "extract_submodel", "to_nested"]

POSITIONS = ("learned", "rotary", "none")


_ROTARY_CACHE: dict = {}


def _rotary_angles(T: int, dh: int, base: float, device, dtype):
    key = (T, dh, base, str(device), dtype)
    if key not in _ROTARY_CACHE:
        if len(_ROTARY_CACHE) > 64:
            _ROTARY_CACHE.clear()
        inv = base ** (-torch.arange(0, dh, 2, device=device, dtype=torch.float64) / dh)
        ang = torch.arange(T, device=device, dtype=torch.float64)[:, None] * inv   # [T, dh/2]
        _ROTARY_CACHE[key] = (ang.cos().to(dtype), ang.sin().to(dtype))
    return _ROTARY_CACHE[key]


def rotary(x: torch.Tensor, base: float = 10000.0) -> torch.Tensor:
    r"""Rotary position embedding of ``x: [B, H, T, d_h]`` (``d_h`` even): feature pairs
    :math:`(x_{2i}, x_{2i+1})` at position ``t`` rotated by the angle :math:`t\,\theta_i`,
    :math:`\theta_i = \text{base}^{-2i/d_h}` (angles computed in float64, cached per shape)."""
    T, dh = x.shape[-2], x.shape[-1]
    if dh % 2:
        raise ValueError(f"rotary needs an even head dim, got {dh}")
    cos, sin = _rotary_angles(T, dh, float(base), x.device, x.dtype)
    x1, x2 = x[..., 0::2], x[..., 1::2]
    out = torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1)
    return out.flatten(-2)


class CausalSelfAttention(nn.Module):
    """Causal multi-head softmax attention: ``qkv`` projection, optional rotary, fused SDPA,
    output projection (no biases)."""

    def __init__(self, d_model: int, n_heads: int = 4, rotary: bool = False):
        super().__init__()
        if d_model % n_heads:
            raise ValueError(f"d_model={d_model} must be divisible by n_heads={n_heads}")
        self.n_heads, self.head_dim, self.use_rotary = n_heads, d_model // n_heads, rotary
        if rotary and self.head_dim % 2:
            raise ValueError(f"rotary positions need an even head dim, got {self.head_dim}")
        self.qkv = nn.Linear(d_model, 3 * d_model, bias=False)
        self.proj = nn.Linear(d_model, d_model, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, D = x.shape
        q, k, v = self.qkv(x).view(B, T, 3, self.n_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        if self.use_rotary:
            q, k = rotary(q), rotary(k)
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(o.transpose(1, 2).reshape(B, T, D))


#: Attention built into this module, by name (linear_lm's MIXERS are accepted as well).
ATTENTIONS = {"softmax": CausalSelfAttention}


class Block(nn.Module):
    """Pre-norm residual block: attention, then the feed-forward block."""

    def __init__(self, d_model: int, n_heads: int, attention: str, attention_options: dict,
                 pos: str, ffn: str, ffn_options: dict, norm: str):
        super().__init__()
        Norm = {"rms": nn.RMSNorm, "layer": nn.LayerNorm}[norm]
        self.norm1 = Norm(d_model, eps=1e-5)
        if attention in ATTENTIONS:
            self.attn = ATTENTIONS[attention](d_model, n_heads, rotary=(pos == "rotary"),
                                              **attention_options)
        else:
            self.attn = MIXERS[attention](d_model, n_heads, **attention_options)
        self.norm2 = Norm(d_model, eps=1e-5)
        self.ffn = FFNS[ffn](d_model, **ffn_options)

    def forward(self, x):
        x = x + self.attn(self.norm1(x))
        return x + self.ffn(self.norm2(x))


def _per_layer(name, value, n_layers, kind):
    if isinstance(value, (list, tuple)):
        if len(value) != n_layers:
            raise ValueError(f"{name} has {len(value)} entries for {n_layers} layers")
        return [v if v is not None else kind() for v in value]
    return [copy.deepcopy(value) if value is not None else kind() for _ in range(n_layers)]


class TinyTransformer(nn.Module):
    """Decoder-only transformer (see the module docstring).

    Args:
        vocab_size: number of tokens. d_model: residual width. n_layers: blocks.
        n_heads: attention heads. max_len: longest sequence (size of learned positions).
        pos: ``"learned"``, ``"rotary"`` or ``"none"``.
        attention: ``"softmax"`` or a key of ``linear_lm.MIXERS``; ``attention_options`` its kwargs.
        ffn: a key of ``FFNS`` or one per layer; ``ffn_options``: its kwargs (a dict, or one per
            layer). Default: ``"mlp"`` with ``hidden = 4 d_model``.
        norm: ``"rms"`` or ``"layer"``. tie_embeddings: share the embedding and LM head.
        init_std: normal init of embeddings and attention/head weights (FFNs init themselves
            as their modules do; dense FFNs also get this std).
    """

    def __init__(self, vocab_size: int, d_model: int = 64, n_layers: int = 2, n_heads: int = 4,
                 max_len: int = 256, pos: str = "learned", attention: str = "softmax",
                 attention_options: dict | None = None, ffn="mlp", ffn_options=None,
                 norm: str = "rms", tie_embeddings: bool = False, init_std: float = 0.02):
        super().__init__()
        for name, x in (("vocab_size", vocab_size), ("d_model", d_model), ("n_layers", n_layers),
                        ("n_heads", n_heads), ("max_len", max_len)):
            if isinstance(x, bool) or not isinstance(x, int) or x < 1:
                raise ValueError(f"{name} must be a positive int, got {x!r}")
        if pos not in POSITIONS:
            raise ValueError(f"pos must be one of {POSITIONS}, got {pos!r}")
        if attention not in ATTENTIONS and attention not in MIXERS:
            raise ValueError(f"attention must be one of {sorted(ATTENTIONS) + sorted(MIXERS)}, "
                             f"got {attention!r}")
        if pos == "rotary" and attention not in ATTENTIONS:
            raise ValueError(f"rotary positions are built into 'softmax' attention only, not "
                             f"{attention!r}; use pos='learned' or 'none'")
        if norm not in ("rms", "layer"):
            raise ValueError(f"norm must be 'rms' or 'layer', got {norm!r}")
        ffns = _per_layer("ffn", ffn, n_layers, lambda: "mlp")
        unknown = [f for f in ffns if f not in FFNS]
        if unknown:
            raise ValueError(f"unknown ffn {unknown[0]!r}; known: {sorted(FFNS)}")
        opts = _per_layer("ffn_options", ffn_options, n_layers, dict)
        for f, o in zip(ffns, opts):
            if not isinstance(o, dict):
                raise ValueError(f"ffn_options must be dicts, got {o!r}")
            if f in ("mlp", "nested"):
                o.setdefault("hidden", 4 * d_model)
        self.config = dict(vocab_size=vocab_size, d_model=d_model, n_layers=n_layers,
                           n_heads=n_heads, max_len=max_len, pos=pos, attention=attention,
                           attention_options=dict(attention_options or {}), ffn=ffns,
                           ffn_options=copy.deepcopy(opts), norm=norm,
                           tie_embeddings=tie_embeddings, init_std=init_std)
        self.embed = nn.Embedding(vocab_size, d_model)
        self.pos_embed = nn.Embedding(max_len, d_model) if pos == "learned" else None
        self.blocks = nn.ModuleList(
            Block(d_model, n_heads, attention, dict(attention_options or {}), pos, f, o, norm)
            for f, o in zip(ffns, opts))
        Norm = {"rms": nn.RMSNorm, "layer": nn.LayerNorm}[norm]
        self.norm = Norm(d_model, eps=1e-5)
        self.head = nn.Linear(d_model, vocab_size, bias=False)
        for m in [self.embed, self.pos_embed, self.head, *[b.attn for b in self.blocks],
                  *[b.ffn for b in self.blocks if isinstance(b.ffn, (MLP, NestedMLP))]]:
            if m is None:
                continue
            for sub in m.modules():
                if isinstance(sub, (nn.Linear, nn.Embedding)):
                    nn.init.normal_(sub.weight, std=init_std)
                    if getattr(sub, "bias", None) is not None:
                        nn.init.zeros_(sub.bias)
        if tie_embeddings:
            self.head.weight = self.embed.weight

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """``tokens: [B, T]`` int64 -> logits ``[B, T, vocab_size]``."""
        if tokens.ndim != 2 or tokens.dtype not in (torch.int64, torch.int32):
            raise ValueError(f"tokens must be a [B, T] integer tensor, got {tuple(tokens.shape)} "
                             f"{tokens.dtype}")
        T = tokens.shape[1]
        if T > self.config["max_len"]:
            raise ValueError(f"sequence length {T} exceeds max_len={self.config['max_len']}")
        x = self.embed(tokens)
        if self.pos_embed is not None:
            x = x + self.pos_embed(torch.arange(T, device=tokens.device))
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x))

    @property
    def ffns(self) -> list[nn.Module]:
        return [b.ffn for b in self.blocks]

    def aux_loss(self) -> torch.Tensor:
        """Sum of the FFNs' auxiliary losses from the last forward (zero if there are none)."""
        terms = [f.aux_loss for f in self.ffns if getattr(f, "aux_loss", None) is not None]
        if not terms:
            return torch.zeros((), device=self.head.weight.device)
        return torch.stack(terms).sum()

    def set_ffn_width(self, widths) -> None:
        """Width of every nested FFN: one int for all layers, or one per layer (Mix'n'Match)."""
        nested = self.ffns
        if not all(isinstance(f, NestedMLP) for f in nested):
            raise ValueError("set_ffn_width needs nested FFNs (ffn='nested') in every layer")
        ws = list(widths) if isinstance(widths, (list, tuple)) else [widths] * len(nested)
        if len(ws) != len(nested):
            raise ValueError(f"{len(ws)} widths for {len(nested)} layers")
        for f, w in zip(nested, ws):
            f.width = f.check_width(int(w) if not isinstance(w, bool) else w)

    def ffn_widths(self) -> list[int]:
        return [f.width for f in self.ffns if isinstance(f, NestedMLP)]

    def num_parameters(self, widths=None) -> int:
        """Number of parameters; with ``widths``, those of the nested submodel of these widths
        (what :func:`extract_submodel` would hold)."""
        total = sum(p.numel() for p in self.parameters())
        if widths is None:
            return total
        ws = list(widths) if isinstance(widths, (list, tuple)) else [widths] * len(self.blocks)
        for f, w in zip(self.ffns, ws):
            if not isinstance(f, NestedMLP):
                raise ValueError("num_parameters(widths) needs nested FFNs")
            per_unit = 2 * f.fc_in.in_features + (f.fc_in.bias is not None)
            total -= (f.hidden - f.check_width(int(w))) * per_unit
        return total


def extract_submodel(model: TinyTransformer, widths) -> TinyTransformer:
    """The standalone dense model that ``model`` computes with nested FFN widths ``widths`` (an
    int, or one per layer): a fresh :class:`TinyTransformer` with ``"mlp"`` FFNs of those hidden
    widths and copies of the shared and sliced weights. Its outputs equal ``model``'s with
    ``set_ffn_width(widths)``; it can be deployed (or trained on) without the larger model."""
    if not isinstance(model, TinyTransformer):
        raise TypeError("extract_submodel needs a TinyTransformer")
    ffns = model.ffns
    if not all(isinstance(f, NestedMLP) for f in ffns):
        raise ValueError("extract_submodel needs nested FFNs (ffn='nested') in every layer")
    ws = list(widths) if isinstance(widths, (list, tuple)) else [widths] * len(ffns)
    if len(ws) != len(ffns):
        raise ValueError(f"{len(ws)} widths for {len(ffns)} layers")
    cfg = copy.deepcopy(model.config)
    cfg["ffn"] = "mlp"
    cfg["ffn_options"] = [{"hidden": f.check_width(int(w)), "activation": f.act_name,
                           "bias": f.fc_in.bias is not None} for f, w in zip(ffns, ws)]
    p = model.head.weight
    sub = TinyTransformer(**cfg).to(p.device, p.dtype)          # before loading: no rounding
    state = {k: v for k, v in model.state_dict().items() if ".ffn." not in k}
    for i, (f, w) in enumerate(zip(ffns, ws)):
        for k, v in f.sliced_state(int(w)).items():
            state[f"blocks.{i}.ffn.{k}"] = v
    sub.load_state_dict(state)
    return sub


def to_nested(model: TinyTransformer, widths: list[int] | None = None) -> TinyTransformer:
    """The same model with every dense ``"mlp"`` FFN viewed as a nested FFN (``"nested"``, same
    weights), so that it can be run at smaller widths or Mix'n'Matched like a MatFormer. Its
    outputs at full width equal ``model``'s. ``widths``: the nested FFNs' trained widths (default:
    hidden/8, /4, /2, /1). A model trained without the nested loss gives the baseline for what
    slicing an ordinary transformer does."""
    if not isinstance(model, TinyTransformer):
        raise TypeError("to_nested needs a TinyTransformer")
    if not all(isinstance(f, MLP) for f in model.ffns):
        raise ValueError("to_nested needs dense FFNs (ffn='mlp') in every layer")
    cfg = copy.deepcopy(model.config)
    cfg["ffn"] = "nested"
    cfg["ffn_options"] = [{"hidden": f.fc_in.out_features, "widths": widths, "activation": f.act_name,
                           "bias": f.fc_in.bias is not None} for f in model.ffns]
    p = model.head.weight
    nested = TinyTransformer(**cfg).to(p.device, p.dtype)
    nested.load_state_dict(model.state_dict())
    return nested
