r"""Over-parameterised distillation (OPDF): students whose weights are trained as matrix product operators.

**Idea** (Zhan, Lu, Sun & Gao, NeurIPS 2024). A student's weight matrix :math:`W` is replaced, for
training only, by the local tensors of its MPO (:mod:`reprobook.linalg.mpo`) at *full* bond
dimension: the chain contracts back to exactly :math:`W` at initialisation, but holds
:math:`\sum_k r_{k-1}i_kj_kr_k > IJ` trainable numbers, so gradient descent runs on an
over-parameterised (deep-linear-like) factorisation of the same function class. After training the
chain is contracted (:func:`contract`) and the deployed student is the plain network, of exactly the
baseline's size and cost.

**Losses.** The student minimises Hinton et al.'s distillation loss

.. math:: \mathcal L_{KD} = \alpha\,T^2\,\mathrm{KL}\big(\mathrm{softmax}(z_t/T)\,\|\,
          \mathrm{softmax}(z_s/T)\big) + (1-\alpha)\,\mathrm{CE}(z_s, y)

(:func:`hinton_kd_loss`), plus, in OPDF's full form, the *tensor constraint*

.. math:: \mathcal L_{TC} = \frac1{|\mathcal P|}\sum_{(l,l')\in\mathcal P}\frac1{|A|}
          \sum_{k\in A}\mathrm{MSE}\big(T^{(s,l)}_k, T^{(t,l')}_k\big),

the mean squared difference between the *auxiliary* local tensors :math:`k\in A` of student layer
:math:`l` and those of its paired teacher layer :math:`l'` (:func:`tensor_constraint_loss`). The
teacher's tensors are computed once, in the mixed-canonical gauge, and kept fixed
(:func:`teacher_targets`); the loss is :math:`\mathcal L_{KD}+\lambda\mathcal L_{TC}`.

This module builds the MLPs (:func:`mlp`, seeded by a ``torch.Generator``), swaps layers for
:class:`MPOLinear` (:func:`overparameterise`), trains any of the arms with one loop
(:func:`train_classifier`: same batch order for a given seed whatever the arm) and contracts back.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Mapping, Sequence

import torch
import torch.nn.functional as F
from torch import nn

from ..linalg.mpo import MPO, matrix_to_mpo, mpo_to_matrix

__all__ = ["MPOLinear", "mlp", "linear_layers", "overparameterise", "contract", "freeze_auxiliary",
           "num_params", "hinton_kd_loss", "teacher_targets", "tensor_constraint_loss",
           "TrainConfig", "train_classifier", "accuracy", "logits"]


class MPOLinear(nn.Module):
    """A linear layer whose (out, in) weight is the contraction of trainable MPO local tensors.

    ``row_shape`` factors ``out_features`` and ``col_shape`` ``in_features``; ``center`` is the central
    tensor's index (the others are the auxiliary tensors)."""

    def __init__(self, cores: Sequence[torch.Tensor], bias: torch.Tensor | None, center: int):
        super().__init__()
        if not 0 <= center < len(cores):
            raise ValueError(f"center must index one of the {len(cores)} local tensors, got {center}")
        self.cores = nn.ParameterList([nn.Parameter(c.detach().clone()) for c in cores])
        self.bias = None if bias is None else nn.Parameter(bias.detach().clone())
        self.center = int(center)
        w = mpo_to_matrix(list(self.cores))
        self.out_features, self.in_features = w.shape

    @classmethod
    def from_linear(cls, linear: nn.Linear, row_shape: Sequence[int], col_shape: Sequence[int], *,
                    max_bond: int | None = None, center: int | None = None) -> "MPOLinear":
        """The MPO of ``linear``'s weight (decomposed in float64, stored in the layer's dtype)."""
        if not isinstance(linear, nn.Linear):
            raise TypeError(f"expected an nn.Linear, got {type(linear).__name__}")
        m = matrix_to_mpo(linear.weight.detach().double(), row_shape, col_shape,
                          max_bond=max_bond, center=center)
        dtype = linear.weight.dtype
        return cls([c.to(dtype) for c in m.cores], linear.bias, m.center)

    @property
    def weight(self) -> torch.Tensor:
        return mpo_to_matrix(list(self.cores))

    @property
    def auxiliary(self) -> list[nn.Parameter]:
        return [c for k, c in enumerate(self.cores) if k != self.center]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(x, self.weight, self.bias)

    def to_linear(self, dtype: torch.dtype | None = None) -> nn.Linear:
        """The contracted layer: a plain ``nn.Linear`` with weight = the chain's product."""
        with torch.no_grad():
            w = mpo_to_matrix([c.to(dtype or c.dtype) for c in self.cores])
            lin = nn.Linear(self.in_features, self.out_features, bias=self.bias is not None,
                            dtype=w.dtype, device=w.device)
            lin.weight.copy_(w)
            if self.bias is not None:
                lin.bias.copy_(self.bias)
        return lin

    def extra_repr(self) -> str:
        shapes = [tuple(c.shape) for c in self.cores]
        return f"in={self.in_features}, out={self.out_features}, center={self.center}, cores={shapes}"


