"""Fit a forecaster ``model(x [B, L, C]) -> [B, H, C]`` with Adam on MSE, with early stopping on
the validation windows, and evaluate it.

Every model of a comparison gets the same windows, batch order (a ``torch.Generator`` seeded with
``seed``), epochs and learning rate; the weights kept are those of the epoch with the lowest
validation MSE (the long-term-forecasting protocol's early stopping, with ``patience`` epochs).
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, field

import numpy as np
import torch

from reprobook.timeseries.windows import WindowSet, batches

__all__ = ["FitConfig", "FitResult", "fit_forecaster", "predict", "evaluate", "build_seeded"]


def build_seeded(fn, seed: int):
    """``fn()`` (a model constructor) with torch's global generator seeded to ``seed`` during the
    call and restored after it: the same seed gives the same initial weights, whatever ran before."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(seed))
        return fn()


@dataclass
class FitConfig:
    epochs: int = 10
    lr: float = 3e-4
    batch_size: int = 32
    patience: int = 3              # epochs without validation improvement before stopping
    max_steps: int | None = None   # optional cap on optimiser steps (smoke runs)

    def __post_init__(self):
        if self.epochs < 1 or self.batch_size < 1 or self.lr <= 0 or self.patience < 1:
            raise ValueError(f"invalid FitConfig {self}")


@dataclass
class FitResult:
    train_loss: list[float] = field(default_factory=list)    # mean training MSE per epoch
    val_mse: list[float] = field(default_factory=list)       # validation MSE after each epoch
    best_epoch: int = 0
    steps: int = 0


@torch.no_grad()
def predict(model: torch.nn.Module, ws: WindowSet, batch_size: int = 256, device="cpu"):
    """Forecasts and targets of every window of ``ws`` (eval mode): ``(pred, y)`` as ``[N, H, C]``."""
    was = model.training
    model.eval()
    preds, ys = [], []
    for x, y in batches(ws, batch_size, shuffle=False):
        preds.append(model(x.to(device)).cpu())
        ys.append(y)
    model.train(was)
    return torch.cat(preds), torch.cat(ys)


def evaluate(model, ws: WindowSet, channels=None, device="cpu") -> dict[str, float]:
    """Test MSE and MAE over all windows (and only ``channels``, a boolean mask or index list, when
    given), in the scaled space."""
    p, y = predict(model, ws, device=device)
    if channels is not None:
        p, y = p[..., channels], y[..., channels]
    d = p.double() - y.double()
    return {"mse": float(d.square().mean()), "mae": float(d.abs().mean())}


def fit_forecaster(model: torch.nn.Module, train: WindowSet, val: WindowSet, config: FitConfig, *,
                   seed: int, device="cpu") -> FitResult:
    """Train ``model`` in place (see the module docstring); it ends holding its best weights.

    Torch's global generator is forked and seeded with ``seed`` for the duration, so dropout and any
    sampling inside the model (SOFTS's stochastic pooling) depend on ``seed`` only, not on what ran
    before."""
    if train.n_channels != val.n_channels:
        raise ValueError(f"train has {train.n_channels} channels, val {val.n_channels}")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(seed))
        return _fit(model, train, val, config, seed, device)


def _fit(model, train, val, config, seed, device) -> FitResult:
    gen = torch.Generator().manual_seed(int(seed))
    opt = torch.optim.Adam(model.parameters(), lr=config.lr, foreach=True)  # fewer small ops
    res = FitResult()
    best, best_state, waited = np.inf, None, 0
    model.train()
    for epoch in range(config.epochs):
        losses = []
        for x, y in batches(train, config.batch_size, shuffle=True, generator=gen):
            if config.max_steps is not None and res.steps >= config.max_steps:
                break
            loss = torch.nn.functional.mse_loss(model(x.to(device)), y.to(device))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            losses.append(loss.item())
            res.steps += 1
        res.train_loss.append(float(np.mean(losses)) if losses else float("nan"))
        v = evaluate(model, val, device=device)["mse"]
        res.val_mse.append(v)
        if v < best:
            best, best_state, waited, res.best_epoch = v, copy.deepcopy(model.state_dict()), 0, epoch
        else:
            waited += 1
            if waited >= config.patience:
                break
        if config.max_steps is not None and res.steps >= config.max_steps:
            break
    if best_state is not None:
        model.load_state_dict(best_state)
    return res
