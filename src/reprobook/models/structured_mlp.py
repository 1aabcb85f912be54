r"""An MLP student whose hidden layers are structured, trained on a stream while counting FLOPs.

:class:`StructuredStudent` is ``d_in -> width -> ... -> width -> n_out``: a dense input layer,
``depth`` structured ``width x width`` hidden layers (:class:`~reprobook.models.structured_linear.EinsumLinear`
of any structure), a dense output layer, GELU between them. Only the hidden layers change with the
structure, as in the paper's MLP experiments, where the input and output layers stay dense.

:func:`train_stream` trains it with Adam at a constant learning rate on fresh batches of a
:class:`~reprobook.data.teacher_mlp.TeacherMLP` stream and, at the given checkpoints, records the
held-out cross-entropy against the **cumulative training FLOPs**: the FLOPs of one training step
(forward and backward on a batch) are measured once with PyTorch's counter
(:func:`reprobook.bench.flops.count_flops`) and multiplied by the step count. The compute frontier
of a family of widths is then the lower envelope of these curves (:func:`frontier`).
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from ..bench.flops import count_flops
from ..data.teacher_mlp import TeacherMLP
from .structured_linear import EinsumLinear

__all__ = ["StructuredStudent", "train_stream", "frontier"]


class StructuredStudent(nn.Module):
    """``d_in -> width (dense) -> depth x structured width x width -> n_out (dense)``."""

    def __init__(self, d_in: int, width: int, n_out: int, structure="dense", depth: int = 1,
                 rank: int | None = None, mup: bool = True):
        super().__init__()
        self.fc_in = nn.Linear(d_in, width)
        self.hidden = nn.ModuleList(EinsumLinear(width, width, structure, rank=rank, bias=True, mup=mup)
                                    for _ in range(depth))
        self.fc_out = nn.Linear(width, n_out)
        for lin in (self.fc_in, self.fc_out):   # variance 1/fan-in, as the structured layers
            nn.init.normal_(lin.weight, std=lin.in_features ** -0.5)
            nn.init.zeros_(lin.bias)

    def forward(self, x):
        h = F.gelu(self.fc_in(x))
        for layer in self.hidden:
            h = F.gelu(layer(h))
        return self.fc_out(h)


def train_stream(model: nn.Module, teacher: TeacherMLP, *, steps: int, batch_size: int, lr: float,
                 seed: int, checkpoints: Sequence[int], eval_set: tuple[torch.Tensor, torch.Tensor]) -> dict:
    """Train ``model`` on ``steps`` fresh batches (generator seeded with ``seed``) with Adam at a
    constant ``lr``; return ``{"steps", "flops", "loss"}`` at the ``checkpoints`` (step counts,
    ``0`` allowed) and ``"step_flops"``, the measured FLOPs of one training step."""
    ck = sorted({int(c) for c in checkpoints})
    if not ck or ck[0] < 0 or ck[-1] > steps:
        raise ValueError(f"checkpoints must lie in 0..steps={steps}, got {ck}")
    gen = torch.Generator().manual_seed(int(seed))
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    ex, ey = eval_set

    def step_loss(x, y):
        return F.cross_entropy(model(x), y)

    xb, yb = teacher.sample(batch_size, torch.Generator().manual_seed(0))
    step_flops = count_flops(lambda: step_loss(xb, yb).backward())
    model.zero_grad(set_to_none=True)

    @torch.no_grad()
    def evaluate():
        return float(F.cross_entropy(model(ex), ey))

    out = {"steps": [], "loss": []}
    if ck[0] == 0:
        out["steps"].append(0)
        out["loss"].append(evaluate())
    nxt = [c for c in ck if c > 0]
    for step in range(1, steps + 1):
        x, y = teacher.sample(batch_size, gen)
        loss = step_loss(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if nxt and step == nxt[0]:
            nxt.pop(0)
            out["steps"].append(step)
            out["loss"].append(evaluate())
    out["step_flops"] = step_flops
    out["flops"] = [s * step_flops for s in out["steps"]]
    return out


def frontier(curves: Sequence[dict], budgets: Sequence[float]) -> np.ndarray:
    """The compute frontier: at each budget ``C``, the lowest loss any of ``curves`` (each with
    ``"flops"`` and ``"loss"`` at its checkpoints) reaches with at most ``C`` training FLOPs.

    Within a curve the loss is interpolated linearly in log-FLOPs between checkpoints; after its
    last checkpoint a curve keeps its best loss (a finished run can be stopped there), before its
    first positive-FLOP checkpoint it does not count (``inf`` if no curve counts).
    """
    budgets = np.asarray(budgets, dtype=float)
    best = np.full(budgets.shape, np.inf)
    for c in curves:
        f = np.asarray(c["flops"], dtype=float)
        l = np.asarray(c["loss"], dtype=float)
        if f.shape != l.shape:
            raise ValueError(f"a curve has {f.size} FLOP values and {l.size} losses")
        keep = f > 0
        f, l = f[keep], np.minimum.accumulate(l[keep]) if keep.any() else l[keep]
        if f.size == 0:
            continue
        v = np.full(budgets.shape, np.inf)
        inside = (budgets >= f[0]) & (budgets <= f[-1])
        v[inside] = np.interp(np.log(budgets[inside]), np.log(f), l)
        v[budgets > f[-1]] = l[-1]
        best = np.minimum(best, v)
    return best
