r"""Online continual learning under a throughput budget: the stream, its cost model, the plain
learners (CE, ER, throttled ER) and a synthetic stream with a colour shortcut.

**The stream.** Tasks :math:`t = 1..T` (class-incremental, :class:`~reprobook.learning.continual.Task`)
are shuffled within each task and cut into batches of :math:`b` samples; batch :math:`j` arrives at
time :math:`j` (the time unit is one batch arrival, i.e. :math:`b` samples). Data never waits.

**The cost model** (the paper's "throughput"). A learner can compute :math:`\kappa` *sample passes*
(one sample's forward and backward pass through the model) per time unit. A step on a batch costs
:math:`c` passes: the :math:`b` stream samples, plus any replayed samples, plus the cost its
regulariser declares. A step that starts at time :math:`s` ends at :math:`s + c/\kappa`. When the
learner is free at time :math:`\tau`, it takes the **newest** batch that has arrived,
:math:`j = \lfloor\tau\rfloor`, if it has not had it yet, and every batch between the last one it
took and :math:`j` is lost (the paper's sampling failure: it is neither trained on nor offered to the
buffer); otherwise it waits for the next arrival. A learner whose cost per step stays below
:math:`\kappa` therefore processes the whole stream; ER, which doubles every step, keeps only about
:math:`\kappa/c` of it. The *stream share processed* is the batches taken over the batches sent.

**Anytime evaluation.** Every ``eval_every`` time units the model is tested on the test items of
every class that has appeared in the stream so far; the mean of these accuracies is the area under
the accuracy curve (AAUC, as in Koh et al. 2022 and the NsCE paper). The model tested at time
:math:`e` is the one after every step *started* before :math:`e` (the delay of the step in
progress is ignored: at most one step). At each task boundary (and at the end) the accuracy on every
task's test set gives a row of the accuracy matrix :math:`R` of
:mod:`reprobook.learning.continual`.

**The learners** share one class, :class:`OnlineLearner`, a linear-softmax head (or any
``nn.Module``) trained by SGD on :math:`\mathrm{CE}(f([x; x_m]), [y; y_m])`:

* CE (``buffer=0``): the stream batch alone, single pass;
* ER (``replay_every=1``): a reservoir-buffer batch (:class:`~reprobook.learning.reservoir.ReservoirBuffer`)
  joins every step;
* throttled ER (``replay_every=k``): the buffer batch joins one step in :math:`k`, so the average
  cost stays under the budget.

**The colour-shortcut stream** (:func:`colour_shortcut_tasks`, the "banana/cucumber" example of the
paper in vectors). Class :math:`c` has a shape mean :math:`\mu_c \sim \mathcal N(0, \sigma_s^2
I_{d_s})` and a colour :math:`k(c) = c \bmod K`; a sample is
:math:`x = [\mu_c + \varepsilon_s,\; a\,e_{k(c)} + \varepsilon_k,\; \varepsilon_n]` with unit
Gaussian noise everywhere. Within a task the classes have different colours, so colour alone solves
the task, but colours repeat across tasks, so only the (weak, dense) shape directions separate all
classes: a learner that learns each task locally finds the sparse colour solution (myopia).
"""
from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from .continual import Task
from .reservoir import ReservoirBuffer

__all__ = ["colour_shortcut_tasks", "stream_batches", "OnlineLearner", "OnlineResult",
           "run_online", "head_weight"]


def _posint(name, v, zero_ok=False):
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < (0 if zero_ok else 1):
        raise ValueError(f"{name} must be a {'non-negative' if zero_ok else 'positive'} int, got {v!r}")
    return int(v)


