r"""A tiny CLIP in plain torch: a CNN image tower, a transformer text tower, the contrastive loss.

CLIP (Radford et al. 2021) embeds an image :math:`I` and a caption :math:`T` into one space,
:math:`u = f(I)/\lVert f(I)\rVert`, :math:`v = g(T)/\lVert g(T)\rVert`, and trains both towers so
that matching pairs have the larger cosine. For a batch of :math:`B` pairs with logits
:math:`\ell_{ij} = \tau\, u_i^\top v_j` (:math:`\tau = e^{t}`, :math:`t` learned, capped at 100)
the loss is the symmetric InfoNCE

.. math::

   \mathcal L = \tfrac12\Big[\tfrac1B\sum_i -\log\frac{e^{\ell_{ii}}}{\sum_j e^{\ell_{ij}}}
   + \tfrac1B\sum_j -\log\frac{e^{\ell_{jj}}}{\sum_i e^{\ell_{ij}}}\Big].

**Hard negatives** (NegCLIP, Yuksekgonul et al. 2023): with one extra caption :math:`\tilde T_i`
per image that describes a *different* scene made by a minimal edit (swapped attributes, a
replaced relation, ...), the image-to-text term normalises over the :math:`2B` captions
:math:`\{v_j\} \cup \{\tilde v_j\}`, so the model is pushed to tell a caption from its edit, not
only from the other captions of the batch (which almost always differ in several words, so a
bag-of-words text tower suffices for them: the mechanism behind CLIP's weak binding).

* :class:`WordTokenizer`: a closed word-level vocabulary (the captions are generated), padding id 0;
  an unknown word is an error, not a silent ``[UNK]``.
* :class:`ImageTower`: 3 conv blocks (conv 3x3, ReLU, 2x2 max-pool on the first two), flattened
  (so positions survive: relations need them), a linear map to the embedding.
* :class:`TextTower`: token + learned position embeddings, a pre-norm bidirectional transformer
  encoder, mean over real tokens, a linear map. Word order is visible to it (positions), so it
  *can* bind attributes to nouns; whether training makes it do so is the question.
"""
from __future__ import annotations

import math
from collections.abc import Sequence

import torch
import torch.nn as nn
import torch.nn.functional as F

__all__ = ["WordTokenizer", "ImageTower", "TextTower", "TinyCLIP", "clip_loss", "train_clip"]


class WordTokenizer:
    """Lower-case whitespace words to ids (0 is padding), from a closed vocabulary."""

    def __init__(self, words: Sequence[str]):
        vocab = sorted({w for w in words if w})
        if not vocab:
            raise ValueError("WordTokenizer needs at least one word")
        self.itos = ["<pad>", *vocab]
        self.stoi = {w: i for i, w in enumerate(self.itos)}

    @classmethod
    def from_texts(cls, texts: Sequence[str]) -> "WordTokenizer":
        return cls([w for t in texts for w in t.lower().split()])

    def __len__(self) -> int:
        return len(self.itos)

    def __call__(self, texts: Sequence[str], max_len: int | None = None) -> torch.Tensor:
        """Ids ``[len(texts), L]`` padded with 0 (L = the longest text, or ``max_len``)."""
        if isinstance(texts, str):
            raise TypeError("pass a list of texts, not one string")
        rows = []
        for t in texts:
            ids = []
            for w in t.lower().split():
                if w not in self.stoi:
                    raise ValueError(f"word {w!r} (in {t!r}) is not in the tokenizer's vocabulary")
                ids.append(self.stoi[w])
            if not ids:
                raise ValueError("an empty caption cannot be encoded")
            rows.append(ids)
        L = max(map(len, rows)) if max_len is None else int(max_len)
        if any(len(r) > L for r in rows):
            raise ValueError(f"a caption has more than max_len = {L} words")
        out = torch.zeros(len(rows), L, dtype=torch.long)
        for i, r in enumerate(rows):
            out[i, :len(r)] = torch.tensor(r)
        return out


