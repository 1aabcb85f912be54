r"""Non-sparse Classifier Evolution (NsCE; Wang et al., NeurIPS 2024), as reconstructed here.

The paper diagnoses *myopia* in online continual learning: trained on one task at a time, a
softmax classifier settles on the few features that separate the current classes and its weight
rows become **sparse**, which confuses classes of different tasks that share those features. NsCE
adds to the cross-entropy on the stream (with the seen classes :math:`\mathcal S` and the head rows
:math:`w_c \in \mathbb R^d`)

.. math::

   \mathcal L = \mathrm{CE} + \gamma_{ns}\sum_{c\in\mathcal S} s(w_c)
              + \gamma_{sep}\sum_{i\ne j\in\mathcal S}
                \max\!\big(0,\ \cos(w_i, w_j) + \tfrac{1}{|\mathcal S|-1}\big)^2 ,

where :math:`s` is Hoyer's sparsity

.. math:: s(w) = \frac{\sqrt d - \lVert w\rVert_1/\lVert w\rVert_2}{\sqrt d - 1} \in [0, 1]

(0 for a vector with all entries of equal magnitude, 1 for a one-hot vector): the **non-sparse**
term, and the **maximum-separation** term, which pushes every pair of seen-class rows to an angle
at least that of the regular simplex (:math:`\cos = -1/(|\mathcal S|-1)`, the largest equal
separation of :math:`|\mathcal S|` directions). The exact form of the paper's regulariser is not
given in the sources we had; this is the reproduction notes' reconstruction.

**Targeted experience replay.** Instead of replaying every step, NsCE looks every ``replay_every``
steps at the last ``window`` predictions the model made for each class, on the stream (before each
update)
and on a forward-only *probe* of ``probe`` buffer items (charged a third of a sample pass each: a
backward pass costs about two forwards), and replays buffer items only of the classes in a
**confused pair** :math:`(i, j)`, one whose rate
:math:`\#\{y=i, \hat y=j\}/\#\{y=i\}` exceeds :math:`\tau`, with :math:`j` the wrong class; with no
confused pair it does not replay at all, so it spends compute only where the classifier errs. The
control ``targeted=False`` replays uniform buffer items at the same frequency.

**Cost.** A step costs its samples plus ``reg_cost`` sample passes for the regulariser (it touches
only the :math:`C\times d` head: in the paper's ResNet this is negligible beside one image's pass;
we charge one sample pass per step to stay on the conservative side).
"""
from __future__ import annotations

from collections import deque

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from .online_stream import OnlineLearner, head_weight

__all__ = ["hoyer_sparsity", "mean_hoyer", "nonsparse_penalty", "separation_penalty",
           "ConfusionTracker", "NsCE"]


def hoyer_sparsity(w: torch.Tensor) -> torch.Tensor:
    """Hoyer's sparsity of each row of ``w`` (``[d]`` or ``[C, d]``, ``d >= 2``); 0 for a zero row."""
    if not isinstance(w, torch.Tensor) or w.ndim not in (1, 2):
        raise ValueError(f"w must be a [d] or [C, d] tensor, got {getattr(w, 'shape', type(w))}")
    d = w.shape[-1]
    if d < 2:
        raise ValueError("Hoyer sparsity needs d >= 2 entries per row")
    l1, l2 = w.abs().sum(-1), w.norm(dim=-1)
    ratio = torch.where(l2 > 0, l1 / l2.clamp_min(1e-30), torch.full_like(l1, d ** 0.5))
    return (d ** 0.5 - ratio) / (d ** 0.5 - 1)


def mean_hoyer(W: torch.Tensor) -> float:
    """The mean Hoyer sparsity of the rows of a head ``[C, d]`` (the chapter's head-sparsity metric)."""
    return float(hoyer_sparsity(W.detach()).mean())


def _rows(W, classes):
    if not isinstance(W, torch.Tensor) or W.ndim != 2:
        raise ValueError(f"W must be a [C, d] tensor, got {getattr(W, 'shape', type(W))}")
    if classes is None:
        return W
    idx = torch.as_tensor(sorted(classes) if isinstance(classes, (set, frozenset)) else classes,
                          dtype=torch.long)
    if idx.numel() and (idx.min() < 0 or idx.max() >= W.shape[0]):
        raise ValueError(f"classes must index the {W.shape[0]} rows of W")
    return W[idx]


def nonsparse_penalty(W: torch.Tensor, classes=None) -> torch.Tensor:
    r""":math:`\sum_{c} s(w_c)` over the rows ``classes`` of ``W`` (default: all rows)."""
    Wc = _rows(W, classes)
    if Wc.shape[0] == 0:
        return W.sum() * 0.0
    return hoyer_sparsity(Wc).sum()


def separation_penalty(W: torch.Tensor, classes=None) -> torch.Tensor:
    r""":math:`\sum_{i\ne j}\max(0,\cos(w_i,w_j) + 1/(k-1))^2` over the ``k`` rows ``classes``
    (default: all rows; 0 for fewer than two)."""
    Wc = _rows(W, classes)
    k = Wc.shape[0]
    if k < 2:
        return W.sum() * 0.0
    Wn = F.normalize(Wc, dim=-1)
    # the diagonal (cos = 1) is removed by subtracting its term, which is (1 + 1/(k-1))^2 each
    hinge = F.relu(Wn @ Wn.T + 1.0 / (k - 1)).pow(2)
    return hinge.sum() - k * (1.0 + 1.0 / (k - 1)) ** 2