def mlp(sizes: Sequence[int], generator: torch.Generator, dtype: torch.dtype = torch.float32) -> nn.Sequential:
    """Linear-ReLU-...-Linear with PyTorch's default init, :math:`U(\\pm1/\\sqrt{\\text{fan-in}})` for
    weights and biases, drawn from ``generator`` (so an init is a function of the seed alone)."""
    sizes = [int(s) for s in sizes]
    if len(sizes) < 2 or any(s < 1 for s in sizes):
        raise ValueError(f"sizes must list at least two positive widths, got {sizes}")
    if not isinstance(generator, torch.Generator):
        raise TypeError("generator must be a torch.Generator")
    layers: list[nn.Module] = []
    for k, (a, b) in enumerate(zip(sizes[:-1], sizes[1:])):
        lin = nn.Linear(a, b, dtype=dtype)
        bound = 1.0 / a ** 0.5
        with torch.no_grad():
            lin.weight.copy_((torch.rand(b, a, generator=generator, dtype=torch.float64) * 2 - 1) * bound)
            lin.bias.copy_((torch.rand(b, generator=generator, dtype=torch.float64) * 2 - 1) * bound)
        layers.append(lin)
        if k < len(sizes) - 2:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


def linear_layers(model: nn.Module) -> list[nn.Module]:
    """The model's linear maps (``nn.Linear`` or :class:`MPOLinear`) in order."""
    return [m for m in model.modules() if isinstance(m, (nn.Linear, MPOLinear))]


def _replace(model: nn.Sequential, which: Sequence[int], make) -> nn.Sequential:
    if not isinstance(model, nn.Sequential):
        raise TypeError(f"model must be an nn.Sequential, got {type(model).__name__}")
    out = copy.deepcopy(model)
    positions = [i for i, m in enumerate(out) if isinstance(m, (nn.Linear, MPOLinear))]
    for w in which:
        if not 0 <= w < len(positions):
            raise ValueError(f"linear layer {w} does not exist: the model has {len(positions)}")
        out[positions[w]] = make(out[positions[w]])
    return out


def overparameterise(model: nn.Sequential, layers: Sequence[int], row_shape: Sequence[int],
                     col_shape: Sequence[int], *, max_bond: int | None = None,
                     center: int | None = None) -> nn.Sequential:
    """A copy of ``model`` whose linear layers number ``layers`` (0-based, counting linear layers
    only) are :class:`MPOLinear` at full bond (or ``max_bond``); the function is unchanged."""
    def make(lin):
        if isinstance(lin, MPOLinear):
            raise ValueError("that layer is already an MPOLinear")
        return MPOLinear.from_linear(lin, row_shape, col_shape, max_bond=max_bond, center=center)
    return _replace(model, layers, make)


