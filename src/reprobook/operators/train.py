r"""Training, evaluation across resolutions, and timing of the 2-D neural operators.

* Inputs are ``[B, 3, n, n]``: the input function and the coordinates ``x, y`` of the grid
  (:func:`with_coordinates`), the same for every model.
* The loss and the metric are the relative :math:`L^1` error of CNO and MambaNO,
  :math:`\lVert\hat u-u\rVert_1/\lVert u\rVert_1` per instance (:func:`relative_l1`).
* :func:`fit`: Adam with a cosine-decayed learning rate, mini-batches drawn from a
  ``torch.Generator`` seeded by the caller (the training seed fixes the order).
* :func:`predict` evaluates on a grid of any size ``m``. ``mode="cde"`` (continuous-discrete
  equivalence, CNO's way): the input is resampled spectrally to the model's own grid ``n``, the model
  runs there, and its output is resampled to ``m``. ``mode="native"``: the model runs on the ``m``
  grid directly (grid-unit kernels then shrink in physical size, and a scan takes more, smaller
  steps), the discretisation-invariance test FNO is built to pass.
* :func:`forward_times` times a module at several grid sizes, the sizes interleaved within every
  repeat so that changes in machine load hit all sizes alike; :func:`loglog_slopes` fits, per repeat,
  the slope of log time against log ``n^2`` (the number of grid points ``N``).
"""
from __future__ import annotations

import math
import time

import numpy as np
import torch

from .cno import fourier_resample

__all__ = ["with_coordinates", "relative_l1", "fit", "predict", "forward_times", "loglog_slopes"]


def with_coordinates(u: torch.Tensor | np.ndarray) -> torch.Tensor:
    """``[B, n, n] -> [B, 3, n, n]``: the function and the grid coordinates ``k / n``."""
    u = torch.as_tensor(u, dtype=torch.float32)
    if u.dim() != 3 or u.shape[1] != u.shape[2]:
        raise ValueError(f"expected [B, n, n], got shape {tuple(u.shape)}")
    n = u.shape[-1]
    g = torch.arange(n, dtype=torch.float32) / n
    X, Y = torch.meshgrid(g, g, indexing="ij")
    return torch.stack([u, X.expand_as(u), Y.expand_as(u)], dim=1)


def relative_l1(pred: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Per-instance ``||pred - target||_1 / ||target||_1`` over the trailing grid dims."""
    if pred.shape != target.shape:
        raise ValueError(f"pred {tuple(pred.shape)} and target {tuple(target.shape)} differ in shape")
    dims = tuple(range(1, pred.dim()))
    return (pred - target).abs().sum(dims) / target.abs().sum(dims).clamp_min(1e-30)


def fit(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor, *, epochs: int, batch_size: int,
        lr: float, seed: int, weight_decay: float = 0.0, max_steps: int | None = None) -> list[float]:
    """Train ``model`` on ``x: [B, C, n, n] -> y: [B, n, n]`` with the relative L1 loss; returns the
    mean loss of every epoch. The cosine schedule runs over all ``epochs`` (or ``max_steps``)."""
    if x.dim() != 4 or y.dim() != 3 or len(x) != len(y) or x.shape[-2:] != y.shape[-2:]:
        raise ValueError(f"x must be [B, C, n, n] and y [B, n, n] on the same grid, got "
                         f"{tuple(x.shape)} and {tuple(y.shape)}")
    for name, v in (("epochs", epochs), ("batch_size", batch_size)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{name} must be a positive int, got {v!r}")
    g = torch.Generator().manual_seed(int(seed))
    steps_per_epoch = math.ceil(len(x) / batch_size)
    total = epochs * steps_per_epoch if max_steps is None else min(max_steps, epochs * steps_per_epoch)
    opt = torch.optim.Adam(model.parameters(), lr=lr, weight_decay=weight_decay)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=max(total, 1))
    model.train()
    history, step = [], 0
    for _ in range(epochs):
        perm = torch.randperm(len(x), generator=g)
        losses = []
        for i in range(0, len(x), batch_size):
            if step >= total:
                break
            idx = perm[i:i + batch_size]
            loss = relative_l1(model(x[idx])[:, 0], y[idx]).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
            losses.append(float(loss.detach()))
            step += 1
        if losses:
            history.append(float(np.mean(losses)))
    model.eval()
    return history


@torch.no_grad()
def predict(model: torch.nn.Module, x: torch.Tensor, *, model_size: int, mode: str = "cde",
            batch_size: int = 64) -> torch.Tensor:
    """The model's output ``[B, m, m]`` on inputs ``x: [B, C, m, m]`` (module docstring)."""
    if mode not in ("cde", "native"):
        raise ValueError(f"mode must be 'cde' or 'native', got {mode!r}")
    if x.dim() != 4:
        raise ValueError(f"x must be [B, C, m, m], got shape {tuple(x.shape)}")
    model.eval()
    m = x.shape[-1]
    outs = []
    for i in range(0, len(x), batch_size):
        xb = x[i:i + batch_size]
        if mode == "cde" and m != model_size:
            # only the function channel is resampled; the coordinates are recomputed on the grid
            xb = with_coordinates(fourier_resample(xb[:, :1], model_size)[:, 0])
            outs.append(fourier_resample(model(xb), m)[:, 0])
        else:
            outs.append(model(xb)[:, 0])
    return torch.cat(outs)


@torch.no_grad()
def forward_times(module: torch.nn.Module, sizes, channels: int, *, repeats: int, batch: int = 1,
                  warmup: int = 1) -> np.ndarray:
    """Seconds of one forward pass of ``module`` on ``[batch, channels, n, n]`` for every ``n`` in
    ``sizes``: array ``(repeats, len(sizes))``; the sizes alternate within each repeat."""
    if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1:
        raise ValueError(f"repeats must be a positive int, got {repeats!r}")
    module.eval()
    xs = [torch.randn(batch, channels, n, n) for n in sizes]
    for x in xs:
        for _ in range(warmup):
            module(x)
    out = np.zeros((repeats, len(xs)))
    for r in range(repeats):
        for j, x in enumerate(xs):
            t = time.perf_counter()
            module(x)
            out[r, j] = time.perf_counter() - t
    return out


def loglog_slopes(times: np.ndarray, sizes) -> np.ndarray:
    """Least-squares slope of ``log t`` against ``log n^2`` for every row of ``times``."""
    t = np.asarray(times, dtype=float)
    if t.ndim != 2 or t.shape[1] != len(sizes) or len(sizes) < 2:
        raise ValueError(f"times must be (repeats, len(sizes) >= 2), got {t.shape} for {len(sizes)} sizes")
    lx = np.log(np.asarray(sizes, dtype=float) ** 2)
    lx = lx - lx.mean()
    ly = np.log(t)
    return (ly - ly.mean(1, keepdims=True)) @ lx / (lx @ lx)
