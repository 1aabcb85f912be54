r"""Train and evaluate a character-level language model on a :class:`~reprobook.data.char_corpus.CorpusSplit`.

One loop for every architecture a chapter compares, so that method and baseline differ only in the
model (and, where the method defines one, in the per-step loss):

* **data order**: batches come from one ``torch.Generator`` seeded with the run's ``seed``; two
  models trained with the same seed see exactly the same batches in the same order;
* **initialisation** is the caller's (build the model under ``torch.manual_seed(...)``, or with
  :func:`build_seeded`), so init and data order can be varied separately;
* **optimiser**: AdamW (betas 0.9, 0.95), decoupled weight decay on matrices only, linear warm-up
  then cosine decay to zero (:func:`reprobook.models.train.lr_at`), gradient-norm clipping;
* **loss**: by default cross-entropy over every position (nats per character) plus
  ``aux_weight`` times the model's auxiliary loss (a mixture of experts' balance loss), or any
  ``step_loss(model, x, y) -> (loss, logs)`` (MatFormer's joint loss over granularities).

:func:`evaluate_lm` scores a model on fixed windows (:meth:`CorpusSplit.windows`): the mean
cross-entropy in nats per character over all their positions.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field

import torch
import torch.nn.functional as F

from ..data.char_corpus import CorpusSplit
from .train import lr_at

__all__ = ["LMTrainConfig", "LMTrainResult", "train_lm", "evaluate_lm", "lm_loss", "build_seeded"]


@dataclass(frozen=True)
class LMTrainConfig:
    """Optimisation budget and schedule of a character LM run."""

    steps: int = 300
    batch_size: int = 32
    seq_len: int = 64
    lr: float = 3e-3
    warmup: int = 30
    weight_decay: float = 0.1
    grad_clip: float = 1.0
    aux_weight: float = 0.01

    def __post_init__(self):
        for name in ("steps", "batch_size", "seq_len"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{name} must be a positive int, got {v!r}")
        if not (self.lr > 0):
            raise ValueError(f"lr must be > 0, got {self.lr}")
        if self.warmup < 0 or self.weight_decay < 0 or self.grad_clip < 0 or self.aux_weight < 0:
            raise ValueError("warmup, weight_decay, grad_clip and aux_weight must be >= 0")


@dataclass
class LMTrainResult:
    """What a run produced: the per-step training loss (and any logs the loss function returned)."""

    seed: int
    config: dict
    history: list[dict] = field(default_factory=list)

    @property
    def final_train_loss(self) -> float:
        tail = self.history[-max(1, len(self.history) // 10):]
        return sum(r["loss"] for r in tail) / len(tail)

    def to_dict(self) -> dict:
        return asdict(self)


def lm_loss(model, x, y, aux_weight: float = 0.0):
    """Cross-entropy (nats per character) plus ``aux_weight`` times ``model.aux_loss()``."""
    logits = model(x)
    ce = F.cross_entropy(logits.flatten(0, 1), y.flatten())
    logs = {"ce": float(ce.detach())}
    if aux_weight and hasattr(model, "aux_loss"):
        aux = model.aux_loss()
        logs["aux"] = float(aux.detach())
        return ce + aux_weight * aux, logs
    return ce, logs


def build_seeded(fn: Callable, seed: int):
    """``fn()`` (a model constructor) with torch's global generator seeded to ``seed`` for the
    duration of the call, and restored afterwards: the same seed gives the same initial weights."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(seed))
        return fn()


def train_lm(model: torch.nn.Module, train: CorpusSplit, config: LMTrainConfig, *, seed: int,
             device="cpu", step_loss: Callable | None = None,
             on_step: Callable | None = None) -> LMTrainResult:
    """Train ``model`` in place on batches of ``train`` drawn from a generator seeded with ``seed``.

    ``step_loss(model, x, y) -> (loss, logs)`` replaces the default :func:`lm_loss` (with
    ``config.aux_weight``). ``on_step(step, model)`` is called after every optimiser step.
    """
    if not isinstance(train, CorpusSplit):
        raise TypeError(f"train must be a CorpusSplit, got {type(train).__name__}")
    if not isinstance(config, LMTrainConfig):
        raise TypeError(f"config must be an LMTrainConfig, got {type(config).__name__}")
    device = torch.device(device)
    model.to(device).train()
    gen = torch.Generator().manual_seed(int(seed))
    decay = [p for n, p in model.named_parameters() if p.ndim >= 2 and "embed" not in n]
    no_decay = [p for n, p in model.named_parameters() if not (p.ndim >= 2 and "embed" not in n)]
    # the fused kernel updates every tensor in one call (the per-tensor loop is a large share of a
    # tiny model's step); it needs floating-point parameters on a CPU or CUDA device
    fused = all(p.is_floating_point() and p.device.type in ("cpu", "cuda") for p in model.parameters())
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": config.weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}], lr=config.lr,
                            betas=(0.9, 0.95), fused=fused)
    if step_loss is None:
        def step_loss(m, x, y):
            return lm_loss(m, x, y, config.aux_weight)
    history = []
    for step in range(config.steps):
        for group in opt.param_groups:
            group["lr"] = lr_at(step, config)
        x, y = train.sample(config.batch_size, config.seq_len, gen)
        loss, logs = step_loss(model, x.to(device), y.to(device))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if config.grad_clip:
            torch.nn.utils.clip_grad_norm_(model.parameters(), config.grad_clip)
        opt.step()
        history.append({"step": step + 1, "loss": float(loss.detach()), **logs})
        if on_step is not None:
            on_step(step + 1, model)
    return LMTrainResult(seed=int(seed), config=asdict(config), history=history)


@torch.no_grad()
def evaluate_lm(model: torch.nn.Module, inputs: torch.Tensor, targets: torch.Tensor,
                batch_size: int = 64, device="cpu") -> float:
    """Mean cross-entropy (nats per character) of ``model`` over every position of the windows
    ``inputs, targets`` (``[n, T]`` each), in eval mode."""
    if inputs.shape != targets.shape or inputs.ndim != 2:
        raise ValueError(f"inputs and targets must both be [n, T], got {tuple(inputs.shape)} and "
                         f"{tuple(targets.shape)}")
    was = model.training
    model.eval()
    total, count = 0.0, 0
    try:
        for i in range(0, inputs.shape[0], batch_size):
            x = inputs[i:i + batch_size].to(device)
            y = targets[i:i + batch_size].to(device)
            logits = model(x)
            total += float(F.cross_entropy(logits.flatten(0, 1).float(), y.flatten(),
                                           reduction="sum"))
            count += y.numel()
    finally:
        model.train(was)
    return total / count