def contract(model: nn.Sequential, dtype: torch.dtype | None = None) -> nn.Sequential:
    """A copy of ``model`` with every :class:`MPOLinear` contracted to a plain ``nn.Linear``."""
    n = len(linear_layers(model))
    return _replace(model, range(n),
                    lambda m: m.to_linear(dtype) if isinstance(m, MPOLinear) else copy.deepcopy(m))


def freeze_auxiliary(model: nn.Module) -> nn.Module:
    """Stop the gradient of every auxiliary tensor (in place): only central tensors and the dense
    layers train. A control: the over-parameterisation is kept in form but removed in effect."""
    for m in model.modules():
        if isinstance(m, MPOLinear):
            for c in m.auxiliary:
                c.requires_grad_(False)
    return model


def num_params(model: nn.Module, trainable_only: bool = False) -> int:
    return sum(p.numel() for p in model.parameters() if p.requires_grad or not trainable_only)


def hinton_kd_loss(student_logits: torch.Tensor, teacher_logits: torch.Tensor, labels: torch.Tensor,
                   temperature: float = 4.0, alpha: float = 0.5) -> torch.Tensor:
    """:math:`\\alpha T^2\\,\\mathrm{KL}(p_t^T\\|p_s^T)+(1-\\alpha)\\,\\mathrm{CE}` (batch mean); the
    :math:`T^2` keeps the soft term's gradient scale independent of :math:`T`."""
    if student_logits.shape != teacher_logits.shape:
        raise ValueError(f"student and teacher logits differ in shape: {tuple(student_logits.shape)} "
                         f"against {tuple(teacher_logits.shape)}")
    if not temperature > 0 or not 0.0 <= alpha <= 1.0:
        raise ValueError(f"need temperature > 0 and alpha in [0, 1], got {temperature}, {alpha}")
    log_ps = F.log_softmax(student_logits / temperature, dim=-1)
    log_pt = F.log_softmax(teacher_logits.detach() / temperature, dim=-1)
    kl = F.kl_div(log_ps, log_pt, log_target=True, reduction="batchmean")
    return alpha * temperature ** 2 * kl + (1 - alpha) * F.cross_entropy(student_logits, labels)


def teacher_targets(teacher: nn.Module, pairs: Mapping[int, int], row_shape: Sequence[int],
                    col_shape: Sequence[int], *, center: int | None = None) -> dict[int, MPO]:
    """The fixed MPO (mixed-canonical, float64 decomposition) of teacher linear layer ``pairs[l]``,
    keyed by the student layer ``l`` it constrains."""
    lins = linear_layers(teacher)
    out = {}
    for s, t in pairs.items():
        if not 0 <= t < len(lins):
            raise ValueError(f"teacher linear layer {t} does not exist: the teacher has {len(lins)}")
        w = lins[t].weight.detach().double()
        m = matrix_to_mpo(w, row_shape, col_shape, center=center)
        out[int(s)] = MPO([c.to(lins[t].weight.dtype) for c in m.cores], m.center, m.discarded)
    return out


def tensor_constraint_loss(student: nn.Module, targets: Mapping[int, MPO], *,
                           include_center: bool = False) -> torch.Tensor:
    """Mean over the paired layers of the mean MSE between the student's auxiliary tensors and the
    target MPO's (same shapes, same central index required). ``include_center=True`` also pulls the
    central tensor, i.e. the whole weight, towards the target: not OPDF, a control."""
    lins = linear_layers(student)
    total, n = 0.0, 0
    for s, target in targets.items():
        layer = lins[s]
        if not isinstance(layer, MPOLinear):
            raise ValueError(f"student linear layer {s} is not an MPOLinear; the tensor constraint "
                             f"needs the MPO form")
        if layer.center != target.center or len(layer.cores) != len(target.cores):
            raise ValueError(f"layer {s}: the student's MPO ({len(layer.cores)} tensors, center "
                             f"{layer.center}) and the target's ({len(target.cores)}, center "
                             f"{target.center}) are not comparable")
        aux = [k for k in range(len(layer.cores)) if include_center or k != layer.center]
        for k in aux:
            if layer.cores[k].shape != target.cores[k].shape:
                raise ValueError(f"layer {s}, tensor {k}: shapes {tuple(layer.cores[k].shape)} and "
                                 f"{tuple(target.cores[k].shape)} differ")
        total = total + sum(F.mse_loss(layer.cores[k], target.cores[k].to(layer.cores[k]))
                            for k in aux) / max(len(aux), 1)
        n += 1
    if n == 0:
        raise ValueError("no paired layers: targets is empty")
    return total / n


