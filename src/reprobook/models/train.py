"""Train and evaluate a :class:`~reprobook.models.linear_lm.LinearLM` on MQAR.

The loss is cross-entropy on the query positions only (every other target is ``IGNORE_INDEX``);
the metric is accuracy on those positions over a held-out batch. Training batches are drawn fresh
from one ``torch.Generator`` per run (an endless stream, as in Zoology's large generated sets), so
two mixers trained with the same seed see exactly the same batches and are scored on the same
held-out set. AdamW, linear warm-up then cosine decay to zero, gradient clipping.

Example::

    from reprobook.models.train import MQARTask, TrainConfig, run_mqar
    task = MQARTask(seq_len=64, num_kv_pairs=8, vocab_size=128)
    res = run_mqar("deltanet", task, TrainConfig(steps=300), seed=0)
    res.accuracy, res.history[-1]
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

import torch
import torch.nn.functional as F

from ..data.mqar import IGNORE_INDEX, MQARBatch, check_mqar_config, make_mqar
from .linear_lm import LinearLM

__all__ = ["MQARTask", "TrainConfig", "TrainResult", "lr_at", "evaluate", "held_out_set",
           "lookup_accuracy", "train_mqar", "run_mqar"]


@dataclass(frozen=True)
class MQARTask:
    """The MQAR task sizes (see :func:`reprobook.data.mqar.make_mqar`)."""

    seq_len: int = 64
    num_kv_pairs: int = 4
    vocab_size: int = 256
    power_a: float | None = None
    random_non_queries: bool = True

    def __post_init__(self):
        check_mqar_config(self.seq_len, self.num_kv_pairs, self.vocab_size)

    def sample(self, n: int, generator: torch.Generator) -> MQARBatch:
        return make_mqar(n, self.seq_len, self.num_kv_pairs, self.vocab_size,
                         power_a=self.power_a, random_non_queries=self.random_non_queries,
                         generator=generator)


@dataclass(frozen=True)
class TrainConfig:
    """Optimisation budget and schedule."""

    steps: int = 200
    batch_size: int = 64
    lr: float = 2e-3
    warmup: int = 20
    weight_decay: float = 0.1
    grad_clip: float = 1.0
    eval_examples: int = 256
    eval_every: int = 0          # 0: evaluate only at the end
    eval_at_start: bool = False  # also score the untrained model (``TrainResult.initial_accuracy``)

    def __post_init__(self):
        for name in ("steps", "batch_size", "eval_examples"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{name} must be a positive int, got {v!r}")
        if not (self.lr > 0):
            raise ValueError(f"lr must be > 0, got {self.lr}")
        if self.warmup < 0 or self.eval_every < 0:
            raise ValueError("warmup and eval_every must be >= 0")


@dataclass
class TrainResult:
    """What a run produced: final held-out accuracy, a history of (step, loss, accuracy), and,
    with ``TrainConfig(eval_at_start=True)``, the untrained model's accuracy on the same held-out
    set (a free control: the same model and data with the training removed)."""

    mixer: str
    seed: int
    accuracy: float
    num_parameters: int
    history: list[dict] = field(default_factory=list)
    initial_accuracy: float | None = None

    def to_dict(self) -> dict:
        return asdict(self)


def lr_at(step: int, cfg: TrainConfig) -> float:
    """Learning rate at ``step`` (0-based): linear warm-up to ``cfg.lr``, then cosine to 0."""
    if step < cfg.warmup:
        return cfg.lr * (step + 1) / cfg.warmup
    span = max(1, cfg.steps - cfg.warmup)
    return 0.5 * cfg.lr * (1 + math.cos(math.pi * min(1.0, (step - cfg.warmup) / span)))


@torch.no_grad()
def evaluate(model: torch.nn.Module, batch: MQARBatch, device="cpu", batch_size: int = 256) -> float:
    """Accuracy of ``model`` on the query positions of ``batch``."""
    was_training = model.training
    model.eval()
    right = total = 0
    for i in range(0, batch.inputs.shape[0], batch_size):
        x = batch.inputs[i:i + batch_size].to(device)
        y = batch.targets[i:i + batch_size].to(device)
        pred = model(x).argmax(-1)
        mask = y != IGNORE_INDEX
        right += int(((pred == y) & mask).sum())
        total += int(mask.sum())
    model.train(was_training)
    return right / max(total, 1)


def held_out_set(task: MQARTask, config: TrainConfig, seed: int) -> MQARBatch:
    """The held-out batch a run with ``seed`` is scored on (its own stream, seed ``2**31 - 1 - seed``),
    the same for every model trained with that seed."""
    return task.sample(config.eval_examples, torch.Generator().manual_seed(2**31 - 1 - int(seed)))


def lookup_accuracy(batch: MQARBatch) -> float:
    """Accuracy of an exact lookup on ``batch``: at each query, answer with the token that followed
    the *first* earlier occurrence of the query's key (in MQAR, the key's place in the context).

    A perfect associative memory with no parameters: an oracle, used as a positive control (what a
    model that recalls every pair scores on the same held-out set).
    """
    x, y = batch.inputs, batch.targets
    L = x.shape[1]
    same = x[:, :, None] == x[:, None, :]                            # [N, j, p]: x_j == x_p
    earlier = torch.ones(L, L, dtype=torch.bool).triu(1)             # j < p
    hit = same & earlier
    first = hit.int().argmax(1)                                      # [N, p]: first such j (0 if none)
    nxt = x.gather(1, (first + 1).clamp(max=L - 1))
    pred = torch.where(hit.any(1), nxt, torch.zeros_like(nxt))
    mask = y != IGNORE_INDEX
    return float(((pred == y) & mask).sum()) / max(int(mask.sum()), 1)


def train_mqar(model: torch.nn.Module, task: MQARTask, config: TrainConfig, *, seed: int,
               device="cpu", mixer: str = "?") -> TrainResult:
    """Train ``model`` in place on MQAR batches drawn from a generator seeded with ``seed``.

    The held-out batch comes from a separate stream (seed ``2**31 - 1 - seed``), the same for any
    model trained with that seed.
    """
    device = torch.device(device)
    model.to(device).train()
    g_train = torch.Generator().manual_seed(int(seed))
    held_out = held_out_set(task, config, seed)
    decay = [p for n, p in model.named_parameters() if p.ndim >= 2 and "embed" not in n]
    no_decay = [p for n, p in model.named_parameters() if not (p.ndim >= 2 and "embed" not in n)]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": config.weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}], lr=config.lr,
                            betas=(0.9, 0.98))
    history = []
    initial = evaluate(model, held_out, device) if config.eval_at_start else None
    for step in range(config.steps):
        for group in opt.param_groups:
            group["lr"] = lr_at(step, config)
        batch = task.sample(config.batch_size, g_train)
        logits = model(batch.inputs.to(device))
        loss = F.cross_entropy(logits.flatten(0, 1), batch.targets.to(device).flatten(),
                               ignore_index=IGNORE_INDEX)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if config.grad_clip:
            torch.nn.utils.clip_grad_norm_(model.parameters(), config.grad_clip)
        opt.step()
        row = {"step": step + 1, "loss": float(loss.detach())}
        if config.eval_every and (step + 1) % config.eval_every == 0 and step + 1 < config.steps:
            row["accuracy"] = evaluate(model, held_out, device)
        history.append(row)
    acc = evaluate(model, held_out, device)
    history[-1]["accuracy"] = acc
    n_params = sum(p.numel() for p in model.parameters())
    return TrainResult(mixer=mixer, seed=int(seed), accuracy=acc, num_parameters=n_params,
                       history=history, initial_accuracy=initial)


def run_mqar(mixer: str, task: MQARTask, config: TrainConfig, *, seed: int,
             model_kwargs: dict | None = None, device="cpu") -> TrainResult:
    """Seed everything with ``seed`` (:func:`reprobook.seed_everything`), build a ``LinearLM``
    with ``mixer`` for ``task.vocab_size``, train it with ``config`` and return the result."""
    from ..seeding import seed_everything

    seed_everything(int(seed))
    model = LinearLM(task.vocab_size, mixer=mixer, **(model_kwargs or {}))
    return train_mqar(model, task, config, seed=seed, device=device, mixer=mixer)