def colour_shortcut_tasks(rng: np.random.Generator, *, n_tasks: int = 5, classes_per_task: int = 2,
                          per_task: int = 1000, test_per_class: int = 100, shape_dims: int = 16,
                          shape_scale: float = 0.35, n_colours: int = 3,
                          colour_strength: float = 2.5, noise_dims: int = 13
                          ) -> tuple[list[Task], dict]:
    """Class-incremental tasks with a colour shortcut (see the module). Returns the tasks and the
    ground truth: ``{"means": (C, shape_dims), "colour": (C,), "slices": {"shape", "colour",
    "noise"}}``."""
    if not isinstance(rng, np.random.Generator):
        raise TypeError("rng must be a numpy Generator (reprobook.rng(seed, stream))")
    for name, v in (("n_tasks", n_tasks), ("classes_per_task", classes_per_task),
                    ("per_task", per_task), ("test_per_class", test_per_class),
                    ("shape_dims", shape_dims), ("n_colours", n_colours)):
        _posint(name, v)
    _posint("noise_dims", noise_dims, zero_ok=True)
    if classes_per_task > n_colours:
        raise ValueError(f"classes_per_task={classes_per_task} exceeds n_colours={n_colours}: two "
                         "classes of a task would share a colour, so colour would not solve it")
    if per_task < classes_per_task:
        raise ValueError(f"per_task={per_task} gives some class no training sample")
    if not shape_scale >= 0 or not colour_strength >= 0:
        raise ValueError("shape_scale and colour_strength must be >= 0")
    C = n_tasks * classes_per_task
    means = rng.normal(0.0, shape_scale, (C, shape_dims))
    colour = np.arange(C) % n_colours
    d = shape_dims + n_colours + noise_dims

    def draw(labels):
        x = rng.normal(0.0, 1.0, (len(labels), d))
        x[:, :shape_dims] += means[labels]
        x[np.arange(len(labels)), shape_dims + colour[labels]] += colour_strength
        return x

    tasks = []
    for t in range(n_tasks):
        cls = np.arange(t * classes_per_task, (t + 1) * classes_per_task)
        ytr = cls[np.arange(per_task) % classes_per_task]
        yte = np.repeat(cls, test_per_class)
        tasks.append(Task(torch.tensor(draw(ytr), dtype=torch.float32), torch.tensor(ytr),
                          torch.tensor(draw(yte), dtype=torch.float32), torch.tensor(yte),
                          tuple(int(c) for c in cls)))
    truth = {"means": means, "colour": colour,
             "slices": {"shape": slice(0, shape_dims),
                        "colour": slice(shape_dims, shape_dims + n_colours),
                        "noise": slice(shape_dims + n_colours, d)}}
    return tasks, truth


def stream_batches(tasks: Sequence[Task], batch: int, rng: np.random.Generator
                   ) -> list[tuple[torch.Tensor, torch.Tensor, int]]:
    """The stream: each task's training items in a random order, cut into batches of ``batch``
    (a task's last batch may be smaller; no batch mixes two tasks), tasks in order."""
    _posint("batch", batch)
    if not tasks:
        raise ValueError("no tasks to stream")
    out = []
    for i, t in enumerate(tasks):
        order = torch.as_tensor(rng.permutation(len(t.x_train)))
        for s in range(0, len(order), batch):
            idx = order[s:s + batch]
            out.append((t.x_train[idx], t.y_train[idx], i))
    return out


def head_weight(model: nn.Module) -> torch.Tensor:
    """The classifier's weight matrix ``[C, d]``: the model itself if it is an ``nn.Linear``, else
    its last ``nn.Linear``."""
    lin = [m for m in model.modules() if isinstance(m, nn.Linear)]
    if not lin:
        raise ValueError("the model has no nn.Linear classifier head")
    return lin[-1].weight


class OnlineLearner:
    """CE, ER or throttled ER on a stream (see the module), by SGD.

    ``buffer``: reservoir slots (0: no memory, plain CE). ``replay_every``: a buffer batch of
    ``replay_batch`` items joins every ``replay_every``-th step (0: never). ``seed`` drives the
    buffer's draws. :meth:`step` returns the step's cost in sample passes."""

    name = "online"

    def __init__(self, model: nn.Module, *, lr: float = 0.1, buffer: int = 0, replay_every: int = 0,
                 replay_batch: int = 10, seed: int = 0):
        if not lr > 0:
            raise ValueError(f"lr must be > 0, got {lr!r}")
        _posint("buffer", buffer, zero_ok=True)
        _posint("replay_every", replay_every, zero_ok=True)
        _posint("replay_batch", replay_batch)
        if replay_every and not buffer:
            raise ValueError("replay_every > 0 needs a buffer (buffer > 0)")
        self.model = model
        self.lr = float(lr)
        self.params = [p for p in model.parameters() if p.requires_grad]
        self.buffer = ReservoirBuffer(buffer, seed=seed) if buffer else None
        self.replay_every, self.replay_batch = replay_every, replay_batch
        self.steps = 0
        self.replays = 0                  # steps on which buffer items were replayed
        self.seen_classes: set[int] = set()

    # hooks a method overrides -------------------------------------------------------------
    def replay(self) -> dict | None:
        """The buffer batch to join this step, or None."""
        if self.buffer is None or not self.replay_every or not len(self.buffer) \
                or self.steps % self.replay_every:
            return None
        return self.buffer.sample(self.replay_batch)

    def regulariser(self) -> tuple[torch.Tensor | None, float]:
        """(extra loss, its cost in sample passes) added to every step."""
        return None, 0.0

    def observe(self, y: torch.Tensor, logits: torch.Tensor) -> None:
        """Sees the stream labels and the logits the model gave them before the update."""

    # ---------------------------------------------------------------------------------------
    def step(self, x: torch.Tensor, y: torch.Tensor, task: int = 0) -> float:
        self.seen_classes.update(int(c) for c in y.unique())
        m = self.replay()
        xb, yb = (x, y) if m is None else (torch.cat([x, m["x"]]), torch.cat([y, m["y"]]))
        logits = self.model(xb)
        loss = F.cross_entropy(logits, yb)
        extra, extra_cost = self.regulariser()
        if extra is not None:
            loss = loss + extra
        # plain SGD by hand: torch.optim's per-step bookkeeping costs more than these tiny updates
        grads = torch.autograd.grad(loss, self.params)
        with torch.no_grad():
            for p, g in zip(self.params, grads):
                p.sub_(self.lr * g)
        self.observe(y, logits[:len(x)].detach())
        if self.buffer is not None:
            self.buffer.add(x, y, task=task)
        self.steps += 1
        self.replays += m is not None
        return float(len(xb)) + float(extra_cost)