@dataclass(frozen=True)
class TrainConfig:
    """One arm's recipe. ``teacher`` logits switch on Hinton KD; ``constraint_weight`` > 0 with
    targets adds the tensor constraint."""

    epochs: int = 40
    batch_size: int = 50
    lr: float = 1e-3
    temperature: float = 4.0
    alpha: float = 0.5
    constraint_weight: float = 0.0
    constraint_center: bool = False     # also constrain the central tensor (a control, not OPDF)

    def __post_init__(self):
        for name in ("epochs", "batch_size"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{name} must be a positive int, got {v!r}")
        if not self.lr > 0 or self.constraint_weight < 0:
            raise ValueError(f"need lr > 0 and constraint_weight >= 0, got {self.lr}, "
                             f"{self.constraint_weight}")


@dataclass
class TrainHistory:
    loss: list[float] = field(default_factory=list)          # mean training loss per epoch
    constraint: list[float] = field(default_factory=list)    # mean tensor-constraint term per epoch


def train_classifier(model: nn.Module, x: torch.Tensor, y: torch.Tensor, config: TrainConfig, *,
                     seed: int, teacher_logits: torch.Tensor | None = None,
                     targets: Mapping[int, MPO] | None = None) -> TrainHistory:
    """Adam on cross-entropy, or Hinton KD when ``teacher_logits`` (one row per training example)
    are given, plus ``config.constraint_weight`` times the tensor constraint to ``targets``.

    The minibatch order is drawn from ``torch.Generator().manual_seed(seed)`` alone, so every arm
    trained with the same seed sees the same batches in the same order."""
    if x.ndim != 2 or y.shape != (x.shape[0],):
        raise ValueError(f"x must be (n, d) and y (n,), got {tuple(x.shape)} and {tuple(y.shape)}")
    if teacher_logits is not None and teacher_logits.shape[0] != x.shape[0]:
        raise ValueError(f"teacher_logits has {teacher_logits.shape[0]} rows for {x.shape[0]} examples")
    if config.constraint_weight > 0 and not targets:
        raise ValueError("constraint_weight > 0 needs targets (teacher_targets(...))")
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.Adam(params, lr=config.lr, foreach=True)
    gen = torch.Generator().manual_seed(int(seed))
    hist = TrainHistory()
    n = x.shape[0]
    model.train()
    for _ in range(config.epochs):
        order = torch.randperm(n, generator=gen).to(x.device)
        tot, tot_c, nb = 0.0, 0.0, 0
        for start in range(0, n, config.batch_size):
            idx = order[start:start + config.batch_size]
            z = model(x[idx])
            if teacher_logits is None:
                loss = F.cross_entropy(z, y[idx])
            else:
                loss = hinton_kd_loss(z, teacher_logits[idx], y[idx], config.temperature, config.alpha)
            if config.constraint_weight > 0:
                c = tensor_constraint_loss(model, targets, include_center=config.constraint_center)
                loss = loss + config.constraint_weight * c
                tot_c += float(c.detach())
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            tot += float(loss.detach())
            nb += 1
        hist.loss.append(tot / nb)
        hist.constraint.append(tot_c / nb)
    model.eval()
    return hist


@torch.no_grad()
def logits(model: nn.Module, x: torch.Tensor) -> torch.Tensor:
    model.eval()
    return model(x)


def accuracy(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> float:
    """Share of rows whose arg-max logit is the label."""
    return float((logits(model, x).argmax(-1) == y).double().mean())
