r"""A small digits classifier whose hidden layer gives the features of an FID-like statistic.

FID compares Gaussian fits of Inception features of real and generated images; Inception is not
offline, and it was trained on other images. For scikit-learn's 8x8 digits we train a one-hidden-layer
MLP classifier (64 pixels -> ``width`` ReLU units -> 10 classes) on the real digits and use its hidden
activations as features: the Fréchet distance between the fits
(:func:`reprobook.stats.two_sample.frechet_distance`) of real and generated features is the
statistic. Inputs are pixels scaled to [-1, 1] (:func:`scale_pixels`).
"""
from __future__ import annotations

import numpy as np
import torch
from torch import nn

__all__ = ["DigitClassifier", "scale_pixels", "train_digit_classifier"]


def scale_pixels(pixels) -> np.ndarray:
    """scikit-learn's grey levels 0..16 to [-1, 1]."""
    p = np.asarray(pixels, dtype=np.float64)
    if p.ndim != 2 or p.shape[1] != 64:
        raise ValueError(f"pixels must have shape (n, 64), got {p.shape}")
    return p / 8.0 - 1.0


class DigitClassifier(nn.Module):
    def __init__(self, width: int = 128, classes: int = 10):
        super().__init__()
        self.hidden, self.head = nn.Linear(64, width), nn.Linear(width, classes)

    def features(self, x: torch.Tensor) -> torch.Tensor:
        if x.ndim != 2 or x.shape[1] != 64:
            raise ValueError(f"x must have shape (n, 64), got {tuple(x.shape)}")
        return torch.relu(self.hidden(x))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x))


def train_digit_classifier(x, labels, generator: torch.Generator, *, steps: int = 300,
                           batch: int = 128, lr: float = 3e-3, width: int = 128) -> DigitClassifier:
    """Adam on cross-entropy over mini-batches of ``x`` (n, 64) in [-1, 1] and integer ``labels``."""
    x = torch.as_tensor(x, dtype=torch.float32)
    y = torch.as_tensor(np.asarray(labels), dtype=torch.long)
    if len(x) != len(y):
        raise ValueError(f"x and labels differ in length: {len(x)} and {len(y)}")
    with torch.random.fork_rng():
        torch.manual_seed(int(torch.randint(2 ** 31, (1,), generator=generator)))
        model = DigitClassifier(width, int(y.max()) + 1)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    for _ in range(steps):
        idx = torch.randint(len(x), (batch,), generator=generator)
        loss = nn.functional.cross_entropy(model(x[idx]), y[idx])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    return model.eval()
