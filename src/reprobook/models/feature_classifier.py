r"""A small ReLU MLP classifier that exposes its penultimate features, and its training loop.

.. math:: z(x) = \mathrm{relu}(W_2\,\mathrm{relu}(W_1 x + b_1) + b_2)\in\mathbb R^D,
          \qquad f(x) = W z(x) + b \in\mathbb R^C .

Post-hoc OOD detectors need both halves: the features :math:`z` (kNN, density scores) and the
last layer ``fc`` (:math:`W, b`; logit scores, WeiPer). :func:`train_classifier` fits it by Adam
on cross-entropy with shuffled minibatches drawn from a ``torch.Generator``, so a seed fixes the
initialisation and the batch order.
"""
from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["FeatureClassifier", "train_classifier"]


class FeatureClassifier(nn.Module):
    """``d_in -> hidden[0] -> ... -> hidden[-1] (= features z) -> fc -> n_classes`` logits."""

    def __init__(self, d_in: int, hidden: Sequence[int], n_classes: int,
                 generator: torch.Generator | None = None):
        super().__init__()
        sizes = [d_in, *hidden]
        if (len(sizes) < 2 or n_classes < 2 or any(isinstance(s, bool) or not isinstance(s, int)
                                                   or s < 1 for s in [*sizes, n_classes])):
            raise ValueError(f"need positive int sizes, >= 1 hidden layer and >= 2 classes, got "
                             f"d_in={d_in}, hidden={list(hidden)}, n_classes={n_classes}")
        self.body = nn.ModuleList(nn.Linear(a, b) for a, b in zip(sizes, sizes[1:]))
        self.fc = nn.Linear(sizes[-1], n_classes)
        if generator is not None:
            # PyTorch's default init (Kaiming-uniform weights, uniform biases), drawn from generator
            for layer in [*self.body, self.fc]:
                bound = 1.0 / layer.in_features ** 0.5
                with torch.no_grad():
                    layer.weight.uniform_(-bound, bound, generator=generator)
                    layer.bias.uniform_(-bound, bound, generator=generator)

    def features(self, x: torch.Tensor) -> torch.Tensor:
        if x.dim() != 2 or x.shape[1] != self.body[0].in_features:
            raise ValueError(f"x must be (n, {self.body[0].in_features}), got {tuple(x.shape)}")
        for layer in self.body:
            x = torch.relu(layer(x))
        return x

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.features(x))


def train_classifier(model: FeatureClassifier, x: torch.Tensor, y: torch.Tensor, *,
                     epochs: int, generator: torch.Generator, lr: float = 1e-3,
                     batch_size: int = 64, weight_decay: float = 0.0) -> list[float]:
    """Adam on cross-entropy for ``epochs`` passes over (x, y); returns each epoch's mean loss."""
    if x.dim() != 2 or y.shape != (x.shape[0],):
        raise ValueError(f"x must be (n, d) and y (n,), got {tuple(x.shape)} and {tuple(y.shape)}")
    for name, v in (("epochs", epochs), ("batch_size", batch_size)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{name} must be a positive int, got {v!r}")
    opt = torch.optim.Adam(model.parameters(), lr=lr, weight_decay=weight_decay)
    model.train()
    history = []
    for _ in range(epochs):
        order = torch.randperm(x.shape[0], generator=generator)
        total = 0.0
        for idx in order.split(batch_size):
            loss = F.cross_entropy(model(x[idx]), y[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += loss.item() * idx.numel()
        history.append(total / x.shape[0])
    model.eval()
    return history