@dataclass
class OnlineResult:
    """What one run of :func:`run_online` measured."""

    R: np.ndarray                    # [T, T] accuracy matrix at task ends
    curve_t: np.ndarray              # anytime-evaluation times (batch arrivals)
    curve_acc: np.ndarray            # accuracy on the classes seen by then
    taken: np.ndarray                # bool per stream batch: trained on
    costs: np.ndarray                # cost (sample passes) of every step taken
    heads: np.ndarray                # [T, C, d] the classifier's weight rows at each task end
    seen: list                       # [T] sorted classes seen by each task end
    final_accuracy: float            # on every class's test items after the stream
    wall_per_step: float             # seconds (information only: not the cost model)
    history: dict = field(default_factory=dict)

    @property
    def processed_share(self) -> float:
        return float(self.taken.mean())

    @property
    def aauc(self) -> float:
        return float(self.curve_acc.mean()) if len(self.curve_acc) else float("nan")


@torch.no_grad()
def _acc(model, x, y):
    return float((model(x).argmax(-1) == y).float().mean()) if len(x) else float("nan")


def run_online(learner: OnlineLearner, tasks: Sequence[Task], *, batch: int, capacity: float,
               rng: np.random.Generator, eval_every: int = 5) -> OnlineResult:
    """Stream ``tasks`` to ``learner`` under the cost model of the module.

    ``capacity``: sample passes per time unit (one time unit = one batch of ``batch`` samples
    arriving; ``capacity = batch`` lets a plain CE learner exactly keep up). ``rng`` orders the
    stream. ``eval_every``: time units between anytime evaluations. The head's weights and the
    classes seen so far are kept at each task end (for sparsity and separation diagnostics)."""
    if not capacity > 0:
        raise ValueError(f"capacity must be > 0 sample passes per time unit, got {capacity!r}")
    _posint("eval_every", eval_every)
    batches = stream_batches(tasks, batch, rng)
    n, T = len(batches), len(tasks)
    task_of = np.array([b[2] for b in batches])
    first_batch = [int(np.flatnonzero(task_of == i)[0]) for i in range(T)]
    x_all = torch.cat([t.x_test for t in tasks])
    y_all = torch.cat([t.y_test for t in tasks])
    te_task = torch.cat([torch.full((len(t.y_test),), i) for i, t in enumerate(tasks)])

    R = np.full((T, T), np.nan)
    heads, seen = [], []
    taken = np.zeros(n, dtype=bool)
    costs, curve_t, curve_acc = [], [], []
    next_eval = eval_every
    model = learner.model

    def task_end(i):
        R[i] = [_acc(model, t.x_test, t.y_test) for t in tasks]
        heads.append(head_weight(model).detach().clone().numpy())
        seen.append(sorted(learner.seen_classes))

    def evaluate_until(tau):
        nonlocal next_eval
        while next_eval <= tau:
            arrived = int(np.searchsorted(first_batch, math.floor(next_eval), side="right"))
            keep = te_task < arrived
            curve_t.append(next_eval)
            curve_acc.append(_acc(model, x_all[keep], y_all[keep]))
            next_eval += eval_every

    free, last, cur_task, wall = 0.0, -1, 0, 0.0
    while True:
        j = math.floor(free)
        if j <= last:
            j = last + 1
        if j >= n:
            break
        start = max(free, float(j))
        evaluate_until(start)
        while task_of[j] > cur_task:        # boundary crossed (possibly by skipping)
            task_end(cur_task)
            cur_task += 1
        x, y, ti = batches[j]
        t0 = time.perf_counter()
        cost = learner.step(x, y, ti)
        wall += time.perf_counter() - t0
        taken[j] = True
        costs.append(cost)
        free, last = start + cost / capacity, j
    evaluate_until(float(n))
    while cur_task < T:
        task_end(cur_task)
        cur_task += 1
    return OnlineResult(R=R, curve_t=np.array(curve_t, dtype=float), curve_acc=np.array(curve_acc),
                        taken=taken, costs=np.array(costs), heads=np.stack(heads), seen=seen,
                        final_accuracy=_acc(model, x_all, y_all),
                        wall_per_step=wall / max(1, len(costs)))
