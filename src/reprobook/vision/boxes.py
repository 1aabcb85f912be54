r"""Axis-aligned boxes: format conversion, IoU and optimal one-to-one matching.

Boxes are ``[..., 4]`` tensors, either corners ``(x1, y1, x2, y2)`` with ``x2 >= x1, y2 >= y1``
("xyxy") or centre and size ``(cx, cy, w, h)`` ("cxcywh").  For boxes :math:`a, b`

.. math:: \mathrm{IoU}(a, b) = \frac{|a \cap b|}{|a| + |b| - |a \cap b|},

with IoU 0 for two empty boxes.  Matching solves the linear assignment problem
:math:`\min_\pi \sum_i c_{i\pi(i)}` over one-to-one maps between rows and columns of a cost
matrix (Hungarian algorithm, ``scipy.optimize.linear_sum_assignment``); :func:`match_boxes` uses
the cost :math:`1 - \mathrm{IoU}` and drops pairs whose IoU is below a threshold, the usual rule
for scoring detections and for associating tracks with detections.
"""
from __future__ import annotations

import numpy as np
import torch
from scipy.optimize import linear_sum_assignment

__all__ = ["cxcywh_to_xyxy", "xyxy_to_cxcywh", "box_area", "box_iou", "hungarian", "match_boxes"]


def _check_boxes(name: str, b: torch.Tensor) -> torch.Tensor:
    b = torch.as_tensor(b, dtype=torch.float32) if not isinstance(b, torch.Tensor) else b
    if b.shape[-1:] != (4,):
        raise ValueError(f"{name} must have a last dimension of 4 (box coordinates), got shape {tuple(b.shape)}")
    return b


def cxcywh_to_xyxy(b: torch.Tensor) -> torch.Tensor:
    """``(cx, cy, w, h) -> (x1, y1, x2, y2)``."""
    b = _check_boxes("boxes", b)
    cx, cy, w, h = b.unbind(-1)
    return torch.stack([cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2], -1)


def xyxy_to_cxcywh(b: torch.Tensor) -> torch.Tensor:
    """``(x1, y1, x2, y2) -> (cx, cy, w, h)``."""
    b = _check_boxes("boxes", b)
    x1, y1, x2, y2 = b.unbind(-1)
    return torch.stack([(x1 + x2) / 2, (y1 + y2) / 2, x2 - x1, y2 - y1], -1)


def box_area(b: torch.Tensor) -> torch.Tensor:
    """Area of xyxy boxes (negative extents count as 0)."""
    b = _check_boxes("boxes", b)
    return (b[..., 2] - b[..., 0]).clamp(min=0) * (b[..., 3] - b[..., 1]).clamp(min=0)


def box_iou(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Pairwise IoU of xyxy boxes ``a: [N, 4]``, ``b: [M, 4]`` -> ``[N, M]`` (module docstring)."""
    a, b = _check_boxes("a", a), _check_boxes("b", b)
    if a.dim() != 2 or b.dim() != 2:
        raise ValueError(f"box_iou expects [N, 4] and [M, 4], got {tuple(a.shape)} and {tuple(b.shape)}")
    lt = torch.maximum(a[:, None, :2], b[None, :, :2])
    rb = torch.minimum(a[:, None, 2:], b[None, :, 2:])
    inter = (rb - lt).clamp(min=0).prod(-1)
    union = box_area(a)[:, None] + box_area(b)[None, :] - inter
    return torch.where(union > 0, inter / union.clamp(min=1e-12), torch.zeros_like(inter))


def hungarian(cost) -> tuple[np.ndarray, np.ndarray]:
    """Minimum-cost one-to-one assignment of a ``[N, M]`` cost matrix: ``(rows, cols)``, ``min(N, M)`` pairs."""
    c = cost.detach().cpu().numpy() if isinstance(cost, torch.Tensor) else np.asarray(cost, dtype=float)
    if c.ndim != 2:
        raise ValueError(f"cost must be a 2-D matrix, got shape {c.shape}")
    if not np.isfinite(c).all():
        raise ValueError("cost has non-finite entries; use a large finite value for forbidden pairs")
    if c.size == 0:
        return np.zeros(0, dtype=int), np.zeros(0, dtype=int)
    rows, cols = linear_sum_assignment(c)
    return rows.astype(int), cols.astype(int)


def match_boxes(a: torch.Tensor, b: torch.Tensor, iou_threshold: float = 0.5
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Optimal IoU matching of ``a: [N, 4]`` to ``b: [M, 4]`` (xyxy).

    Returns ``(rows, cols, ious)`` of the kept pairs: those of the assignment minimising
    :math:`\\sum (1 - \\mathrm{IoU})` whose IoU reaches ``iou_threshold``.
    """
    if not 0.0 <= iou_threshold <= 1.0:
        raise ValueError(f"iou_threshold must lie in [0, 1], got {iou_threshold!r}")
    iou = box_iou(a, b)
    rows, cols = hungarian(1.0 - iou)
    ious = iou[rows, cols].cpu().numpy() if len(rows) else np.zeros(0)
    keep = ious >= iou_threshold
    return rows[keep], cols[keep], ious[keep]
