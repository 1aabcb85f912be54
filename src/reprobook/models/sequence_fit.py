"""Train and evaluate a sequence classifier ``model(*inputs) -> logits``, where ``inputs`` is a
tuple of tensors whose first dimension indexes samples (tokens, and optionally lengths).

Every model of a comparison gets the same budget: the same epochs, batch size, learning rate and
batch order (a ``torch.Generator`` seeded with ``seed``). AdamW on cross-entropy with a cosine
learning-rate decay; the weights of the last epoch are evaluated (no early stopping, so no
validation split is spent).
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

__all__ = ["FitConfig", "fit_classifier", "accuracy", "predict", "seconds_per_epoch"]


@dataclass
class FitConfig:
    epochs: int = 10
    lr: float = 3e-3
    batch_size: int = 32
    weight_decay: float = 0.01
    clip: float = 1.0

    def __post_init__(self):
        if self.epochs < 1 or self.batch_size < 1 or self.lr <= 0 or self.clip <= 0:
            raise ValueError(f"invalid FitConfig {self}")


def _check(inputs, labels):
    if not isinstance(inputs, (tuple, list)) or not inputs:
        raise ValueError("inputs must be a non-empty tuple of tensors")
    n = len(labels)
    for x in inputs:
        if x is not None and len(x) != n:
            raise ValueError(f"every input needs {n} samples (the labels'), got {len(x)}")


def _slice(inputs, idx, device):
    return [None if x is None else x[idx].to(device) for x in inputs]


def fit_classifier(model, inputs, labels, config: FitConfig, *, seed: int, device="cpu") -> list[float]:
    """Train ``model`` in place; returns the mean training loss of every epoch."""
    _check(inputs, labels)
    model.to(device).train()
    opt = torch.optim.AdamW(model.parameters(), lr=config.lr, weight_decay=config.weight_decay)
    n = len(labels)
    steps_per_epoch = math.ceil(n / config.batch_size)
    total = steps_per_epoch * config.epochs
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 0.5 * (1 + math.cos(math.pi * s / total)))
    gen = torch.Generator().manual_seed(int(seed))
    history = []
    for _ in range(config.epochs):
        order, losses = torch.randperm(n, generator=gen), []
        for s in range(steps_per_epoch):
            idx = order[s * config.batch_size:(s + 1) * config.batch_size]
            loss = F.cross_entropy(model(*_slice(inputs, idx, device)), labels[idx].to(device))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), config.clip)
            opt.step()
            sched.step()
            losses.append(float(loss.detach()))
        history.append(sum(losses) / len(losses))
    return history


@torch.no_grad()
def predict(model, inputs, batch_size: int = 256, device="cpu") -> torch.Tensor:
    model.to(device).eval()
    n = len(inputs[0])
    out = [model(*_slice(inputs, slice(i, i + batch_size), device)).argmax(-1).cpu()
           for i in range(0, n, batch_size)]
    return torch.cat(out)


def accuracy(model, inputs, labels, batch_size: int = 256, device="cpu") -> float:
    _check(inputs, labels)
    return float((predict(model, inputs, batch_size, device) == labels.cpu()).double().mean())


def seconds_per_epoch(make_inputs, model, labels, *, batch_size: int, max_steps: int | None = None,
                      device="cpu", clock=time.perf_counter) -> float:
    """Wall-clock seconds of one training epoch **including** ``make_inputs()`` (the features built
    online from the raw data: signatures, or padding of raw tokens). With ``max_steps``, only that
    many optimiser steps run and the time is scaled to the full epoch (the steps cost the same)."""
    t0 = clock()
    inputs = make_inputs()
    t_feat = clock() - t0
    n = len(labels)
    steps = math.ceil(n / batch_size)
    run = steps if max_steps is None else min(steps, max_steps)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    model.to(device).train()
    t0 = clock()
    for s in range(run):
        idx = slice(s * batch_size, (s + 1) * batch_size)
        loss = F.cross_entropy(model(*_slice(inputs, idx, device)), labels[idx].to(device))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    if str(device).startswith("cuda"):
        torch.cuda.synchronize()
    return t_feat + (clock() - t0) * steps / run