class ConfusionTracker:
    """The last ``window`` predictions made for items of each true class, and the classes of the
    pairs confused more often than a threshold. (A window per class, so that the rare probes of old
    classes are not pushed out by the stream of the current ones.)"""

    def __init__(self, window: int = 20):
        if isinstance(window, bool) or not isinstance(window, int) or window < 1:
            raise ValueError(f"window must be a positive int, got {window!r}")
        self.window = window
        self.preds: dict[int, deque] = {}

    def record(self, y: torch.Tensor, pred: torch.Tensor) -> None:
        if y.shape != pred.shape:
            raise ValueError(f"labels {tuple(y.shape)} and predictions {tuple(pred.shape)} differ")
        for i, j in zip(y.tolist(), pred.tolist()):
            self.preds.setdefault(i, deque(maxlen=self.window)).append(j)

    def rate(self, i: int, j: int) -> float:
        """#(y=i, pred=j)/#(y=i) in class i's window (NaN if class i has no record)."""
        q = self.preds.get(i)
        return q.count(j) / len(q) if q else float("nan")

    def confused(self, tau: float) -> set[int]:
        """Classes i and j of every pair with #(y=i, pred=j)/#(y=i) > tau, i != j."""
        out: set[int] = set()
        for i, q in self.preds.items():
            for j in set(q):
                if j != i and q.count(j) / len(q) > tau:
                    out.update((i, j))
        return out


class NsCE(OnlineLearner):
    """CE + non-sparse and maximum-separation terms on the head + targeted replay (see the module).

    ``gamma_ns``/``gamma_sep``: the two coefficients (0 switches a term off, and with both off the
    regulariser is not charged). ``targeted=False``: uniform replay at the same frequency (the
    control). ``tau``, ``window``: the confusion threshold and the prediction window."""

    name = "nsce"

    def __init__(self, model: nn.Module, *, lr: float = 0.1, buffer: int = 200,
                 replay_every: int = 10, replay_batch: int = 10, seed: int = 0,
                 gamma_ns: float = 0.1, gamma_sep: float = 0.1, targeted: bool = True,
                 tau: float = 0.1, window: int = 20, probe: int = 10, reg_cost: float = 1.0):
        if not buffer or not replay_every:
            raise ValueError("NsCE replays from a buffer: give buffer > 0 and replay_every > 0")
        super().__init__(model, lr=lr, buffer=buffer, replay_every=replay_every,
                         replay_batch=replay_batch, seed=seed)
        for name, v in (("gamma_ns", gamma_ns), ("gamma_sep", gamma_sep), ("reg_cost", reg_cost)):
            if not v >= 0:
                raise ValueError(f"{name} must be >= 0, got {v!r}")
        if not 0 <= tau < 1:
            raise ValueError(f"tau must lie in [0, 1), got {tau!r}")
        self.gamma_ns, self.gamma_sep, self.targeted = gamma_ns, gamma_sep, bool(targeted)
        if isinstance(probe, bool) or not isinstance(probe, int) or probe < 0:
            raise ValueError(f"probe must be a non-negative int, got {probe!r}")
        self.tau, self.reg_cost, self.probe = tau, reg_cost, probe
        self._probe_cost = 0.0
        self._idx_cache: tuple = (None, None)
        self.tracker = ConfusionTracker(window)
        self._rng = np.random.default_rng([seed, 7])

    def replay(self):
        if not len(self.buffer) or self.steps % self.replay_every:
            return None
        if not self.targeted:
            return self.buffer.sample(self.replay_batch)
        if self.probe:
            p = self.buffer.sample(self.probe)
            with torch.no_grad():
                self.tracker.record(p["y"], self.model(p["x"]).argmax(-1))
            self._probe_cost = len(p["y"]) / 3.0
        classes = self.tracker.confused(self.tau)
        if not classes:
            return None
        stored = self.buffer.y[:len(self.buffer)]
        pool = torch.nonzero(torch.isin(stored, torch.tensor(sorted(classes)))).flatten().numpy()
        if pool.size == 0:
            return None
        pick = torch.as_tensor(self._rng.choice(pool, size=min(self.replay_batch, pool.size),
                                                replace=False))
        return {"x": self.buffer.x[pick], "y": self.buffer.y[pick], "task": self.buffer.task[pick]}

    def step(self, x, y, task=0):
        self._probe_cost = 0.0
        cost = super().step(x, y, task)
        return cost + self._probe_cost

    def regulariser(self):
        if not self.gamma_ns and not self.gamma_sep:
            return None, 0.0
        if self._idx_cache[0] != len(self.seen_classes):       # seen classes only grow
            self._idx_cache = (len(self.seen_classes),
                               torch.tensor(sorted(self.seen_classes), dtype=torch.long))
        Wc = head_weight(self.model)[self._idx_cache[1]]
        reg = self.gamma_ns * nonsparse_penalty(Wc) + self.gamma_sep * separation_penalty(Wc)
        return reg, self.reg_cost

    def observe(self, y, logits):
        self.tracker.record(y, logits.argmax(-1))
