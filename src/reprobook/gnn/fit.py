"""Full-batch training of a graph classifier, and its accuracy."""
from __future__ import annotations

import torch
import torch.nn.functional as F

from .gin import GraphBatch

__all__ = ["fit_full_batch", "accuracy", "predict_proba"]


def fit_full_batch(model: torch.nn.Module, data: GraphBatch, labels, *, epochs: int, lr: float,
                   weight_decay: float = 0.0) -> list[float]:
    """Adam on the mean cross-entropy over the whole training set, ``epochs`` steps; returns the
    loss after each step."""
    if isinstance(epochs, bool) or not isinstance(epochs, int) or epochs < 0:
        raise ValueError(f"epochs must be an int >= 0, got {epochs!r}")
    if not lr > 0:
        raise ValueError(f"lr must be positive, got {lr}")
    y = torch.as_tensor(labels, dtype=torch.long, device=data.x.device)
    if y.shape != (data.n_graphs,):
        raise ValueError(f"labels must have shape ({data.n_graphs},), got {tuple(y.shape)}")
    opt = torch.optim.Adam(model.parameters(), lr=lr, weight_decay=weight_decay)
    model.train()
    losses = []
    for _ in range(epochs):
        opt.zero_grad()
        loss = F.cross_entropy(model(data), y)
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    return losses


@torch.no_grad()
def predict_proba(model: torch.nn.Module, data: GraphBatch) -> torch.Tensor:
    model.eval()
    return torch.softmax(model(data), dim=1)


def accuracy(model: torch.nn.Module, data: GraphBatch, labels) -> float:
    y = torch.as_tensor(labels, dtype=torch.long, device=data.x.device)
    return float((predict_proba(model, data).argmax(1) == y).float().mean())
