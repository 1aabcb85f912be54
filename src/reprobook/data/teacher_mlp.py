r"""A classification stream labelled by a random teacher network: infinite data, known labeller.

The teacher is a fixed random MLP :math:`\mathbb{R}^{d}\to\mathbb{R}^{k}`, ``tanh`` hidden layers,
weights :math:`\mathcal{N}(0, 1/\text{fan-in})` (so pre-activations have unit variance and ``tanh``
stays out of saturation), no biases. Inputs are :math:`x\sim\mathcal{N}(0, I_d)` and the label is
:math:`\arg\max_j f(x)_j`. Every draw is fresh, so a student trained on the stream is in the
one-pass, data-rich regime (no example is seen twice, train and test losses agree in expectation),
and the best attainable loss is 0: the labels are a deterministic function of the input.

Example::

    teacher = TeacherMLP(d_in=64, hidden=256, depth=2, n_classes=16, seed=0)
    x, y = teacher.sample(128, torch.Generator().manual_seed(1))     # [128, 64] float, [128] int64
"""
from __future__ import annotations

import math

import torch

__all__ = ["TeacherMLP"]


def _pos(name, v):
    if isinstance(v, bool) or not isinstance(v, int) or v < 1:
        raise ValueError(f"{name} must be a positive int, got {v!r}")
    return v


class TeacherMLP:
    """A random ``tanh`` MLP teacher (see the module docstring). ``depth`` hidden layers of width
    ``hidden``; the weights are drawn from a generator seeded with ``seed``."""

    def __init__(self, d_in: int = 64, hidden: int = 256, depth: int = 2, n_classes: int = 16,
                 seed: int = 0):
        self.d_in, self.hidden = _pos("d_in", d_in), _pos("hidden", hidden)
        self.depth, self.n_classes = _pos("depth", depth), _pos("n_classes", n_classes)
        if n_classes < 2:
            raise ValueError(f"n_classes must be at least 2, got {n_classes}")
        g = torch.Generator().manual_seed(int(seed))
        dims = [d_in] + [hidden] * depth + [n_classes]
        self.weights = [torch.randn(m, n, generator=g) / math.sqrt(m) for m, n in zip(dims, dims[1:])]

    @torch.no_grad()
    def logits(self, x: torch.Tensor) -> torch.Tensor:
        if x.ndim != 2 or x.shape[1] != self.d_in:
            raise ValueError(f"x must be [n, {self.d_in}], got {tuple(x.shape)}")
        h = x
        for w in self.weights[:-1]:
            h = torch.tanh(h @ w)
        return h @ self.weights[-1]

    def sample(self, n: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        """``n`` fresh inputs ``[n, d_in]`` and their labels ``[n]`` (int64)."""
        _pos("n", n)
        if not isinstance(generator, torch.Generator):
            raise TypeError("generator must be a torch.Generator (seed it for a fixed data order)")
        x = torch.randn(n, self.d_in, generator=generator)
        return x, self.logits(x).argmax(-1)
