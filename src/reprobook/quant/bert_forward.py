r"""A functional forward pass of a post-LN BERT encoder (MiniLM) with a quantisation point in front
of every linear layer.

The 36 linears of the 6-block all-MiniLM-L6-v2 are numbered in forward order,
``i = 6 k + r`` for block ``k`` and role ``r`` in (query, key, value, attention output, FFN in,
FFN out), as :func:`reprobook.models.minilm.linear_layers` lists them. Block ``k`` computes

.. math::

   Q,K,V = q_{i}(h)W^\top + b,\quad
   C = \operatorname{softmax}\!\Big(\frac{QK^\top}{\sqrt{d_h}} + M\Big)V,\quad
   a = \operatorname{LN}_1\big(q(C)W_O^\top + b_O + h\big),\\
   u = \operatorname{GELU}\big(q(a)W_I^\top + b_I\big),\quad
   h' = \operatorname{LN}_2\big(q(u)W_{\text{out}}^\top + b_{\text{out}} + a\big),

per head (12 heads of 32), with :math:`M` the padding mask and :math:`q_i` the caller's
quantiser of linear ``i``'s input (the identity by default). Writing it out, instead of hooking
``transformers``' modules, gives the search two things it needs: it can start at any block from a
cached hidden state and stop right after the last linear whose output it scores, and it does not
depend on the internals of one ``transformers`` version. A unit test checks it against
``BertModel``.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F

__all__ = ["ROLES", "BertWeights", "bert_weights", "embed", "run_blocks", "pool", "layer_of", "reaches"]

ROLES = ("query", "key", "value", "attn-out", "ffn-in", "ffn-out")


class _Stop(Exception):
    pass


@dataclass
class BertWeights:
    """The encoder's parameters as plain tensors: 36 weights/biases, two LayerNorms per block."""

    W: list
    b: list
    ln1: list
    ln2: list
    n_heads: int
    eps: float
    embeddings: torch.nn.Module

    @property
    def n_linears(self) -> int:
        return len(self.W)

    @property
    def n_blocks(self) -> int:
        return len(self.W) // 6

    def with_weights(self, W: Sequence[torch.Tensor]) -> "BertWeights":
        """The same encoder with the 36 weight matrices replaced (e.g. by quantised ones)."""
        if len(W) != len(self.W) or any(a.shape != b.shape for a, b in zip(W, self.W)):
            raise ValueError("with_weights needs one matrix of the original shape per linear layer")
        return BertWeights(list(W), self.b, self.ln1, self.ln2, self.n_heads, self.eps, self.embeddings)


def layer_of(i: int) -> int:
    """The encoder block of linear ``i``."""
    return int(i) // 6


def reaches(a: int, b: int) -> bool:
    """Whether linear ``b``'s output depends on linear ``a``'s output (``a < b``). Inside a block the
    query, key and value projections are parallel (none reaches another); each of them reaches the
    attention output and everything after it; any linear reaches every linear of later blocks."""
    a, b = int(a), int(b)
    if a < 0 or b < 0:
        raise ValueError("linear indices are non-negative")
    if b <= a:
        return False
    if layer_of(a) < layer_of(b):
        return True
    return not (a % 6 < 3 and b % 6 < 3)


def bert_weights(mini) -> BertWeights:
    """Collect the parameters of a loaded :class:`reprobook.models.minilm.MiniLM`."""
    lin = list(mini.linears.values())
    blocks = mini.model.encoder.layer
    cfg = mini.model.config
    return BertWeights(W=[m.weight.detach() for m in lin], b=[m.bias.detach() for m in lin],
                       ln1=[(blk.attention.output.LayerNorm.weight.detach(),
                             blk.attention.output.LayerNorm.bias.detach()) for blk in blocks],
                       ln2=[(blk.output.LayerNorm.weight.detach(), blk.output.LayerNorm.bias.detach())
                            for blk in blocks],
                       n_heads=int(cfg.num_attention_heads), eps=float(cfg.layer_norm_eps),
                       embeddings=mini.model.embeddings)


@torch.no_grad()
def embed(w: BertWeights, enc: dict) -> tuple[torch.Tensor, torch.Tensor]:
    """Token embeddings ``[B, T, d]`` (the input of block 0) and the boolean mask of real tokens."""
    h = w.embeddings(input_ids=enc["input_ids"], token_type_ids=enc.get("token_type_ids"))
    return h, enc["attention_mask"].bool()


Quantiser = Callable[[int, torch.Tensor], torch.Tensor]


@torch.no_grad()
def run_blocks(w: BertWeights, h: torch.Tensor, mask: torch.Tensor, first: int, last: int, *,
               quant: Quantiser | None = None, record: Sequence[int] = (), stop: int | None = None):
    """Run blocks ``first..last`` on their input ``h``. ``quant(i, x)`` quantises linear ``i``'s
    input; ``record`` lists linears whose outputs are returned; ``stop`` ends the pass right after
    that linear's output. Returns ``(h_out, outputs)``; ``h_out`` is ``None`` after a stop."""
    if h.ndim != 3 or mask.shape != h.shape[:2]:
        raise ValueError(f"h must be [B, T, d] with a [B, T] mask, got {tuple(h.shape)}, {tuple(mask.shape)}")
    if not 0 <= first <= last < w.n_blocks:
        raise ValueError(f"blocks must satisfy 0 <= first <= last < {w.n_blocks}, got {first}, {last}")
    if stop is not None and not 6 * first <= stop < 6 * (last + 1):
        raise ValueError(f"stop={stop} is not a linear of blocks {first}..{last}")
    q = quant or (lambda i, x: x)
    rec = set(int(i) for i in record)
    outs: dict[int, torch.Tensor] = {}

    def lin(i, x):
        y = F.linear(q(i, x), w.W[i], w.b[i])
        if i in rec:
            outs[i] = y
        if i == stop:
            raise _Stop
        return y

    B, T, d = h.shape
    H = w.n_heads
    dh = d // H
    bias = torch.zeros(B, 1, 1, T, dtype=h.dtype, device=h.device)
    bias = bias.masked_fill(~mask[:, None, None, :], torch.finfo(h.dtype).min)
    try:
        for k in range(first, last + 1):
            i = 6 * k
            Q = lin(i, h).view(B, T, H, dh).transpose(1, 2)
            K = lin(i + 1, h).view(B, T, H, dh).transpose(1, 2)
            V = lin(i + 2, h).view(B, T, H, dh).transpose(1, 2)
            att = torch.softmax(Q @ K.transpose(-1, -2) / math.sqrt(dh) + bias, dim=-1)
            C = (att @ V).transpose(1, 2).reshape(B, T, d)
            a = F.layer_norm(lin(i + 3, C) + h, (d,), *w.ln1[k], eps=w.eps)
            u = F.gelu(lin(i + 4, a))
            h = F.layer_norm(lin(i + 5, u) + a, (d,), *w.ln2[k], eps=w.eps)
    except _Stop:
        return None, outs
    return h, outs


def pool(h: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean over real tokens, L2-normalised: the sentence embedding of all-MiniLM-L6-v2."""
    m = mask.unsqueeze(-1).to(h.dtype)
    return F.normalize((h * m).sum(1) / m.sum(1).clamp_min(1e-9), dim=-1)
