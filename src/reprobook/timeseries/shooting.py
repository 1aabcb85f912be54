r"""Fit a trajectory model on one long series by multiple shooting; score it by rolled-out windows.

A model maps starts ``x0`` (B, n) to trajectories (H + 1, B, n) (see :mod:`reprobook.timeseries.csode`).
*Multiple shooting*: each optimiser step draws ``batch`` start indices ``i`` in the training part,
rolls the model out ``window`` steps from the true state ``s_i`` and minimises the mean squared
error against ``s_{i+1..i+window}``. Short windows keep gradients through the solver tame; the
model never sees a state after the training part.

*Extrapolation*: from true states in the held-out tail (after the training part), roll out
``horizon`` steps and compare with the truth (MSE and MAE per window).
"""
from __future__ import annotations

import numpy as np
import torch


def zscore(series: np.ndarray, n_train: int, groups: int = 0):
    """Standardise ``series`` (T, n) with the first ``n_train`` rows' statistics.

    ``groups = 0``: one mean and spread per column. ``groups = g > 0``: the columns form ``g``
    equal blocks (fields on a grid) sharing one mean and spread each. Returns ``(z, mean, std)``.
    """
    series = np.asarray(series, dtype=np.float64)
    if series.ndim != 2 or not 1 < n_train <= len(series):
        raise ValueError(f"need a (T, n) series and 1 < n_train <= T, got {series.shape}, {n_train}")
    tr = series[:n_train]
    if groups:
        if series.shape[1] % groups:
            raise ValueError(f"{series.shape[1]} columns do not split into {groups} equal groups")
        blocks = tr.reshape(n_train, groups, -1)
        mean = np.repeat(blocks.mean(axis=(0, 2)), series.shape[1] // groups)
        std = np.repeat(blocks.std(axis=(0, 2)), series.shape[1] // groups)
    else:
        mean, std = tr.mean(0), tr.std(0)
    std = np.where(std > 0, std, 1.0)
    return (series - mean) / std, mean, std


def fit_shooting(model: torch.nn.Module, series: torch.Tensor, n_train: int, *, window: int, steps: int,
                 batch: int, lr: float, dt: float, seed: int, clip: float = 1.0) -> list[float]:
    """Adam on multiple-shooting windows from ``series[:n_train]``; returns the loss per step."""
    if series.ndim != 2:
        raise ValueError(f"series must be (T, n), got shape {tuple(series.shape)}")
    if n_train <= window or n_train > len(series):
        raise ValueError(f"need window < n_train <= T, got window {window}, n_train {n_train}, "
                         f"T {len(series)}")
    if steps < 0 or batch < 1:
        raise ValueError(f"need steps >= 0 and batch >= 1, got {steps}, {batch}")
    gen = torch.Generator().manual_seed(int(seed))
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    offsets = torch.arange(window + 1)
    losses = []
    model.train()
    for _ in range(steps):
        starts = torch.randint(0, n_train - window, (batch,), generator=gen)
        target = series[starts[None, :] + offsets[:, None]]            # (window + 1, B, n)
        pred = model(target[0], window, dt)
        loss = ((pred[1:] - target[1:]) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        opt.step()
        losses.append(loss.item())
    return losses


@torch.no_grad()
def rollout_errors(model: torch.nn.Module, series: torch.Tensor, start: int, *, horizon: int,
                   dt: float, stride: int | None = None):
    """MSE and MAE of ``horizon``-step rollouts from true states at ``start, start + stride, ...``.

    Only windows that end inside the series are used. Returns ``(mse, mae, pred, target)`` with
    per-window errors (n_windows,) and the rollouts (horizon + 1, n_windows, n).
    """
    stride = stride or horizon
    if horizon < 1 or stride < 1:
        raise ValueError(f"need horizon >= 1 and stride >= 1, got {horizon}, {stride}")
    starts = torch.arange(start, len(series) - horizon, stride)
    if len(starts) == 0:
        raise ValueError(f"no {horizon}-step window fits after index {start} in a series of {len(series)}")
    model.eval()
    target = series[starts[None, :] + torch.arange(horizon + 1)[:, None]]
    pred = model(target[0], horizon, dt)
    err = pred[1:] - target[1:]
    mse = (err ** 2).mean(dim=(0, 2))
    mae = err.abs().mean(dim=(0, 2))
    if not torch.isfinite(pred).all():
        mse = torch.where(torch.isfinite(mse), mse, torch.tensor(float("inf"), dtype=mse.dtype))
    return mse.numpy(), mae.numpy(), pred, target
