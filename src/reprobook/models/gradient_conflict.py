r"""Per-task gradient conflict at a set of parameters (the "tug-of-war" of multi-task learning).

For tasks :math:`t = 1..T` with losses :math:`L_t(\theta)`, let :math:`g_t = \nabla_\theta L_t` be
the gradient restricted to the parameters of interest (here: a connector's projection weights). Two
tasks *conflict* at :math:`\theta` when :math:`\cos(g_s, g_t) < 0` (a step that lowers one loss
raises the other to first order; the PCGrad / gradient-surgery definition).

Parameters may come in **groups** (one per expert of a mixture). Uni-Med reads the tug-of-war per
expert: two tasks routed to different experts do not pull on the same weights. We pool the groups as

.. math:: \cos_{\mathcal G}(s, t) = \frac{\sum_g \langle g_s^{(g)}, g_t^{(g)}\rangle}
          {\sum_g \lVert g_s^{(g)}\rVert\,\lVert g_t^{(g)}\rVert},

the average of the per-group cosines weighted by the product of the two tasks' gradient norms in
that group (so an expert that only one task uses contributes nothing). With one group it is the
plain cosine. :func:`conflict_summary` reduces the ``T x T`` matrix to the **mean pairwise cosine**,
the **conflict** (mean over pairs of :math:`\max(0, -\cos)`, the notes' "mean negative cosine") and
the **share of conflicting pairs** (:math:`\cos < 0`).
"""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np
import torch

__all__ = ["per_task_gradients", "grouped_cosine", "conflict_summary"]


def per_task_gradients(loss_fn: Callable[[object], torch.Tensor], batches: Sequence,
                       groups: Sequence[Sequence[torch.nn.Parameter]]) -> list[list[np.ndarray]]:
    """``out[t][g]``: the flattened gradient (float64) of ``loss_fn(batches[t])`` with respect to the
    parameters of group ``g`` (a parameter with no gradient counts as zeros)."""
    if len(batches) < 2:
        raise ValueError("need the batches of at least two tasks")
    if not groups or any(len(g) == 0 for g in groups):
        raise ValueError("groups must be a non-empty list of non-empty parameter lists")
    flat = [p for g in groups for p in g]
    out = []
    for b in batches:
        loss = loss_fn(b)
        if loss.ndim != 0:
            raise ValueError(f"loss_fn must return a scalar, got shape {tuple(loss.shape)}")
        grads = torch.autograd.grad(loss, flat, allow_unused=True)
        it = iter(grads)
        per_group = []
        for g in groups:
            parts = [(gr if gr is not None else torch.zeros_like(p)).detach().double().reshape(-1)
                     for p, gr in zip(g, it)]
            per_group.append(torch.cat(parts).cpu().numpy())
        out.append(per_group)
    return out


def grouped_cosine(grads: list[list[np.ndarray]]) -> np.ndarray:
    """The ``T x T`` matrix of pooled cosines :math:`\\cos_{\\mathcal G}(s, t)` (see the module
    docstring) of ``grads[t][g]``; the diagonal is 1 (0 for a task whose gradient is all zero)."""
    T = len(grads)
    if T < 2:
        raise ValueError("need the gradients of at least two tasks")
    G = len(grads[0])
    if any(len(g) != G for g in grads):
        raise ValueError("every task needs the same parameter groups")
    dots = np.zeros((G, T, T))
    norms = np.zeros((G, T))
    for k in range(G):
        m = np.stack([np.asarray(grads[t][k], dtype=np.float64) for t in range(T)])
        if m.ndim != 2:
            raise ValueError("each group's gradient must be a flat vector")
        dots[k] = m @ m.T
        norms[k] = np.linalg.norm(m, axis=1)
    num = dots.sum(0)
    den = np.einsum("gs,gt->st", norms, norms)
    with np.errstate(invalid="ignore", divide="ignore"):
        cos = np.where(den > 0, num / den, 0.0)
    return cos


def conflict_summary(cos: np.ndarray) -> dict:
    """``mean_cos`` (mean over the pairs ``s < t``), ``conflict`` (mean of ``max(0, -cos)``) and
    ``share_conflicting`` (share of pairs with ``cos < 0``) of a ``T x T`` cosine matrix."""
    c = np.asarray(cos, dtype=np.float64)
    if c.ndim != 2 or c.shape[0] != c.shape[1] or c.shape[0] < 2:
        raise ValueError(f"cos must be a square matrix of at least 2 tasks, got shape {c.shape}")
    iu = np.triu_indices(c.shape[0], 1)
    pairs = c[iu]
    return {"mean_cos": float(pairs.mean()), "conflict": float(np.maximum(0.0, -pairs).mean()),
            "share_conflicting": float((pairs < 0).mean())}
