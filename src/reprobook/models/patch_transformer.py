r"""A small ViT-style image classifier with pluggable attention, and its training loop.

An image :math:`[H, W]` is cut into non-overlapping :math:`p\times p` patches (row-major order), each
patch is embedded linearly, a learned class token is prepended and learned position embeddings
added; then ``n_layers`` pre-norm blocks :math:`x \leftarrow x + \mathrm{Attn}(\mathrm{LN}(x))`,
:math:`x \leftarrow x + \mathrm{MLP}(\mathrm{LN}(x))`, a final LayerNorm, and a linear head on the
class token. This is DeiT's layout at toy size (the GFSA paper's vision backbone).

The attention is :class:`reprobook.models.gfsa.GraphFilterAttention` (``attention_options`` are
its keyword arguments: ``filter="softmax"`` is the plain ViT, ``"gfsa"`` the graph-filter one),
the MLP is :class:`reprobook.models.ffn.MLP` (GELU). ``forward(images, return_hidden=True)`` also
returns the token representations after the embedding and after every block (what oversmoothing
is measured on).

:func:`train_patch_classifier` fits a model with AdamW (weight decay on weight matrices
only, as DeiT) on cross-entropy, shuffled minibatches and
random shifts of up to ``shift`` pixels (zero padding: the digits' background is 0), all drawn from
one ``torch.Generator``, so a seed fixes the batch order and the augmentation; it records the wall
time of every optimiser step.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import torch
import torch.nn as nn
import torch.nn.functional as F

from .ffn import MLP
from .gfsa import GraphFilterAttention

__all__ = ["image_patches", "PatchTransformer", "random_shift", "TrainLog",
           "train_patch_classifier", "accuracy"]


def image_patches(images: torch.Tensor, patch: int) -> torch.Tensor:
    """``[B, H, W]`` images -> ``[B, (H/p)(W/p), p*p]`` flattened patches in row-major order."""
    if images.ndim != 3:
        raise ValueError(f"images must be [B, H, W], got {tuple(images.shape)}")
    B, H, W = images.shape
    if isinstance(patch, bool) or not isinstance(patch, int) or patch < 1 or H % patch or W % patch:
        raise ValueError(f"patch must be a positive int dividing the image size {H}x{W}, got {patch!r}")
    x = images.reshape(B, H // patch, patch, W // patch, patch).permute(0, 1, 3, 2, 4)
    return x.reshape(B, (H // patch) * (W // patch), patch * patch)


class _Block(nn.Module):
    def __init__(self, d_model, n_heads, mlp_hidden, attention_options):
        super().__init__()
        self.norm1 = nn.LayerNorm(d_model)
        self.attn = GraphFilterAttention(d_model, n_heads, **attention_options)
        self.norm2 = nn.LayerNorm(d_model)
        self.mlp = MLP(d_model, mlp_hidden)

    def forward(self, x):
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class PatchTransformer(nn.Module):
    """ViT-style classifier (see the module docstring).

    Args:
        image_size: side of the square images; patch: side of a patch (divides image_size).
        n_classes: outputs. d_model, n_layers, n_heads: width, depth, heads.
        mlp_ratio: MLP hidden width over d_model.
        attention_options: keyword arguments of :class:`GraphFilterAttention` for every block, or
            a list with one dict per block.
        pos_std: standard deviation of the initial position embeddings (DeiT: 0.02). On tiny
            images a larger value helps: with near-equal positions, near-uniform early attention
            averages the patches into a summary that has lost where each stroke was.
    """

    def __init__(self, image_size: int = 8, patch: int = 2, n_classes: int = 10, d_model: int = 48,
                 n_layers: int = 4, n_heads: int = 4, mlp_ratio: float = 2.0,
                 attention_options: dict | list | None = None, pos_std: float = 0.02):
        super().__init__()
        for name, x in (("image_size", image_size), ("patch", patch), ("n_classes", n_classes),
                        ("d_model", d_model), ("n_layers", n_layers), ("n_heads", n_heads)):
            if isinstance(x, bool) or not isinstance(x, int) or x < 1:
                raise ValueError(f"{name} must be a positive int, got {x!r}")
        if image_size % patch:
            raise ValueError(f"patch={patch} must divide image_size={image_size}")
        if not mlp_ratio > 0:
            raise ValueError(f"mlp_ratio must be positive, got {mlp_ratio!r}")
        if not pos_std >= 0:
            raise ValueError(f"pos_std must be non-negative, got {pos_std!r}")
        opts = attention_options if attention_options is not None else {}
        opts = list(opts) if isinstance(opts, (list, tuple)) else [dict(opts)] * n_layers
        if len(opts) != n_layers or not all(isinstance(o, dict) for o in opts):
            raise ValueError(f"attention_options must be a dict or {n_layers} dicts, got {opts!r}")
        self.image_size, self.patch = image_size, patch
        self.n_tokens = (image_size // patch) ** 2 + 1
        self.embed = nn.Linear(patch * patch, d_model)
        self.cls = nn.Parameter(torch.zeros(1, 1, d_model))
        self.pos = nn.Parameter(torch.zeros(1, self.n_tokens, d_model))
        nn.init.normal_(self.cls, std=0.02)
        nn.init.normal_(self.pos, std=pos_std)
        hidden = max(1, round(mlp_ratio * d_model))
        self.blocks = nn.ModuleList(_Block(d_model, n_heads, hidden, o) for o in opts)
        self.norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, n_classes)

    @property
    def attentions(self) -> list[GraphFilterAttention]:
        return [b.attn for b in self.blocks]

    def forward(self, images: torch.Tensor, return_hidden: bool = False):
        """``images: [B, H, W]`` -> logits ``[B, n_classes]`` (and, with ``return_hidden``, the
        list of ``n_layers + 1`` token representations ``[B, n_tokens, d_model]``)."""
        if images.ndim != 3 or images.shape[1:] != (self.image_size, self.image_size):
            raise ValueError(f"images must be [B, {self.image_size}, {self.image_size}], got "
                             f"{tuple(images.shape)}")
        x = self.embed(image_patches(images, self.patch))
        x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], dim=1) + self.pos
        hidden = [x]
        for block in self.blocks:
            x = block(x)
            hidden.append(x)
        logits = self.head(self.norm(x[:, 0]))
        return (logits, hidden) if return_hidden else logits


def random_shift(images: torch.Tensor, shift: int, generator: torch.Generator) -> torch.Tensor:
    """Each image moved by its own random offset in ``[-shift, shift]`` pixels along each axis,
    filled with zeros (the background)."""
    if isinstance(shift, bool) or not isinstance(shift, int) or shift < 0:
        raise ValueError(f"shift must be a non-negative int, got {shift!r}")
    if shift == 0:
        return images
    B, H, W = images.shape
    padded = F.pad(images, (shift, shift, shift, shift))
    off = torch.randint(0, 2 * shift + 1, (B, 2), generator=generator)
    rows = (off[:, :1] + torch.arange(H)).to(images.device)            # [B, H]
    cols = (off[:, 1:] + torch.arange(W)).to(images.device)            # [B, W]
    b = torch.arange(B, device=images.device)[:, None, None]
    return padded[b, rows[:, :, None], cols[:, None, :]]


@dataclass
class TrainLog:
    """Per-epoch mean training loss and the wall time (seconds) of every optimiser step."""

    losses: list = field(default_factory=list)
    step_times: list = field(default_factory=list)


def train_patch_classifier(model: nn.Module, images: torch.Tensor, labels: torch.Tensor, *,
                           epochs: int, generator: torch.Generator, lr: float = 1e-3,
                           weight_decay: float = 0.05, batch_size: int = 64,
                           shift: int = 1, clock=time.perf_counter) -> TrainLog:
    """AdamW on cross-entropy for ``epochs`` passes (see the module docstring). ``clock`` times
    the steps (``time.thread_time``: CPU time of this thread, which a busy machine does not
    inflate when torch runs on one thread)."""
    if images.ndim != 3 or labels.shape != (images.shape[0],):
        raise ValueError(f"images must be [n, H, W] and labels [n], got {tuple(images.shape)} and "
                         f"{tuple(labels.shape)}")
    for name, v in (("epochs", epochs), ("batch_size", batch_size)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{name} must be a positive int, got {v!r}")
    params = [p for p in model.parameters() if p.requires_grad]
    # as DeiT (timm) does: weight decay on the linear layers' weight matrices only, none on biases,
    # norms, the class and position tokens, or GFSA's per-head filter weights (decaying w1 would
    # pull the filter away from attention for no reason)
    groups = [{"params": [p for p in params if p.ndim == 2], "weight_decay": weight_decay},
              {"params": [p for p in params if p.ndim != 2], "weight_decay": 0.0}]
    opt = torch.optim.AdamW(groups, lr=lr)
    log = TrainLog()
    model.train()
    for _ in range(epochs):
        order = torch.randperm(images.shape[0], generator=generator).to(images.device)
        total = 0.0
        for idx in order.split(batch_size):
            x = random_shift(images[idx], shift, generator)
            t0 = clock()
            loss = F.cross_entropy(model(x), labels[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            log.step_times.append(clock() - t0)
            total += loss.item() * idx.numel()
        log.losses.append(total / images.shape[0])
    model.eval()
    return log


@torch.no_grad()
def accuracy(model: nn.Module, images: torch.Tensor, labels: torch.Tensor,
             batch_size: int = 512) -> float:
    """Share of ``images`` whose arg-max logit is the label."""
    model.eval()
    hits = sum(int((model(images[i:i + batch_size]).argmax(-1) == labels[i:i + batch_size]).sum())
               for i in range(0, images.shape[0], batch_size))
    return hits / images.shape[0]
