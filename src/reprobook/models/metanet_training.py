r"""Train metanetworks to regress a scalar property of MLPs from their weights, many at once.

A model maps a batch of MLP parameters ``(weights, biases)`` to one number per MLP (a
:class:`~reprobook.models.graph_metanet.GMN` or
:class:`~reprobook.models.graph_metanet.ScaleGMN`). Training minimises the mean squared error on
standardised targets :math:`(y - \bar y)/s_y` (mean and standard deviation of the training
targets) with AdamW (weight decay decoupled, as ``torch.optim.AdamW``), a linear warm-up over the
first 5% of the steps then cosine decay to zero, and gradient-norm clipping: the optimiser family
the official ScaleGMN configurations use. Before training, each model's per-layer input scales are
fixed from the training MLPs.

**Members trained at once.** :func:`fit_ensemble` trains ``M`` copies of one architecture, each
with its own initialisation, its own random stream (batch order, augmentations) and its own
learning rate: the replicates of an experiment, or the points of a learning-rate grid. Their
parameters are stacked along a leading member axis and the forward pass is ``torch.func.vmap``
over it, so ``M`` members cost about as much as one when the step is dominated by the number of
operations (small graphs on a CPU) rather than by arithmetic. The loss is the sum of the members'
losses, gradients are clipped member by member, and AdamW is written out element-wise with a
per-member learning rate; member :math:`m` therefore follows exactly the trajectory it would
follow alone (``fit_regressor`` is the one-member case; a unit test compares the two).

**Augmentation** (``augment=True``): every mini-batch is replaced by a random function-preserving
transformation of itself (:func:`reprobook.data.weight_symmetries.random_symmetry`: hidden-neuron
scalings, log-uniform on ``scale_range`` for ReLU or random signs for tanh, and permutations),
drawn afresh at every step from the member's generator: the standard way to teach a
permutation-only metanetwork an invariance it does not have by construction.

Example::

    fits = fit_ensemble(lambda: ScaleGMN(zoo.layout, d=16), train.weights, train.biases,
                        train.omega, FitConfig(epochs=30), init_seeds=[0, 1, 2],
                        generators=[torch.Generator().manual_seed(s) for s in (0, 1, 2)])
    mse = ((fits[0].predict(test.weights, test.biases) - test.omega) ** 2).mean()
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
from torch import nn
from torch.func import functional_call, stack_module_state, vmap

from ..data.sine_mlps import check_mlp_params
from ..data.weight_symmetries import random_symmetry

__all__ = ["FitConfig", "FittedRegressor", "fit_ensemble", "fit_regressor", "predict"]


@dataclass(frozen=True)
class FitConfig:
    """Optimisation budget and schedule (the same for every model a chapter compares)."""

    epochs: int = 30
    batch_size: int = 32
    lr: float = 1e-3
    weight_decay: float = 0.01
    grad_clip: float = 10.0
    warmup_fraction: float = 0.05
    betas: tuple = (0.9, 0.999)
    eps: float = 1e-8
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
    """A trained model with the target standardisation it was trained with, its learning rate and
    its loss curve (mean standardised training loss per epoch)."""

    model: nn.Module
    y_mean: float
    y_std: float
    lr: float
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


def _per_member(x: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """Reshape a ``(M,)`` tensor to broadcast against ``like`` of shape ``(M, ...)``."""
    return x.view(-1, *([1] * (like.dim() - 1)))


def fit_ensemble(make_model, weights, biases, y, config: FitConfig = FitConfig(), *,
                 init_seeds, generators, lrs=None, augment=None) -> list[FittedRegressor]:
    """Train one model per member on ``(weights, biases) -> y`` (see the module).

    ``make_model()`` builds the architecture; member ``m`` is initialised under
    ``torch.manual_seed(init_seeds[m])`` (the global generator is restored afterwards), draws its
    batch orders and augmentations from ``generators[m]`` (a CPU ``torch.Generator``) and uses the
    learning rate ``lrs[m]`` (default: ``config.lr`` for all); ``augment[m]`` (default:
    ``config.augment`` for all) says whether member ``m`` trains on augmented batches, so a model
    and its augmented twin can share one ensemble. The models are placed on the device of
    ``weights``. Returns the members' fitted models, in order.
    """
    check_mlp_params(weights, biases)
    dev, dtype = weights[0].device, weights[0].dtype
    y = torch.as_tensor(y, dtype=dtype, device=dev)
    n = weights[0].shape[0]
    if y.shape != (n,):
        raise ValueError(f"y must hold one target per MLP, shape ({n},), got {tuple(y.shape)}")
    if n < 2:
        raise ValueError("need at least 2 training MLPs")
    init_seeds, generators = list(init_seeds), list(generators)
    if not init_seeds or len(init_seeds) != len(generators):
        raise ValueError(f"need one init seed and one generator per member; got "
                         f"{len(init_seeds)} and {len(generators)}")
    if any(not isinstance(g, torch.Generator) for g in generators):
        raise TypeError("generators must be torch.Generator objects (seeded by the caller)")
    M = len(init_seeds)
    lrs = [config.lr] * M if lrs is None else [float(v) for v in lrs]
    if len(lrs) != M or not all(v > 0 for v in lrs):
        raise ValueError(f"lrs must hold {M} positive learning rates, got {lrs}")
    augment = [config.augment] * M if augment is None else [bool(a) for a in augment]
    if len(augment) != M:
        raise ValueError(f"augment must hold {M} flags, got {len(augment)}")

    models = []
    for s in init_seeds:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(int(s))
            model = make_model()
        model = model.to(device=dev, dtype=dtype)
        if hasattr(model, "set_input_scales"):
            model.set_input_scales(weights, biases)
        models.append(model.train())
    params, _ = stack_module_state(models)              # leaf tensors of shape (M, ...)
    buffers = dict(models[0].named_buffers())           # the same for every member
    template = models[0]

    def one(p, w, b):
        return functional_call(template, {**p, **buffers}, (w, b))

    batched = vmap(one)
    names = list(params)
    state = {k: (torch.zeros_like(p), torch.zeros_like(p)) for k, p in params.items()}
    lr0 = torch.tensor(lrs, dtype=dtype, device=dev)
    b1, b2 = config.betas

    y_mean, y_std = float(y.mean()), float(y.std().clamp_min(1e-12))
    y_std_t = (y - y_mean) / y_std
    steps_per_epoch = math.ceil(n / config.batch_size)
    total = config.epochs * steps_per_epoch
    warmup = max(1, round(config.warmup_fraction * total))
    history = [[] for _ in range(M)]
    step = 0
    for _ in range(config.epochs):
        orders = [torch.randperm(n, generator=g).to(dev) for g in generators]
        epoch_loss = torch.zeros(M, dtype=dtype, device=dev)
        for s in range(steps_per_epoch):
            idx = [o[s * config.batch_size:(s + 1) * config.batch_size] for o in orders]
            ws, bs = [], []
            for m in range(M):
                w, b = [t[idx[m]] for t in weights], [t[idx[m]] for t in biases]
                if augment[m]:
                    w, b = random_symmetry(w, b, config.activation, generators[m],
                                           scale_range=config.scale_range, permute=config.permute)
                ws.append(w)
                bs.append(b)
            w = [torch.stack([x[l] for x in ws]) for l in range(len(weights))]
            b = [torch.stack([x[l] for x in bs]) for l in range(len(biases))]
            target = torch.stack([y_std_t[i] for i in idx])
            per_member = ((batched(params, w, b) - target) ** 2).mean(dim=1)
            grads = torch.autograd.grad(per_member.sum(), [params[k] for k in names],
                                        allow_unused=True)
            with torch.no_grad():
                # clip each member's gradient to norm grad_clip (as clip_grad_norm_ would alone)
                norms = torch.sqrt(sum(g.pow(2).flatten(1).sum(1) for g in grads if g is not None))
                clip = (config.grad_clip / (norms + 1e-6)).clamp(max=1.0)
                lr = lr0 * _lr_factor(step, total, warmup)
                t = step + 1
                for k, g in zip(names, grads):
                    if g is None:            # unused by this architecture: torch.optim skips it
                        continue
                    p, (m1, m2) = params[k], state[k]
                    g = g * _per_member(clip, g)
                    p.mul_(1 - _per_member(lr, p) * config.weight_decay)
                    m1.lerp_(g, 1 - b1)
                    m2.mul_(b2).addcmul_(g, g, value=1 - b2)
                    denom = (m2.sqrt() / math.sqrt(1 - b2 ** t)).add_(config.eps)
                    p.sub_(_per_member(lr / (1 - b1 ** t), p) * m1 / denom)
                epoch_loss += per_member.detach() * idx[0].numel()
            step += 1
        for m in range(M):
            history[m].append(float(epoch_loss[m]) / n)

    fits = []
    with torch.no_grad():
        for m, model in enumerate(models):
            for k, p in model.named_parameters():
                p.copy_(params[k][m])
            fits.append(FittedRegressor(model.eval(), y_mean, y_std, lrs[m], history[m]))
    return fits


def fit_regressor(model_or_factory, weights, biases, y, config: FitConfig = FitConfig(), *,
                  generator: torch.Generator, init_seed: int | None = None) -> FittedRegressor:
    """Train one model (the one-member case of :func:`fit_ensemble`).

    Pass a factory ``make_model`` and an ``init_seed``, or a built model (its current weights are
    the initialisation).
    """
    if isinstance(model_or_factory, nn.Module):
        model = model_or_factory
        return fit_ensemble(lambda: model, weights, biases, y, config, init_seeds=[0],
                            generators=[generator])[0]
    if init_seed is None:
        raise ValueError("pass init_seed with a model factory")
    return fit_ensemble(model_or_factory, weights, biases, y, config, init_seeds=[init_seed],
                        generators=[generator])[0]
