r"""Chronological splits, training-set scaling, sliding windows and batch iterators.

A series ``[T, C]`` is cut in time into train / validation / test parts (fractions, default
70/10/20) and z-scored per channel with the **training part's** mean and standard deviation only.
A window is ``(x, y)`` with ``x = s[t-L:t]`` (look-back ``L``) and ``y = s[t:t+H]`` (horizon ``H``).
A window belongs to the part that holds its *targets*: every target of a validation (test) window
lies in the validation (test) part, while its look-back may reach back into the part before, as in
the usual long-term-forecasting protocol, so no target is ever seen in training.

Two ways to batch:

* :func:`batches` -- shuffled mini-batches (a ``torch.Generator`` fixes the order), the default;
* :func:`sequential_batches` -- consecutive windows at stride 1 in time order, batch ``b`` holding
  windows ``b*B .. b*B+B-1``, so a model that carries state from one batch to the next (spectral
  attention) sees time flow forward.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

__all__ = ["Scaler", "WindowSet", "chronological_bounds", "split_windows", "batches",
           "sequential_batches"]


@dataclass
class Scaler:
    """Per-channel z-scoring with fixed statistics."""
    mean: np.ndarray
    std: np.ndarray

    @classmethod
    def fit(cls, x: np.ndarray, eps: float = 1e-8) -> "Scaler":
        x = np.asarray(x, dtype=np.float64)
        return cls(x.mean(0), np.maximum(x.std(0), eps))

    def transform(self, x):
        return (np.asarray(x) - self.mean) / self.std

    def inverse(self, x):
        return np.asarray(x) * self.std + self.mean


@dataclass
class WindowSet:
    """All windows of one split, as views into the scaled series ``[T, C]``.

    ``starts[i]`` is the index (in the full series) of window ``i``'s first target."""
    series: torch.Tensor       # [T, C] float32, scaled
    starts: torch.Tensor       # [N] int64
    lookback: int
    horizon: int

    def __len__(self):
        return int(self.starts.numel())

    @property
    def n_channels(self) -> int:
        return int(self.series.shape[1])

    def get(self, idx) -> tuple[torch.Tensor, torch.Tensor]:
        """Windows ``idx`` (a tensor/list of positions): ``x [B, L, C]``, ``y [B, H, C]``."""
        s = self.starts[torch.as_tensor(idx, dtype=torch.long)]
        t_x = s[:, None] + torch.arange(-self.lookback, 0)
        t_y = s[:, None] + torch.arange(self.horizon)
        return self.series[t_x], self.series[t_y]

    def tensors(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Every window at once (small sets only)."""
        return self.get(torch.arange(len(self)))


def chronological_bounds(length: int, fractions=(0.7, 0.1, 0.2)) -> list[tuple[int, int]]:
    """``[start, end)`` of each part for fractions that sum to 1 (the last part takes the rest)."""
    f = np.asarray(fractions, dtype=np.float64)
    if f.ndim != 1 or len(f) < 1 or (f <= 0).any() or abs(f.sum() - 1) > 1e-9:
        raise ValueError(f"fractions must be positive and sum to 1, got {fractions}")
    edges = [0] + [int(round(length * c)) for c in np.cumsum(f)[:-1]] + [length]
    return [(edges[i], edges[i + 1]) for i in range(len(f))]


def split_windows(values: np.ndarray, lookback: int, horizon: int, *, fractions=(0.7, 0.1, 0.2),
                  names=("train", "val", "test"), stride: int = 1, scale: bool = True
                  ) -> tuple[dict[str, WindowSet], Scaler | None]:
    """Scale ``values [T, C]`` by the first part's statistics and window every part.

    Returns ``({name: WindowSet}, scaler)``. ``stride`` thins the training windows only (evaluation
    always uses every window). An error names the part that has no window."""
    v = np.asarray(values, dtype=np.float64)
    if v.ndim != 2:
        raise ValueError(f"values must be [T, C], got shape {v.shape}")
    for n, k in (("lookback", lookback), ("horizon", horizon), ("stride", stride)):
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
            raise ValueError(f"{n} must be a positive int, got {k!r}")
    if len(names) != len(fractions):
        raise ValueError(f"{len(names)} names for {len(fractions)} fractions")
    bounds = chronological_bounds(len(v), fractions)
    scaler = Scaler.fit(v[bounds[0][0]:bounds[0][1]]) if scale else None
    series = torch.as_tensor(scaler.transform(v) if scale else v, dtype=torch.float32)
    out = {}
    for i, (name, (a, b)) in enumerate(zip(names, bounds)):
        first = max(a, lookback)                       # first target index with a full look-back
        last = b - horizon                             # last start whose targets stay in the part
        step = stride if i == 0 else 1
        if last < first:
            raise ValueError(f"part {name!r} ([{a}, {b}) of {len(v)} steps) is too short for "
                             f"look-back {lookback} and horizon {horizon}")
        out[name] = WindowSet(series, torch.arange(first, last + 1, step), int(lookback), int(horizon))
    return out, scaler


def batches(ws: WindowSet, batch_size: int, *, shuffle: bool = True,
            generator: torch.Generator | None = None, drop_last: bool = False):
    """Yield ``(x, y)`` mini-batches of ``ws``; shuffled with ``generator`` when ``shuffle``."""
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    n = len(ws)
    order = torch.randperm(n, generator=generator) if shuffle else torch.arange(n)
    stop = n - n % batch_size if drop_last else n
    for i in range(0, stop, batch_size):
        yield ws.get(order[i:i + batch_size])


def sequential_batches(ws: WindowSet, batch_size: int, *, drop_last: bool = True):
    """Yield batches of ``batch_size`` consecutive windows in time order. The windows must be at
    stride 1 (an error otherwise), so window ``j`` of a batch starts one step after window ``j-1``
    and batch ``b+1`` continues where batch ``b`` ended."""
    if len(ws) > 1 and not bool((ws.starts.diff() == 1).all()):
        raise ValueError("sequential_batches needs stride-1 windows (split_windows(..., stride=1))")
    yield from batches(ws, batch_size, shuffle=False, drop_last=drop_last)
