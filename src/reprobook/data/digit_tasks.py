r"""Five "medical-generalist-like" task types over scikit-learn's 8x8 digits, with token answers.

A stand-in for Uni-Med's multi-task instruction data (question answering, VQA, referring
expression comprehension and generation, report generation, classification): every example is an
image, a task, a short question and a one- or two-token answer drawn from **one shared output
vocabulary**, as an LLM answers every task with the same head.

The image is cut into a 4x4 grid of 2x2 patches (raster order, patch ``k`` covers rows
``2 (k // 4) .. +1`` and columns ``2 (k % 4) .. +1``); a patch's *intensity* is the mean of its four
grey levels (0..16). The tasks (``TASKS``; answers are exact functions of the image and question):

* ``cls``      (classification): the digit, one of ``D0..D9``;
* ``vqa``      (visual question answering): question ``even?`` or ``big?`` (digit > 4), answer
  ``yes`` / ``no``;
* ``refer``    (referring-expression comprehension): which patch is brightest, ``P0..P15`` (ties
  go to the first in raster order);
* ``identify`` (referring-expression generation, reversed): question ``L<k>`` names a patch, answer
  its intensity bucket ``B0..B3`` (edges :data:`BUCKET_EDGES`: blank, faint, medium, bright);
* ``caption``  (report generation): two tokens, the digit then ``even`` / ``odd``.

A sequence is laid out as ``[task][visual x n_visual][q1][q2][a1]``: the visual slots hold a
placeholder token that the model replaces by the connector's outputs, the question is padded to
two tokens, and the model is trained to predict ``a1`` at ``q2`` and ``a2`` at ``a1`` (teacher
forcing). :class:`TaskBatch` holds the tokens, the two targets and a mask (``a2`` only exists for
``caption``). An example counts as correct when every one of its answer tokens is.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .digits import digits_arrays

__all__ = ["TASKS", "VOCAB", "TOKEN", "BUCKET_EDGES", "TaskBatch", "DigitTaskData", "patch_intensity",
           "make_examples", "digit_task_data", "N_PATCHES"]

TASKS = ("cls", "vqa", "refer", "identify", "caption")
N_PATCHES = 16
BUCKET_EDGES = (0.5, 4.0, 10.0)
VOCAB = (["<pad>", "<img>"] + [f"<{t}>" for t in TASKS] + ["even?", "big?"]
         + [f"L{k}" for k in range(N_PATCHES)]
         + [f"D{d}" for d in range(10)] + ["yes", "no"] + [f"P{k}" for k in range(N_PATCHES)]
         + [f"B{b}" for b in range(4)] + ["even", "odd"])
TOKEN = {w: i for i, w in enumerate(VOCAB)}
PAD = TOKEN["<pad>"]


def patch_intensity(pixels: np.ndarray) -> np.ndarray:
    """Mean grey level of each 2x2 patch: ``(n, 64)`` pixels -> ``(n, 16)`` in raster order."""
    p = np.asarray(pixels, dtype=np.float64)
    if p.ndim != 2 or p.shape[1] != 64:
        raise ValueError(f"pixels must have shape (n, 64), got {p.shape}")
    return p.reshape(-1, 4, 2, 4, 2).transpose(0, 1, 3, 2, 4).reshape(-1, N_PATCHES, 4).mean(-1)


@dataclass(frozen=True)
class TaskBatch:
    """A set of examples: ``pixels (n, 64)`` float grey levels, ``tokens (n, T)`` int64 sequences,
    ``targets (n, 2)`` the answer tokens (``PAD`` where there is none), ``mask (n, 2)`` bool,
    ``task (n,)`` task indices into :data:`TASKS`, ``image (n,)`` the index of the source image."""

    pixels: np.ndarray
    tokens: np.ndarray
    targets: np.ndarray
    mask: np.ndarray
    task: np.ndarray
    image: np.ndarray

    def __len__(self) -> int:
        return len(self.task)

    def subset(self, idx) -> "TaskBatch":
        return TaskBatch(*(getattr(self, f)[idx] for f in
                           ("pixels", "tokens", "targets", "mask", "task", "image")))


def make_examples(pixels: np.ndarray, labels: np.ndarray, tasks: np.ndarray, rng: np.random.Generator,
                  n_visual: int = 4) -> TaskBatch:
    """One example per (image, task) pair given: ``tasks[i]`` (an index into :data:`TASKS`) is asked
    of image ``i``; ``rng`` draws the question where a task has a choice (``vqa``, ``identify``).
    ``n_visual``: the number of visual slots in the sequence."""
    pixels = np.asarray(pixels, dtype=np.float64)
    labels, tasks = np.asarray(labels), np.asarray(tasks)
    if pixels.ndim != 2 or pixels.shape[1] != 64:
        raise ValueError(f"pixels must have shape (n, 64), got {pixels.shape}")
    if labels.shape != (len(pixels),) or tasks.shape != (len(pixels),):
        raise ValueError(f"labels and tasks must have shape ({len(pixels)},), got {labels.shape} "
                         f"and {tasks.shape}")
    if len(tasks) and (tasks.min() < 0 or tasks.max() >= len(TASKS)):
        raise ValueError(f"task indices must lie in [0, {len(TASKS)}), got "
                         f"[{tasks.min()}, {tasks.max()}]")
    if isinstance(n_visual, bool) or not isinstance(n_visual, (int, np.integer)) or n_visual < 1:
        raise ValueError(f"n_visual must be a positive int, got {n_visual!r}")
    if not isinstance(rng, np.random.Generator):
        raise TypeError("rng must be a numpy Generator (reprobook.rng(seed, stream))")
    n = len(pixels)
    inten = patch_intensity(pixels)
    q = np.full((n, 2), PAD, dtype=np.int64)
    a = np.full((n, 2), PAD, dtype=np.int64)
    mask = np.zeros((n, 2), dtype=bool)
    mask[:, 0] = True
    # draw every question variable for all rows (fixed number of draws: reproducible per n)
    vqa_big = rng.random(n) < 0.5
    loc = rng.integers(0, N_PATCHES, n)
    for i in range(n):
        t, d = TASKS[tasks[i]], int(labels[i])
        if t == "cls":
            a[i, 0] = TOKEN[f"D{d}"]
        elif t == "vqa":
            q[i, 0] = TOKEN["big?" if vqa_big[i] else "even?"]
            yes = d > 4 if vqa_big[i] else d % 2 == 0
            a[i, 0] = TOKEN["yes" if yes else "no"]
        elif t == "refer":
            a[i, 0] = TOKEN[f"P{int(np.argmax(inten[i]))}"]
        elif t == "identify":
            k = int(loc[i])
            q[i, 0] = TOKEN[f"L{k}"]
            a[i, 0] = TOKEN[f"B{int(np.searchsorted(BUCKET_EDGES, inten[i, k], side='right'))}"]
        else:  # caption
            a[i] = [TOKEN[f"D{d}"], TOKEN["even" if d % 2 == 0 else "odd"]]
            mask[i, 1] = True
    task_tok = np.array([TOKEN[f"<{TASKS[t]}>"] for t in tasks], dtype=np.int64).reshape(n, 1)
    img = np.full((n, n_visual), TOKEN["<img>"], dtype=np.int64)
    tokens = np.concatenate([task_tok, img, q, a[:, :1]], axis=1)
    return TaskBatch(pixels=pixels, tokens=tokens, targets=a, mask=mask,
                     task=tasks.astype(np.int64), image=np.arange(n))


@dataclass(frozen=True)
class DigitTaskData:
    """Train and test examples: every image of a split asked every task (the cross product)."""

    train: TaskBatch
    test: TaskBatch
    n_train_images: int
    n_test_images: int


def digit_task_data(rng: np.random.Generator, *, test_fraction: float = 0.3, n_visual: int = 4,
                    n_images: int | None = None, pixels: np.ndarray | None = None,
                    labels: np.ndarray | None = None) -> DigitTaskData:
    """Split the digits (scikit-learn's copy unless ``pixels``/``labels`` are given) into train and
    test images (``test_fraction``), optionally keeping only ``n_images`` of them, and ask every
    image every task. The image split, the subset and the questions are drawn with ``rng``."""
    pixels, labels = digits_arrays(rng, pixels, labels)
    if not 0 < test_fraction < 1:
        raise ValueError(f"test_fraction must lie in (0, 1), got {test_fraction}")
    order = rng.permutation(len(pixels))
    if n_images is not None:
        if isinstance(n_images, bool) or not isinstance(n_images, (int, np.integer)) \
                or not 2 <= n_images <= len(pixels):
            raise ValueError(f"n_images must be an int in [2, {len(pixels)}], got {n_images!r}")
        order = order[:n_images]
    n_test = max(1, int(round(test_fraction * len(order))))
    if n_test >= len(order):
        raise ValueError("test_fraction leaves no training image")
    parts = {"test": order[:n_test], "train": order[n_test:]}
    out = {}
    for name, idx in parts.items():
        rep = np.repeat(idx, len(TASKS))
        tasks = np.tile(np.arange(len(TASKS)), len(idx))
        b = make_examples(pixels[rep], labels[rep], tasks, rng, n_visual=n_visual)
        out[name] = TaskBatch(b.pixels, b.tokens, b.targets, b.mask, b.task, rep)
    return DigitTaskData(train=out["train"], test=out["test"], n_train_images=len(parts["train"]),
                         n_test_images=len(parts["test"]))
