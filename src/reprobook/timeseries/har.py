r"""Window classification for activity recognition: two real offline tasks and one training loop.

**Tasks** (each returns :class:`HARTask`, windows ``[n, C, T]`` float32 and integer labels):

* :func:`basic_motions_task` -- aeon's BasicMotions (smartwatch accelerometer + gyroscope, 6
  channels, 100 samples at 10 Hz, 4 activities: standing, walking, running, badminton), its own
  40/40 train/test split, every channel standardised with the *training* set's mean and deviation.
* :func:`daphnet_placement_task` -- **on-body sensor placement** from the Daphnet recording
  S06R02E0 (aeon's copy, 64 Hz): the recording carries no activity labels (its freezing-of-gait
  column is empty), but each of its three tri-axial accelerometers sits at a known place (ankle,
  thigh, trunk). A window of one sensor's three axes is labelled with the place it was worn; the
  three sensors' windows at the same instants make the three classes, so the classes are balanced
  and share the wearer's activity. Each window is standardised on its own, axis by axis, so the
  gravity offset and the overall loudness (which would give the placement away) are removed and
  the network must read the shape of the motion. The split is chronological (the first
  ``train_share`` of the recording for training, a gap of one window, the rest for testing), so
  no test sample lies in a training window.

**Training** (:func:`fit`): Adam with weight decay, cross-entropy, mini-batches in an order drawn
from a ``torch.Generator`` seeded with the run's seed, a fixed number of epochs, the last epoch's
weights kept (no selection on the test set). :func:`accuracy` scores a model in eval mode.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

__all__ = ["HARTask", "basic_motions_task", "daphnet_placement_task", "PLACEMENTS", "fit",
           "accuracy", "build_seeded"]

PLACEMENTS = ("ankle", "leg", "trunk")


@dataclass
class HARTask:
    """A window-classification task: ``x_* [n, C, T]`` float32, ``y_*`` int64 labels."""
    name: str
    x_train: torch.Tensor
    y_train: torch.Tensor
    x_test: torch.Tensor
    y_test: torch.Tensor
    classes: tuple[str, ...]

    def __post_init__(self):
        for s in ("train", "test"):
            x, y = getattr(self, f"x_{s}"), getattr(self, f"y_{s}")
            if x.dim() != 3 or y.dim() != 1 or len(x) != len(y):
                raise ValueError(f"{s} split needs x [n, C, T] and y [n], got {tuple(x.shape)} "
                                 f"and {tuple(y.shape)}")

    @property
    def n_channels(self) -> int:
        return self.x_train.shape[1]

    @property
    def length(self) -> int:
        return self.x_train.shape[2]

    @property
    def n_classes(self) -> int:
        return len(self.classes)


def basic_motions_task() -> HARTask:
    """aeon's BasicMotions with its own train/test split, standardised per channel on the train set."""
    from reprobook.timeseries.loaders import basic_motions

    xtr, ytr = basic_motions("train")
    xte, yte = basic_motions("test")
    mu, sd = xtr.mean((0, 2), keepdims=True), xtr.std((0, 2), keepdims=True) + 1e-8
    t = lambda a: torch.tensor(a, dtype=torch.float32)  # noqa: E731
    return HARTask("basic-motions", t((xtr - mu) / sd), torch.tensor(ytr), t((xte - mu) / sd),
                   torch.tensor(yte), ("badminton", "running", "standing", "walking"))


def _standardise_windows(w: np.ndarray) -> np.ndarray:
    """z-score every window's every axis over time (``w [n, C, T]``)."""
    return (w - w.mean(-1, keepdims=True)) / (w.std(-1, keepdims=True) + 1e-6)


def daphnet_placement_task(window: int = 64, stride: int = 32, train_share: float = 0.7,
                           values: np.ndarray | None = None) -> HARTask:
    """Sensor-placement windows from Daphnet S06R02E0 (see the module). ``values [T, 9]`` overrides
    the recording (axes in the loader's order: ankle xyz, leg xyz, trunk xyz), for tests."""
    if isinstance(window, bool) or not isinstance(window, int) or window < 2:
        raise ValueError(f"window must be an int >= 2, got {window!r}")
    if isinstance(stride, bool) or not isinstance(stride, int) or stride < 1:
        raise ValueError(f"stride must be a positive int, got {stride!r}")
    if not 0.0 < train_share < 1.0:
        raise ValueError(f"train_share must lie in (0, 1), got {train_share!r}")
    if values is None:
        from reprobook.timeseries.loaders import daphnet
        values = daphnet().values
    values = np.asarray(values, dtype=np.float64)
    if values.ndim != 2 or values.shape[1] != 9:
        raise ValueError(f"Daphnet values must be [T, 9], got shape {values.shape}")
    cut = int(train_share * len(values))
    parts = {"train": values[:cut], "test": values[cut + window:]}
    out = {}
    for name, v in parts.items():
        starts = np.arange(0, len(v) - window + 1, stride)
        if len(starts) == 0:
            raise ValueError(f"the {name} part ({len(v)} samples) holds no window of {window}")
        w = np.stack([v[s:s + window].T for s in starts])          # [n, 9, T]
        xs = [w[:, 3 * p:3 * p + 3] for p in range(3)]                 # three [n, 3, T]
        x = _standardise_windows(np.concatenate(xs))
        y = np.repeat(np.arange(3), len(starts))
        out[name] = (torch.tensor(x, dtype=torch.float32), torch.tensor(y, dtype=torch.int64))
    return HARTask("daphnet-placement", *out["train"], *out["test"], PLACEMENTS)


def build_seeded(fn, seed: int):
    """``fn()`` with torch's global generator seeded to ``seed`` during the call (and restored):
    the same seed gives the same initial weights."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(seed))
        return fn()


def fit(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor, *, epochs: int, seed: int,
        batch_size: int = 32, lr: float = 1e-3, weight_decay: float = 1e-4,
        device="cpu") -> list[float]:
    """Train ``model`` in place (see the module); returns the mean training loss of every epoch."""
    if isinstance(epochs, bool) or not isinstance(epochs, int) or epochs < 0:
        raise ValueError(f"epochs must be an int >= 0, got {epochs!r}")
    if len(x) != len(y) or len(x) == 0:
        raise ValueError(f"x and y must be non-empty and of equal length, got {len(x)} and {len(y)}")
    model.to(device).train()
    opt = torch.optim.Adam(model.parameters(), lr=lr, weight_decay=weight_decay)
    gen = torch.Generator().manual_seed(int(seed))
    losses = []
    for _ in range(epochs):
        order, total = torch.randperm(len(x), generator=gen), 0.0
        for i in range(0, len(x), batch_size):
            idx = order[i:i + batch_size]
            if len(idx) < 2:                      # batch norm needs two windows
                continue
            loss = F.cross_entropy(model(x[idx].to(device)), y[idx].to(device))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            total += float(loss.detach()) * len(idx)
        losses.append(total / len(x))
    return losses


@torch.no_grad()
def accuracy(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor, device="cpu",
             batch_size: int = 512) -> float:
    """Share of windows whose arg-max logit is the label (model in eval mode)."""
    model.eval()
    pred = torch.cat([model(x[i:i + batch_size].to(device)).argmax(-1).cpu()
                      for i in range(0, len(x), batch_size)])
    return float((pred == y).float().mean())
