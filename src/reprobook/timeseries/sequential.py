"""Training and evaluating a forecaster that carries state across windows (spectral attention).

The usual protocol (:mod:`reprobook.timeseries.train`) shuffles windows into mini-batches, so a
model cannot remember anything from one window to the next. A stateful model instead walks through
the series in time order:

* :func:`fine_tune` -- train on stride-1 batches of consecutive windows
  (:func:`~reprobook.timeseries.windows.sequential_batches`), the state restarting at each epoch and
  carried from batch to batch; ``shuffle=True`` feeds the same windows in random order instead (the
  control: a memory of unrelated windows). Two learning rates: one for the parameters whose name
  matches ``fast`` (the spectral-attention module, new), one for the rest (the pretrained forecaster).
* :func:`predict_in_order` -- forecasts for every window of the series in time order, so the state
  at a test window has seen every earlier window (train and validation included: past inputs only,
  never a target);
* :func:`all_windows` -- the stride-1 window set over the whole series and where each part's
  windows sit in it.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from reprobook.timeseries.windows import WindowSet, batches, sequential_batches

__all__ = ["SeqConfig", "all_windows", "reset_state", "fine_tune", "predict_in_order"]


@dataclass
class SeqConfig:
    epochs: int = 1
    batch_size: int = 32
    lr_fast: float = 1e-2          # learning rate of the new (stateful) module
    lr_base: float = 1e-4          # learning rate of the pretrained forecaster's weights
    shuffle: bool = False          # True: random batches (the control), False: consecutive windows
    fast: str = "sa."              # parameters whose name contains this get lr_fast

    def __post_init__(self):
        if self.epochs < 1 or self.batch_size < 2 or self.lr_fast < 0 or self.lr_base < 0:
            raise ValueError(f"invalid SeqConfig {self} (epochs >= 1, batch_size >= 2, rates >= 0)")


def reset_state(model: torch.nn.Module):
    """Call ``reset()`` on every sub-module that has one (restart the carried state)."""
    for m in model.modules():
        if m is not model and hasattr(m, "reset") and callable(m.reset):
            m.reset()


def all_windows(sets: dict[str, WindowSet]) -> tuple[WindowSet, dict[str, torch.Tensor]]:
    """``(ws, where)``: every stride-1 window of the series behind ``sets`` (from the first with a
    full look-back to the last with a full horizon) and, per part, the positions of its windows in
    ``ws``."""
    if not sets:
        raise ValueError("no window sets given")
    first = next(iter(sets.values()))
    T = first.series.shape[0]
    lo, hi = first.lookback, T - first.horizon
    ws = WindowSet(first.series, torch.arange(lo, hi + 1), first.lookback, first.horizon)
    where = {}
    for name, s in sets.items():
        if s.series is not first.series or s.lookback != first.lookback or s.horizon != first.horizon:
            raise ValueError(f"part {name!r} does not window the same series with the same sizes")
        where[name] = s.starts - lo
    return ws, where


def fine_tune(model: torch.nn.Module, train: WindowSet, config: SeqConfig, *, seed: int,
              device="cpu") -> list[float]:
    """Train ``model`` in place on ``train`` (see the module docstring); returns the loss of every
    step. Torch's global generator is forked and seeded (dropout depends on ``seed`` only)."""
    fast = [p for n, p in model.named_parameters() if config.fast in n and p.requires_grad]
    slow = [p for n, p in model.named_parameters() if config.fast not in n and p.requires_grad]
    groups = [g for g in ({"params": fast, "lr": config.lr_fast}, {"params": slow, "lr": config.lr_base})
              if g["params"]]
    if not groups:
        raise ValueError("the model has no trainable parameters")
    opt = torch.optim.Adam(groups, foreach=True)
    losses = []
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(seed))
        gen = torch.Generator().manual_seed(int(seed))
        model.train()
        for _ in range(config.epochs):
            reset_state(model)
            it = (batches(train, config.batch_size, shuffle=True, generator=gen, drop_last=True)
                  if config.shuffle else sequential_batches(train, config.batch_size))
            for x, y in it:
                loss = torch.nn.functional.mse_loss(model(x.to(device)), y.to(device))
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
                losses.append(loss.item())
    reset_state(model)
    return losses


@torch.no_grad()
def predict_in_order(model: torch.nn.Module, ws: WindowSet, batch_size: int = 64, device="cpu"):
    """``(pred, y)`` ``[N, H, C]`` for every window of ``ws`` taken in time order, in evaluation mode,
    the state restarted once at the beginning and carried throughout."""
    if len(ws) > 1 and not bool((ws.starts.diff() == 1).all()):
        raise ValueError("predict_in_order needs stride-1 windows in time order (use all_windows)")
    was = model.training
    model.eval()
    reset_state(model)
    preds, ys = [], []
    for x, y in batches(ws, batch_size, shuffle=False):
        preds.append(model(x.to(device)).cpu())
        ys.append(y)
    reset_state(model)
    model.train(was)
    return torch.cat(preds), torch.cat(ys)


def squared_error(pred: torch.Tensor, y: torch.Tensor) -> np.ndarray:
    """Squared error averaged over windows: ``[horizon, channels]``."""
    return (pred.double() - y.double()).square().mean(0).numpy()
