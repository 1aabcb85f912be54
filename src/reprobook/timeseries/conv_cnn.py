r"""A plain 1-D CNN for window classification, and its width chosen to match a FLOP budget.

:class:`ConvCNN` is the conventional real-time HAR network CALANet is compared with: the same stem
as CALANet (Conv1d, kernel :math:`k`, ``'same'``, then max-pool 3 / stride 2), then ``depth``
blocks of Conv1d (:math:`w\to w`, kernel :math:`k`, ``'same'``, no bias) -> BatchNorm -> ReLU ->
max-pool 2, global average pooling over time and a linear classifier. The classifier reads the
**last** layer only.

Its cost (multiply-adds counted twice; norms, activations and pools not counted, as
``torch.utils.flop_counter`` does) is

.. math:: F = 2\,C_{in} w k T + \sum_{i=1}^{D} 2 w^2 k\, t_i + 2 w n_{cls},
   \qquad t_1=\lceil T/2\rceil,\; t_{i+1}=\lfloor t_i/2\rfloor

(:func:`conv_cnn_flops`). :func:`matched_width` picks the width whose :math:`F` is closest to a
target, so that the comparison with CALANet is at the same compute.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["ConvCNN", "conv_cnn_flops", "matched_width"]


def _pos_int(name, v):
    if isinstance(v, bool) or not isinstance(v, int) or v < 1:
        raise ValueError(f"{name} must be a positive int, got {v!r}")
    return v


def _lengths(length: int, depth: int) -> list[int]:
    t, out = math.ceil(length / 2), []
    for _ in range(depth):
        out.append(t)
        t //= 2
    if t < 1:
        raise ValueError(f"window length {length} is too short for {depth} pooling blocks")
    return out


class ConvCNN(nn.Module):
    """Conv-BN-ReLU-pool CNN on windows ``[B, n_channels, length]`` (see the module); ``forward``
    returns logits ``[B, n_classes]``."""

    def __init__(self, n_channels: int, n_classes: int, length: int, depth: int = 3,
                 width: int = 64, kernel: int = 5):
        super().__init__()
        for n, v in (("n_channels", n_channels), ("n_classes", n_classes), ("length", length),
                     ("depth", depth), ("width", width), ("kernel", kernel)):
            _pos_int(n, v)
        self.n_channels, self.length = n_channels, length
        self.lengths = _lengths(length, depth)
        self.stem = nn.Conv1d(n_channels, width, kernel, padding="same")
        self.blocks = nn.ModuleList(
            nn.Sequential(nn.Conv1d(width, width, kernel, padding="same", bias=False),
                          nn.BatchNorm1d(width), nn.ReLU(), nn.MaxPool1d(2))
            for _ in range(depth))
        self.fc = nn.Linear(width, n_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dim() != 3 or x.shape[1] != self.n_channels or x.shape[2] != self.length:
            raise ValueError(f"ConvCNN expects x [B, {self.n_channels}, {self.length}], "
                             f"got shape {tuple(x.shape)}")
        h = F.max_pool1d(self.stem(x), 3, 2, 1)
        for block in self.blocks:
            h = block(h)
        return self.fc(h.mean(-1))


def conv_cnn_flops(n_channels: int, n_classes: int, length: int, depth: int, width: int,
                   kernel: int = 5) -> int:
    """Closed-form forward FLOPs of one window through :class:`ConvCNN` (see the module)."""
    ts = _lengths(length, depth)
    return (2 * n_channels * width * kernel * length + sum(2 * width * width * kernel * t for t in ts)
            + 2 * width * n_classes)


def matched_width(target_flops: float, n_channels: int, n_classes: int, length: int, depth: int,
                  kernel: int = 5, max_width: int = 4096) -> int:
    """The width ``w`` of a ``depth``-block :class:`ConvCNN` whose FLOPs are closest to
    ``target_flops`` (FLOPs grow monotonically with ``w``, so a scan stops at the first overshoot)."""
    if not target_flops > 0:
        raise ValueError(f"target_flops must be positive, got {target_flops!r}")
    best, best_gap = 1, math.inf
    for w in range(1, max_width + 1):
        f = conv_cnn_flops(n_channels, n_classes, length, depth, w, kernel)
        if abs(f - target_flops) < best_gap:
            best, best_gap = w, abs(f - target_flops)
        if f > target_flops:
            return best
    raise ValueError(f"no width up to {max_width} reaches {target_flops:.3g} FLOPs")
