"""Train and apply a segment classifier on groups of consecutive windows
(:class:`~reprobook.timeseries.segments.Groups`), with optional label harmonisation.

Every model of a comparison gets the same groups, batch order (a ``torch.Generator`` seeded with
``seed``), epochs, learning rate and weight decay (Adam, as the official Con4m code). The loss is
the cross-entropy of the class head against the *current* training labels, plus, for a model with a
pair head (Con4m), the cross-entropy of "same class" for every pair of windows in a group.

**Harmonisation** (``harmonise="con4m"``, Con4m's progressive label harmonisation): for the first
``warmup`` epochs the labels are the given ones; from then on every batch's predictions feed a
:class:`~reprobook.models.con4m.LabelHarmoniser` with weight
:math:`\\eta = \\min(1, (e - \\text{warmup} + 1)/\\text{ramp})` at epoch ``e``, and the labels it
proposes become the training labels of the next epoch. ``harmonise="random"`` is the broken
control (as many changes, at random). The model keeps its last-epoch weights (no validation set:
the notes' protocol).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch
import torch.nn.functional as F

from reprobook.models.con4m import LabelHarmoniser, consistent_probs, contextual_prediction
from reprobook.timeseries.segments import Groups

__all__ = ["SegFitConfig", "SegFitResult", "fit_segments", "predict_segments"]


@dataclass
class SegFitConfig:
    epochs: int = 30
    lr: float = 1e-3
    weight_decay: float = 1e-4
    batch_size: int = 32
    warmup: int = 5            # epochs on the given labels before harmonisation starts
    ramp: int = 15             # epochs over which eta grows from 0 to 1 after the warm-up

    def __post_init__(self):
        if (self.epochs < 1 or self.batch_size < 1 or self.lr <= 0 or self.warmup < 0
                or self.ramp < 1 or self.weight_decay < 0):
            raise ValueError(f"invalid SegFitConfig {self}")

    def eta(self, epoch: int) -> float:
        return 0.0 if epoch < self.warmup else min(1.0, (epoch - self.warmup + 1) / self.ramp)


@dataclass
class SegFitResult:
    loss: list[float] = field(default_factory=list)          # mean training loss per epoch
    changed: list[int] = field(default_factory=list)         # labels changed at the end of each epoch
    label_error: list[float] = field(default_factory=list)   # share of training labels != clean, after each epoch
    labels: np.ndarray | None = None                         # the final training labels [G, n]


def _probs(model, logits, pair_logits):
    p_hat = logits.softmax(-1)
    if pair_logits is None:
        return p_hat, None
    q = pair_logits.softmax(-1)[..., 1]
    return p_hat, consistent_probs(contextual_prediction(p_hat, q))


def fit_segments(model: torch.nn.Module, groups: Groups, config: SegFitConfig, *, seed: int,
                 harmonise: str | None = None, harmonise_rng: np.random.Generator | None = None,
                 device="cpu") -> SegFitResult:
    """Train ``model`` in place on ``groups.x`` with labels ``groups.y`` (module docstring)."""
    if harmonise not in (None, "con4m", "random"):
        raise ValueError(f"unknown harmonise {harmonise!r}; use None, 'con4m' or 'random'")
    if harmonise and not getattr(model, "uses_pairs", False):
        raise ValueError("harmonisation needs a model with a pair head (Con4m)")
    K = model.n_classes
    if groups.y.max() >= K or groups.y.min() < 0:
        raise ValueError(f"labels must lie in [0, {K}), got [{groups.y.min()}, {groups.y.max()}]")
    x = torch.as_tensor(groups.x)
    clean = torch.as_tensor(groups.clean, dtype=torch.long)
    harm = (LabelHarmoniser(groups.y, K, mode=harmonise, rng=harmonise_rng) if harmonise else None)
    labels = torch.as_tensor(groups.y, dtype=torch.long)
    res = SegFitResult()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(seed))
        gen = torch.Generator().manual_seed(int(seed))
        opt = torch.optim.Adam(model.parameters(), lr=config.lr, weight_decay=config.weight_decay)
        model.to(device).train()
        for epoch in range(config.epochs):
            eta = config.eta(epoch) if harm else 0.0
            losses = []
            for idx in torch.randperm(len(x), generator=gen).split(config.batch_size):
                xb, yb = x[idx].to(device), labels[idx].to(device)
                logits, pair = model(xb)
                loss = F.cross_entropy(logits.reshape(-1, K), yb.reshape(-1))
                if pair is not None:
                    same = (yb[:, :, None] == yb[:, None, :]).long()
                    loss = loss + F.cross_entropy(pair.reshape(-1, 2), same.reshape(-1))
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
                losses.append(loss.item())
                if harm is not None and epoch >= config.warmup:
                    with torch.no_grad():
                        p_hat, con_p = _probs(model, logits.detach(), pair.detach())
                    harm.propose(idx, p_hat, con_p, eta)
            res.loss.append(float(np.mean(losses)))
            if harm is not None and epoch >= config.warmup:
                res.changed.append(harm.commit())
                labels = harm.current.clone()
            else:
                res.changed.append(0)
            res.label_error.append(float((labels != clean).double().mean()))
    model.eval()
    res.labels = labels.numpy()
    return res


@torch.no_grad()
def predict_segments(model: torch.nn.Module, groups: Groups, *, consistency: bool = True,
                     batch_size: int = 256, device="cpu") -> np.ndarray:
    """Predicted labels ``[G, n]`` (evaluation mode). A model with a pair head predicts
    ``argmax(0.5 p_hat + 0.5 con_p)`` (Con4m's inference) unless ``consistency=False``
    (then ``argmax p_hat``); the others predict ``argmax p_hat``."""
    was = model.training
    model.eval()
    out = []
    x = torch.as_tensor(groups.x)
    for i in range(0, len(x), batch_size):
        logits, pair = model(x[i:i + batch_size].to(device))
        if pair is not None and consistency:
            p_hat, con_p = _probs(model, logits, pair)
            out.append((0.5 * p_hat + 0.5 * con_p).argmax(-1).cpu())
        else:
            out.append(logits.argmax(-1).cpu())
    model.train(was)
    return torch.cat(out).numpy()
