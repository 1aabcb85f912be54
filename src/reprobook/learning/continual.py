r"""Class-incremental continual learning: task splits, rehearsal losses (ER, DER++), a stream
trainer and the accuracy matrix with its two summaries.

**Setting.** Tasks :math:`t = 1..T` arrive one after another, each with its own classes; the learner
sees task :math:`t`'s data only while training on it, and is tested on every task so far with a
single head over *all* classes (class-incremental: it is never told the task).

**Losses** on a stream batch :math:`(x, y)` with a reservoir buffer :math:`\mathcal M`
(:class:`~reprobook.learning.reservoir.ReservoirBuffer`):

* ``finetune``: :math:`\mathrm{CE}(f(x), y)`, no memory (the lower bound: catastrophic forgetting).
* ``er`` (Experience Replay): :math:`\mathrm{CE}(f([x; x_m]), [y; y_m])` with
  :math:`(x_m, y_m) \sim \mathcal M`.
* ``derpp`` (DER++, Buzzega et al. 2020):
  :math:`\mathrm{CE}(f(x), y) + \alpha\,\lVert f(x') - z'\rVert^2 + \beta\,\mathrm{CE}(f(x''), y'')`
  with :math:`(x', z')` and :math:`(x'', y'')` two independent buffer draws and :math:`z'` the logits
  the model gave :math:`x'` when it entered the buffer (``alpha = 0`` gives ER with separate
  batches; the logit term is what DER adds).

The stream is offered to the buffer after each step (with the logits just computed, for DER++).

**Metrics.** The accuracy matrix :math:`R_{i,j}` is the test accuracy on task :math:`j` after
training on task :math:`i`. *Average accuracy* :math:`A_T = \tfrac1T\sum_j R_{T,j}`; *forgetting*
(Chaudhry et al. 2018) :math:`F_T = \tfrac1{T-1}\sum_{j<T} \max_{i<T} R_{i,j} - R_{T,j}`: how much of
its best accuracy on an old task the learner lost by the end.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from .reservoir import ReservoirBuffer

__all__ = ["METHODS", "Task", "ContinualConfig", "ContinualResult", "split_by_class",
           "continual_loss", "OPTIMIZERS", "train_continual", "accuracy_matrix_summary", "average_accuracy",
           "forgetting"]

METHODS = ("finetune", "er", "derpp")


@dataclass(frozen=True)
class Task:
    """One task's training and test data (tensors) and the classes it holds."""

    x_train: torch.Tensor
    y_train: torch.Tensor
    x_test: torch.Tensor
    y_test: torch.Tensor
    classes: tuple[int, ...]


def split_by_class(x_train, y_train, x_test, y_test,
                   classes_per_task: int | Sequence[Sequence[int]]) -> list[Task]:
    """Class-incremental tasks: consecutive groups of ``classes_per_task`` labels (in sorted order),
    or the explicit groups given. Every label must fall in exactly one group."""
    x_train, x_test = torch.as_tensor(x_train, dtype=torch.float32), torch.as_tensor(x_test, dtype=torch.float32)
    y_train, y_test = torch.as_tensor(y_train, dtype=torch.long), torch.as_tensor(y_test, dtype=torch.long)
    if x_train.shape[0] != y_train.shape[0] or x_test.shape[0] != y_test.shape[0]:
        raise ValueError("inputs and labels must have the same length (train and test)")
    labels = sorted(set(y_train.tolist()))
    if isinstance(classes_per_task, int):
        if classes_per_task < 1 or len(labels) % classes_per_task:
            raise ValueError(f"classes_per_task={classes_per_task} must divide the {len(labels)} "
                             "labels into equal groups")
        groups = [labels[i:i + classes_per_task] for i in range(0, len(labels), classes_per_task)]
    else:
        groups = [sorted(int(c) for c in g) for g in classes_per_task]
        flat = [c for g in groups for c in g]
        if sorted(flat) != labels or len(set(flat)) != len(flat):
            raise ValueError(f"the class groups {groups} must cover the labels {labels} once each")
    out = []
    for g in groups:
        tr, te = torch.isin(y_train, torch.tensor(g)), torch.isin(y_test, torch.tensor(g))
        if not te.any():
            raise ValueError(f"classes {g} have no test items")
        out.append(Task(x_train[tr], y_train[tr], x_test[te], y_test[te], tuple(g)))
    return out


@dataclass(frozen=True)
class ContinualConfig:
    """Training budget and rehearsal settings (the same for every method of a comparison)."""

    epochs: int = 1                 # passes over each task's data (1: online)
    batch: int = 32
    replay_batch: int = 32
    buffer: int = 200               # reservoir slots
    lr: float = 0.05                # SGD learning rate
    alpha: float = 0.3              # DER++ logit-matching weight
    beta: float = 0.5               # DER++ replayed-label weight

    def __post_init__(self):
        for name in ("epochs", "batch", "replay_batch", "buffer"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{name} must be a positive int, got {v!r}")
        for name in ("lr", "alpha", "beta"):
            if not getattr(self, name) >= 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)!r}")