class ImageTower(nn.Module):
    """``[B, 3, S, S]`` -> ``[B, dim]``: conv(3->c) pool, conv(c->2c) pool, conv(2c->2c), linear."""

    def __init__(self, size: int = 24, channels: int = 16, dim: int = 64):
        super().__init__()
        if size % 4:
            raise ValueError(f"image size must be a multiple of 4, got {size}")
        c = channels
        self.size = size
        self.net = nn.Sequential(
            nn.Conv2d(3, c, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(c, 2 * c, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(2 * c, 2 * c, 3, padding=1), nn.ReLU(), nn.Flatten(),
            nn.Linear(2 * c * (size // 4) ** 2, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.ndim != 4 or x.shape[1] != 3 or x.shape[2] != self.size or x.shape[3] != self.size:
            raise ValueError(f"images must be [B, 3, {self.size}, {self.size}], got {tuple(x.shape)}")
        return self.net(x)


class TextTower(nn.Module):
    """``[B, L]`` ids -> ``[B, dim]``: embeddings + positions, transformer encoder, masked mean."""

    def __init__(self, vocab_size: int, dim: int = 64, layers: int = 2, heads: int = 4,
                 max_len: int = 24):
        super().__init__()
        if dim % heads:
            raise ValueError(f"dim {dim} must be divisible by heads {heads}")
        self.tok = nn.Embedding(vocab_size, dim, padding_idx=0)
        self.pos = nn.Embedding(max_len, dim)
        layer = nn.TransformerEncoderLayer(dim, heads, 2 * dim, dropout=0.0, batch_first=True,
                                           norm_first=True)
        self.enc = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(dim)
        self.proj = nn.Linear(dim, dim)
        self.max_len = max_len

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        if ids.ndim != 2 or ids.dtype != torch.long:
            raise ValueError(f"token ids must be a [B, L] long tensor, got {tuple(ids.shape)} "
                             f"{ids.dtype}")
        if ids.shape[1] > self.max_len:
            raise ValueError(f"captions of {ids.shape[1]} tokens exceed max_len = {self.max_len}")
        pad = ids == 0
        h = self.tok(ids) + self.pos(torch.arange(ids.shape[1], device=ids.device))
        h = self.norm(self.enc(h, src_key_padding_mask=pad))
        keep = (~pad).unsqueeze(-1).to(h.dtype)
        return self.proj((h * keep).sum(1) / keep.sum(1).clamp_min(1.0))


class TinyCLIP(nn.Module):
    """Both towers and the learned temperature; ``encode_*`` return unit vectors."""

    def __init__(self, vocab_size: int, size: int = 24, dim: int = 64, channels: int = 16,
                 layers: int = 2, heads: int = 4, max_len: int = 24):
        super().__init__()
        self.image = ImageTower(size, channels, dim)
        self.text = TextTower(vocab_size, dim, layers, heads, max_len)
        self.logit_scale = nn.Parameter(torch.tensor(math.log(10.0)))

    def encode_image(self, x: torch.Tensor) -> torch.Tensor:
        return F.normalize(self.image(x), dim=-1)

    def encode_text(self, ids: torch.Tensor) -> torch.Tensor:
        return F.normalize(self.text(ids), dim=-1)

    def scale(self) -> torch.Tensor:
        return self.logit_scale.clamp(max=math.log(100.0)).exp()


def clip_loss(u: torch.Tensor, v: torch.Tensor, scale: torch.Tensor,
              v_hard: torch.Tensor | None = None) -> torch.Tensor:
    """Symmetric InfoNCE over a batch of unit image embeddings ``u`` and text embeddings ``v``
    (row i matches row i); ``v_hard``, one hard-negative caption per image, joins the
    image-to-text softmax only (as in NegCLIP)."""
    if u.shape != v.shape or u.ndim != 2:
        raise ValueError(f"u and v must be matching [B, d] batches, got {tuple(u.shape)} and "
                         f"{tuple(v.shape)}")
    target = torch.arange(u.shape[0], device=u.device)
    texts = v if v_hard is None else torch.cat([v, v_hard])
    if v_hard is not None and v_hard.shape != v.shape:
        raise ValueError(f"v_hard must be [B, d] like v, got {tuple(v_hard.shape)}")
    i2t = scale * u @ texts.T
    t2i = scale * v @ u.T
    return 0.5 * (F.cross_entropy(i2t, target) + F.cross_entropy(t2i, target))


def train_clip(model: TinyCLIP, images: torch.Tensor, captions: torch.Tensor, *, steps: int,
               batch_size: int = 128, lr: float = 2e-3, generator: torch.Generator,
               hard_negatives: torch.Tensor | None = None) -> list[float]:
    """Adam on :func:`clip_loss` over random minibatches of the pairs ``(images[i], captions[i])``
    (``hard_negatives[i]``: token ids of a caption of an edited scene for image i, or None).
    Returns the loss of every step."""
    n = images.shape[0]
    if captions.shape[0] != n or (hard_negatives is not None and hard_negatives.shape[0] != n):
        raise ValueError("images, captions (and hard_negatives) need one row per pair")
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
        raise ValueError(f"steps must be a positive int, got {steps!r}")
    if batch_size > n:
        raise ValueError(f"batch_size {batch_size} exceeds the {n} training pairs")
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=lr, total_steps=steps,
                                                pct_start=0.1)
    model.train()
    losses = []
    for _ in range(steps):
        idx = torch.randperm(n, generator=generator)[:batch_size]
        u = model.encode_image(images[idx])
        v = model.encode_text(captions[idx])
        vh = model.encode_text(hard_negatives[idx]) if hard_negatives is not None else None
        loss = clip_loss(u, v, model.scale(), vh)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        sched.step()
        losses.append(float(loss.detach()))
    model.eval()
    return losses
