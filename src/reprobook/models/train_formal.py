"""Train and score token taggers on formal-language tasks (flip-flop reads, prefix parity).

A *tagger* is any model mapping ``tokens [B, L]`` to logits ``[B, L, V]``; the first ``n_classes``
logits are the class scores (``V >= n_classes``), so language models such as
:class:`~reprobook.models.mamba.MambaLM` and
:class:`~reprobook.models.tiny_transformer.TinyTransformer` are used unchanged.  The loss is
cross-entropy at positions whose target is not ``IGNORE`` (-100).  Batches are drawn fresh at every
step from ``sample(n, generator)`` with one ``torch.Generator`` per run, so two models trained with
the same seed see the same data.  AdamW, linear warm-up then cosine decay, gradient clipping.
"""
from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F

from ..data.formal_languages import IGNORE

__all__ = ["train_tagger", "evaluate_tagger"]


def _lr(step, steps, warmup, lr):
    if step < warmup:
        return lr * (step + 1) / warmup
    p = (step - warmup) / max(1, steps - warmup)
    return lr * 0.5 * (1 + math.cos(math.pi * p))


def train_tagger(model: torch.nn.Module, sample: Callable, *, steps: int, batch_size: int,
                 lr: float = 3e-3, seed: int = 0, n_classes: int = 2, warmup: int | None = None,
                 weight_decay: float = 0.01, clip: float = 1.0, device="cpu") -> list[float]:
    """Train in place for ``steps`` AdamW steps; returns the loss of every step."""
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 0:
        raise ValueError(f"steps must be an int >= 0, got {steps!r}")
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive int, got {batch_size!r}")
    warmup = max(1, steps // 10) if warmup is None else warmup
    gen = torch.Generator().manual_seed(int(seed))
    model.to(device).train()
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay)
    losses = []
    for step in range(steps):
        for g in opt.param_groups:
            g["lr"] = _lr(step, steps, warmup, lr)
        x, y = sample(batch_size, gen)
        x, y = x.to(device), y.to(device)
        logits = model(x)[..., :n_classes]
        loss = F.cross_entropy(logits.reshape(-1, n_classes), y.reshape(-1), ignore_index=IGNORE)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        opt.step()
        losses.append(float(loss.detach()))
    return losses


@torch.no_grad()
def evaluate_tagger(model: torch.nn.Module, tokens: torch.Tensor, targets: torch.Tensor, *,
                    n_classes: int = 2, batch_size: int = 256, device="cpu") -> dict:
    """Scores on a fixed set: ``token_acc`` (share of scored positions right), ``final_acc`` (share
    of strings whose last scored position is right) and ``string_acc`` (share of strings with every
    scored position right); also ``n_tokens`` and ``n_strings``."""
    if tokens.shape != targets.shape or tokens.dim() != 2:
        raise ValueError(f"tokens and targets must both be [n, L], got {tuple(tokens.shape)} and "
                         f"{tuple(targets.shape)}")
    model.to(device).eval()
    right = total = final_right = all_right = 0
    n = tokens.shape[0]
    for i in range(0, n, batch_size):
        x = tokens[i:i + batch_size].to(device)
        y = targets[i:i + batch_size].to(device)
        pred = model(x)[..., :n_classes].argmax(-1)
        scored = y != IGNORE
        ok = (pred == y) & scored
        right += int(ok.sum())
        total += int(scored.sum())
        all_right += int((ok | ~scored).all(-1).sum())
        last = (scored.cumsum(-1) == scored.sum(-1, keepdim=True)) & scored   # last scored position
        final_right += int((ok & last).sum())
    return dict(token_acc=right / max(1, total), final_acc=final_right / max(1, n),
                string_acc=all_right / max(1, n), n_tokens=total, n_strings=n)