@dataclass
class ContinualResult:
    """``R[i, j]``: accuracy on task ``j`` after training on task ``i`` (measured for every ``j``,
    tasks not yet seen included), the optimiser steps taken and the final buffer."""

    R: np.ndarray
    steps: int
    buffer: ReservoirBuffer | None = None
    history: list = field(default_factory=list)

    @property
    def average_accuracy(self) -> float:
        return average_accuracy(self.R)

    @property
    def forgetting(self) -> float:
        return forgetting(self.R)


def continual_loss(method: str, model: nn.Module, x: torch.Tensor, y: torch.Tensor,
                   buffer: ReservoirBuffer | None, cfg: ContinualConfig) -> tuple[torch.Tensor, torch.Tensor]:
    """The method's loss on a stream batch, and the model's logits on ``x`` (for the buffer)."""
    if method not in METHODS:
        raise ValueError(f"unknown continual method {method!r}; known: {METHODS}")
    replay = method != "finetune" and buffer is not None and len(buffer) > 0
    if method == "er" and replay:
        m = buffer.sample(cfg.replay_batch)
        logits_all = model(torch.cat([x, m["x"]]))
        return F.cross_entropy(logits_all, torch.cat([y, m["y"]])), logits_all[:len(x)]
    logits = model(x)
    loss = F.cross_entropy(logits, y)
    if method == "derpp" and replay:
        m1, m2 = buffer.sample(cfg.replay_batch), buffer.sample(cfg.replay_batch)
        loss = loss + cfg.alpha * F.mse_loss(model(m1["x"]), m1["logits"]) \
            + cfg.beta * F.cross_entropy(model(m2["x"]), m2["y"])
    return loss, logits


@torch.no_grad()
def _accuracy(model, x, y, batch=1024):
    was = model.training
    model.eval()
    hits = sum((model(x[i:i + batch]).argmax(-1) == y[i:i + batch]).sum().item()
               for i in range(0, len(x), batch))
    model.train(was)
    return hits / len(x)


OPTIMIZERS = ("sgd", "adam")


def train_continual(model: nn.Module, tasks: Sequence[Task], method: str, cfg: ContinualConfig,
                    *, seed: int, extra_loss: Callable | None = None,
                    optimizer: str = "sgd") -> ContinualResult:
    """Train ``model`` (in place) on ``tasks`` in order with ``method``; test on every task
    after each. ``extra_loss(model, x, y, logits) -> tensor`` is added to every step's loss (a
    method's own regulariser). ``seed`` fixes the batch order and the buffer's draws.
    ``optimizer``: plain SGD (the default) or Adam over the parameters that require gradients,
    both at learning rate ``cfg.lr``; every arm of one comparison should use the same."""
    if method not in METHODS:
        raise ValueError(f"unknown continual method {method!r}; known: {METHODS}")
    if optimizer not in OPTIMIZERS:
        raise ValueError(f"unknown optimizer {optimizer!r}; known: {OPTIMIZERS}")
    if not tasks:
        raise ValueError("no tasks to train on")
    gen = torch.Generator().manual_seed(int(seed))
    buffer = ReservoirBuffer(cfg.buffer, seed=int(seed)) if method != "finetune" else None
    if optimizer == "sgd":
        opt = torch.optim.SGD(model.parameters(), lr=cfg.lr)
    else:
        opt = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=cfg.lr)
    T = len(tasks)
    R = np.full((T, T), np.nan)
    steps = 0
    model.train()
    for i, task in enumerate(tasks):
        n = len(task.x_train)
        for _ in range(cfg.epochs):
            order = torch.randperm(n, generator=gen)
            for s in range(0, n, cfg.batch):
                idx = order[s:s + cfg.batch]
                x, y = task.x_train[idx], task.y_train[idx]
                loss, logits = continual_loss(method, model, x, y, buffer, cfg)
                if extra_loss is not None:
                    loss = loss + extra_loss(model, x, y, logits)
                opt.zero_grad()
                loss.backward()
                opt.step()
                steps += 1
                if buffer is not None:
                    buffer.add(x, y, logits.detach() if method == "derpp" else None, task=i)
        R[i] = [_accuracy(model, t.x_test, t.y_test) for t in tasks]
    return ContinualResult(R=R, steps=steps, buffer=buffer)


def _check_R(R) -> np.ndarray:
    R = np.asarray(R, dtype=float)
    if R.ndim != 2 or R.shape[0] != R.shape[1] or R.shape[0] < 1:
        raise ValueError(f"the accuracy matrix must be square [T, T], got shape {R.shape}")
    return R


def average_accuracy(R) -> float:
    """:math:`A_T`: mean accuracy over all tasks after the last one."""
    return float(_check_R(R)[-1].mean())


def forgetting(R) -> float:
    """:math:`F_T`: mean over old tasks of (best accuracy before the end - final accuracy)."""
    R = _check_R(R)
    T = R.shape[0]
    if T < 2:
        raise ValueError("forgetting needs at least two tasks")
    return float(np.mean([R[:T - 1, j].max() - R[T - 1, j] for j in range(T - 1)]))


def accuracy_matrix_summary(R) -> dict[str, float]:
    """Average accuracy and forgetting of one run."""
    return {"average_accuracy": average_accuracy(R), "forgetting": forgetting(R)}
