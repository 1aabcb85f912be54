r"""Train a metanetwork to regress a scalar property of MLPs from their weights.

The model maps a batch of MLP parameters ``(weights, biases)`` to one number per MLP (a
:class:`~reprobook.models.graph_metanet.GMN` or
:class:`~reprobook.models.graph_metanet.ScaleGMN`). Training minimises the mean squared error on
standardised targets :math:`(y - \bar y)/s_y` (mean and standard deviation of the training
targets) with AdamW, a linear warm-up over the first 5% of the steps then cosine decay to zero, and
gradient-norm clipping: the optimiser family the official ScaleGMN configurations use. Before
training, the model's per-layer input scales are fixed from the training MLPs.

**Augmentation** (``augment=True``): every mini-batch is replaced by a random function-preserving
transformation of itself (:func:`reprobook.data.weight_symmetries.random_symmetry`: hidden-neuron
scalings, log-uniform on ``scale_range`` for ReLU or random signs for tanh, and permutations),
drawn afresh at every step from the run's generator: the standard way to teach a
permutation-only metanetwork an invariance it does not have by construction.

Everything random (initialisation aside, which the caller seeds) comes from one
``torch.Generator``: the batch order and the augmentations.

Example::

    model = ScaleGMN(zoo.layout, d=32)
    fit = fit_regressor(model, train.weights, train.biases, train.omega,
                        FitConfig(epochs=30), generator=torch.Generator().manual_seed(0))
    mse = ((fit.predict(test.weights, test.biases) - test.omega) ** 2).mean()
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
# torch.optim's first optimiser imports torch._dynamo (seconds); do it when this module is imported,
# so that the first training run is not charged for it
import torch._dynamo  # noqa: F401
from torch import nn

from ..data.sine_mlps import check_mlp_params
from ..data.weight_symmetries import random_symmetry

__all__ = ["FitConfig", "FittedRegressor", "fit_regressor", "predict"]


@dataclass(frozen=True)
class FitConfig:
    """Optimisation budget and schedule (the same for every model a chapter compares)."""

    epochs: int = 30
    batch_size: int = 32
    lr: float = 1e-3
    weight_decay: float = 0.01
    grad_clip: float = 10.0
    warmup_fraction: float = 0.05
    augment: bool = False
    activation: str = "relu"          # which symmetry the augmentation draws
    scale_range: tuple = (0.1, 10.0)
    permute: bool = True

    def __post_init__(self):
        for name in ("epochs", "batch_size"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{name} must be a positive int, got {v!r}")
        if not self.lr > 0:
            raise ValueError(f"lr must be > 0, got {self.lr!r}")
        if self.weight_decay < 0 or self.grad_clip <= 0 or not 0 <= self.warmup_fraction < 1:
            raise ValueError("need weight_decay >= 0, grad_clip > 0 and 0 <= warmup_fraction < 1")


@dataclass
class FittedRegressor:
    """A trained model with the target standardisation it was trained with, and its loss curve
    (mean standardised training loss per epoch)."""

    model: nn.Module
    y_mean: float
    y_std: float
    history: list = field(default_factory=list)

    def predict(self, weights, biases, batch_size: int = 256) -> torch.Tensor:
        return predict(self.model, weights, biases, batch_size) * self.y_std + self.y_mean


@torch.no_grad()
def predict(model: nn.Module, weights, biases, batch_size: int = 256) -> torch.Tensor:
    """The model's outputs for every MLP, in batches, in evaluation mode."""
    check_mlp_params(weights, biases)
    was_training = model.training
    model.eval()
    n = weights[0].shape[0]
    out = torch.cat([model([w[i:i + batch_size] for w in weights],
                           [b[i:i + batch_size] for b in biases]) for i in range(0, n, batch_size)])
    model.train(was_training)
    return out


def _lr_factor(step: int, total: int, warmup: int) -> float:
    if step < warmup:
        return (step + 1) / warmup
    return 0.5 * (1 + math.cos(math.pi * (step - warmup) / max(1, total - warmup)))


def fit_regressor(model: nn.Module, weights, biases, y, config: FitConfig = FitConfig(), *,
                  generator: torch.Generator) -> FittedRegressor:
    """Train ``model`` to predict ``y`` (shape ``(N,)``) from the MLPs ``(weights, biases)``."""
    check_mlp_params(weights, biases)
    y = torch.as_tensor(y, dtype=weights[0].dtype, device=weights[0].device)
    n = weights[0].shape[0]
    if y.shape != (n,):
        raise ValueError(f"y must hold one target per MLP, shape ({n},), got {tuple(y.shape)}")
    if n < 2:
        raise ValueError("need at least 2 training MLPs")
    if not isinstance(generator, torch.Generator):
        raise TypeError("generator must be a torch.Generator (seeded by the caller)")
    y_mean, y_std = float(y.mean()), float(y.std().clamp_min(1e-12))
    y_std_t = (y - y_mean) / y_std
    if hasattr(model, "set_input_scales"):
        model.set_input_scales(weights, biases)
    model.train()
    # foreach: one fused update over all parameter tensors (the per-tensor loop, torch's CPU
    # default, costs more than the arithmetic at these sizes)
    opt = torch.optim.AdamW(model.parameters(), lr=config.lr, weight_decay=config.weight_decay,
                            foreach=True)
    steps_per_epoch = math.ceil(n / config.batch_size)
    total = config.epochs * steps_per_epoch
    warmup = max(1, round(config.warmup_fraction * total))
    history, step = [], 0
    for _ in range(config.epochs):
        order = torch.randperm(n, generator=generator).to(y.device)
        epoch_loss = 0.0
        for s in range(steps_per_epoch):
            idx = order[s * config.batch_size:(s + 1) * config.batch_size]
            w, b = [t[idx] for t in weights], [t[idx] for t in biases]
            if config.augment:
                w, b = random_symmetry(w, b, config.activation, generator,
                                       scale_range=config.scale_range, permute=config.permute)
            for group in opt.param_groups:
                group["lr"] = config.lr * _lr_factor(step, total, warmup)
            loss = ((model(w, b) - y_std_t[idx]) ** 2).mean()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), config.grad_clip)
            opt.step()
            epoch_loss += float(loss.detach()) * idx.numel()
            step += 1
        history.append(epoch_loss / n)
    model.eval()
    return FittedRegressor(model, y_mean, y_std, history)
