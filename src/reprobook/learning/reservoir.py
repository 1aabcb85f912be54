r"""A replay buffer filled by reservoir sampling, the memory of rehearsal-based continual learners.

**Reservoir sampling** (Vitter 1985, Algorithm R) keeps a uniform sample of a stream of unknown
length in a fixed memory of :math:`M` slots: the :math:`n`-th item (1-based) goes in directly while
:math:`n \le M`; afterwards it replaces a uniformly chosen slot with probability :math:`M/n`. By
induction every item seen so far is in the buffer with the same probability,

.. math:: \Pr[\text{item } i \text{ in buffer after } n \text{ items}] = \min(1, M/n),

so the buffer is an unbiased picture of everything streamed, whichever task it came from, without
knowing task boundaries. Experience Replay (ER) and Dark Experience Replay (DER, DER++; Buzzega et
al. 2020) both rehearse from it; DER also stores the logits the model gave an item when it arrived,
which :meth:`ReservoirBuffer.add` keeps beside the inputs and labels.
"""
from __future__ import annotations

import numpy as np
import torch

__all__ = ["ReservoirBuffer"]


class ReservoirBuffer:
    """``capacity`` slots of (input, label, logits, task), filled by reservoir sampling.

    ``seed`` drives both the replacement draws and :meth:`sample`, so a run is reproducible."""

    def __init__(self, capacity: int, seed: int = 0):
        if isinstance(capacity, bool) or not isinstance(capacity, int) or capacity < 1:
            raise ValueError(f"buffer capacity must be a positive int, got {capacity!r}")
        self.capacity = capacity
        self.seen = 0                      # stream items offered so far
        self._rng = np.random.default_rng(seed)
        self.x: torch.Tensor | None = None
        self.y: torch.Tensor | None = None
        self.logits: torch.Tensor | None = None
        self.task: torch.Tensor | None = None
        self._filled = 0

    def __len__(self) -> int:
        return self._filled

    def _allocate(self, x, y, logits):
        self.x = torch.zeros((self.capacity, *x.shape[1:]), dtype=x.dtype)
        self.y = torch.zeros(self.capacity, dtype=y.dtype)
        self.task = torch.zeros(self.capacity, dtype=torch.long)
        if logits is not None:
            self.logits = torch.zeros((self.capacity, *logits.shape[1:]), dtype=logits.dtype)

    def add(self, x: torch.Tensor, y: torch.Tensor, logits: torch.Tensor | None = None,
            task: int = 0) -> int:
        """Offer a batch (``x: [B, ...]``, ``y: [B]``, optional ``logits: [B, C]``) to the buffer,
        item by item; returns how many were stored. Stored tensors are detached copies."""
        if not isinstance(x, torch.Tensor) or not isinstance(y, torch.Tensor) or y.ndim != 1 \
                or x.shape[0] != y.shape[0]:
            raise ValueError("add needs x [B, ...] and y [B] tensors with the same B; got "
                             f"{getattr(x, 'shape', x)} and {getattr(y, 'shape', y)}")
        if logits is not None and (logits.ndim != 2 or logits.shape[0] != x.shape[0]):
            raise ValueError(f"logits must be [B, C] with B = {x.shape[0]}, got {tuple(logits.shape)}")
        if self.x is None:
            self._allocate(x, y, logits)
        elif tuple(x.shape[1:]) != tuple(self.x.shape[1:]):
            raise ValueError(f"items of shape {tuple(x.shape[1:])} do not fit a buffer of "
                             f"{tuple(self.x.shape[1:])}")
        if (self.logits is None) != (logits is None):
            raise ValueError("give logits with every batch or with none (DER needs them for all)")
        stored = 0
        x, y = x.detach(), y.detach()
        for i in range(x.shape[0]):
            self.seen += 1
            if self.seen <= self.capacity:
                slot = self.seen - 1
                self._filled += 1
            else:
                j = int(self._rng.integers(self.seen))   # uniform on 0..seen-1
                if j >= self.capacity:
                    continue
                slot = j
            self.x[slot], self.y[slot], self.task[slot] = x[i], y[i], task
            if logits is not None:
                self.logits[slot] = logits[i].detach()
            stored += 1
        return stored

    def sample(self, n: int) -> dict[str, torch.Tensor]:
        """``n`` stored items drawn uniformly without replacement (all of them if fewer are
        stored): a dict with ``x``, ``y``, ``task`` and, if stored, ``logits``."""
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ValueError(f"sample size must be a positive int, got {n!r}")
        if not self._filled:
            raise ValueError("the buffer is empty: add items before sampling")
        idx = torch.as_tensor(self._rng.choice(self._filled, size=min(n, self._filled),
                                               replace=False))
        out = {"x": self.x[idx], "y": self.y[idx], "task": self.task[idx]}
        if self.logits is not None:
            out["logits"] = self.logits[idx]
        return out
