r"""Octree queries for semantic occupancy (OctreeOcc, Lu et al.), and the dense baselines they beat.

**Levels.** A volume of ``(X, Y, Z)`` voxels (each divisible by 4) is covered by three grids of
cells: level 0 of :math:`4^3`-voxel cells, level 1 of :math:`2^3`, level 2 of single voxels
(OctreeOcc's three levels, 50x50x4 -> 100x100x8 -> 200x200x16 on Occ3D). An **octree structure** is
the set of *leaves*: a level-0 cell is either a leaf or split into its 8 level-1 children, and a
level-1 child is either a leaf or split into 8 voxels. It is stored as three boolean leaf masks
(:class:`Structure`) that tile the volume exactly once. A *query* is one leaf: the decoder runs once
per leaf and its prediction is broadcast to every voxel the leaf covers. Queries:

.. math:: Q = n_0 (1 - r_0) + 8 n_0 r_0 (1 - r_1) + 64 n_0 r_0 r_1 \quad\text{against}\quad 64 n_0

for the dense grid, when a share :math:`r_0` of the :math:`n_0` level-0 cells is split and a share
:math:`r_1` of their children is split again (the official code keeps these shares fixed with a
top-k on split scores, :math:`r_0 = 0.2, r_1 = 0.6`).

**Split scores.** The structure is the top-k of a *split score* per cell and level
(:func:`structure_from_scores`):

* *semantic-guided initialisation* (:func:`cue_scores`): a cell's score is a dataset prior -- how
  often a cell at that height is *subdividable* (not one class) in the training scenes, the
  official code's ``occupied_prob`` -- times how interesting its column looks in the top-down
  segmentation cue (a pole or wire pixel, or a label edge, in its footprint);
* *iterative rectification* (:func:`rectify_scores`): after decoding, the score is blended with the
  **uncertainty** of the prediction over the cell, :math:`u_c = 1 - \max_k \bar p_{c,k}` where
  :math:`\bar p_c` is the predicted class distribution averaged over the cell's voxels. A mixed cell
  has a mixed (uncertain) prediction whether it is a coarse leaf or was split; a split cell whose
  children all agree can be merged. The top-k at the same shares then gives the new structure, so
  the query count stays fixed and the budget moves to where predictions are uncertain. The official
  code blends the previous score with a learned split predictor run on the query features,
  half-and-half; we blend with the prediction's own uncertainty, half-and-half, which needs no
  second head (see the chapter).

**Decoder** (:class:`QueryDecoder`): one MLP shared by all levels. A query at level :math:`\ell`
reads the features average-pooled to its level in a :math:`3^3` neighbourhood of its cell, plus the
:math:`3^3` level-0 neighbourhood of its level-0 ancestor (coarse context, as multi-scale image
features give), a one-hot of its level and its normalised height; it returns class logits. Dense and
upsampled-coarse grids are the same decoder with every query at level 2, or at level 1.

**Counting.** :func:`decode` evaluates the decoder on exactly the leaves; with rectification, a leaf
already decoded in an earlier pass is not decoded again (its prediction is a function of its
level, cell and features), so the count is the number of distinct (level, cell) pairs evaluated.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ..data.voxel_scenes import N_CLASSES, THIN

__all__ = ["CELL", "Structure", "check_volume", "subdividable", "structure_from_scores",
           "uniform_structure", "height_prior", "cue_scores", "oracle_scores", "random_scores",
           "rectify_scores", "QueryDecoder", "decode", "Variant", "predict", "train_decoder",
           "class_weights", "confusion", "iou_from_confusion", "query_fraction"]

CELL = (4, 2, 1)          # voxels per cell edge at levels 0, 1, 2


def check_volume(shape) -> tuple[int, int, int]:
    """``(X, Y, Z)`` of a volume whose sides are multiples of the level-0 cell (4)."""
    shape = tuple(int(s) for s in shape)
    if len(shape) != 3 or any(s % CELL[0] or s <= 0 for s in shape):
        raise ValueError(f"volume shape must be 3 positive multiples of {CELL[0]}, got {shape}")
    return shape


def _up(mask: torch.Tensor, factor: int) -> torch.Tensor:
    """Nearest-neighbour upsampling of the last three axes by ``factor``."""
    for ax in (-3, -2, -1):
        mask = mask.repeat_interleave(factor, dim=ax)
    return mask


@dataclass
class Structure:
    """Leaf masks of an octree over a batch: ``leaf[l]`` has shape ``(B, X/c_l, Y/c_l, Z/c_l)``."""
    leaf: tuple[torch.Tensor, torch.Tensor, torch.Tensor]

    def __post_init__(self):
        cover = sum(_up(m.to(torch.int64), c) for m, c in zip(self.leaf, CELL))
        if not bool((cover == 1).all()):
            raise ValueError("leaf masks must cover every voxel exactly once")

    @property
    def shape(self) -> tuple[int, int, int]:
        return tuple(self.leaf[2].shape[-3:])

    def n_queries(self) -> int:
        """Leaves over the whole batch."""
        return int(sum(int(m.sum()) for m in self.leaf))

    def per_level(self) -> list[int]:
        return [int(m.sum()) for m in self.leaf]

    def split0(self) -> torch.Tensor:
        return ~self.leaf[0]

    def split1(self) -> torch.Tensor:
        return _up(self.split0(), 2) & ~self.leaf[1]


def uniform_structure(batch: int, shape, level: int) -> Structure:
    """Every query at one level: 2 = the dense grid, 1 = the half-resolution grid, 0 = quarter."""
    X, Y, Z = check_volume(shape)
    if level not in (0, 1, 2):
        raise ValueError(f"level must be 0, 1 or 2, got {level}")
    leaf = tuple(torch.full((batch, X // c, Y // c, Z // c), lvl == level, dtype=torch.bool)
                 for lvl, c in enumerate(CELL))
    return Structure(leaf)


def structure_from_masks(split0: torch.Tensor, split1: torch.Tensor) -> Structure:
    """Leaves from split decisions; ``split1`` is ignored outside split level-0 cells."""
    split1 = split1 & _up(split0, 2)
    return Structure((~split0, _up(split0, 2) & ~split1, _up(split1, 2)))


def _topk_mask(score: torch.Tensor, k: int, allowed: torch.Tensor | None = None) -> torch.Tensor:
    """Per batch element, True at the ``k`` highest scores (among ``allowed``); ties go to the
    lower flat index, so the result is deterministic."""
    B = score.shape[0]
    flat = score.reshape(B, -1).to(torch.float64)
    if allowed is not None:
        flat = torch.where(allowed.reshape(B, -1), flat, torch.full_like(flat, -np.inf))
    mask = torch.zeros_like(flat, dtype=torch.bool)
    if k > 0:
        # a stable descending sort breaks ties by index
        order = torch.sort(flat, dim=1, descending=True, stable=True).indices[:, :k]
        mask.scatter_(1, order, True)
    return mask.reshape(score.shape)


def structure_from_scores(score0: torch.Tensor, score1: torch.Tensor, ratio0: float,
                          ratio1: float) -> Structure:
    """Split the top ``round(ratio0 n0)`` level-0 cells of every scene, then the top
    ``round(ratio1 * 8 * that)`` of their children: the fixed-budget top-k of the official code."""
    if score0.dim() != 4 or score1.dim() != 4 or tuple(score1.shape[1:]) != tuple(
            2 * s for s in score0.shape[1:]) or score1.shape[0] != score0.shape[0]:
        raise ValueError(f"score0 must be (B, X/4, Y/4, Z/4) and score1 (B, X/2, Y/2, Z/2), got "
                         f"{tuple(score0.shape)} and {tuple(score1.shape)}")
    for name, r in (("ratio0", ratio0), ("ratio1", ratio1)):
        if not 0.0 <= r <= 1.0:
            raise ValueError(f"{name} must lie in [0, 1], got {r}")
    n0 = score0[0].numel()
    k0 = int(round(ratio0 * n0))
    split0 = _topk_mask(score0, k0)
    split1 = _topk_mask(score1, int(round(ratio1 * 8 * k0)), allowed=_up(split0, 2))
    return structure_from_masks(split0, split1)


def query_fraction(ratio0: float, ratio1: float) -> float:
    """Queries of the fixed-budget octree as a share of the dense grid's (before rounding)."""
    return ((1 - ratio0) + 8 * ratio0 * (1 - ratio1) + 64 * ratio0 * ratio1) / 64


def subdividable(labels: torch.Tensor, level: int) -> torch.Tensor:
    """Ground-truth split need: True where a level-``level`` cell (0 or 1) holds more than one
    class. ``labels`` is ``(B, X, Y, Z)``."""
    if level not in (0, 1):
        raise ValueError(f"only levels 0 and 1 can be split, got {level}")
    c = CELL[level]
    lab = labels.to(torch.float32).unsqueeze(1)
    hi = F.max_pool3d(lab, c)
    lo = -F.max_pool3d(-lab, c)
    return (hi != lo)[:, 0]


def height_prior(labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The dataset prior: for each height index of levels 0 and 1, the share of training cells
    that are subdividable (OctreeOcc's ``occupied_prob``, here per height only)."""
    return tuple(subdividable(labels, lvl).to(torch.float32).mean(dim=(0, 1, 2)) for lvl in (0, 1))


def _cue_interest(cue: torch.Tensor) -> torch.Tensor:
    """Per pixel of a top-down cue ``(B, X, Y)``: 1 on a thin-class pixel or on a label edge
    (a 4-neighbour with another label), else 0."""
    thin = torch.zeros_like(cue, dtype=torch.bool)
    for k in THIN:
        thin |= cue == k
    edge = torch.zeros_like(thin)
    edge[:, 1:, :] |= cue[:, 1:, :] != cue[:, :-1, :]
    edge[:, :-1, :] |= cue[:, 1:, :] != cue[:, :-1, :]
    edge[:, :, 1:] |= cue[:, :, 1:] != cue[:, :, :-1]
    edge[:, :, :-1] |= cue[:, :, 1:] != cue[:, :, :-1]
    return (thin | edge).to(torch.float32)


def cue_scores(cue: torch.Tensor, prior: tuple[torch.Tensor, torch.Tensor], *, alpha: float = 0.25,
               use_cue: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    r"""Semantic-guided split scores ``(score0, score1)``: :math:`s_c = \pi_{\ell}(z_c)\,(\alpha +
    m_c)` with :math:`\pi` the height prior and :math:`m_c` the share of the cell's top-down
    footprint that is interesting in the cue (thin class or label edge). ``use_cue=False`` keeps
    the prior alone (:math:`m_c = 0`): the ablation without semantic guidance."""
    if cue.dim() != 3:
        raise ValueError(f"cue must be (B, X, Y), got {tuple(cue.shape)}")
    interest = _cue_interest(cue).unsqueeze(1)
    out = []
    for lvl in (0, 1):
        c = CELL[lvl]
        m = F.avg_pool2d(interest, c)[:, 0] if use_cue else torch.zeros(
            cue.shape[0], cue.shape[1] // c, cue.shape[2] // c)
        pz = prior[lvl].to(torch.float32)
        out.append(pz.view(1, 1, 1, -1) * (alpha + m.unsqueeze(-1)))
    return out[0], out[1]


def oracle_scores(labels: torch.Tensor, n_classes: int = N_CLASSES) -> tuple[torch.Tensor, torch.Tensor]:
    r"""Ground-truth split need as scores: the impurity :math:`1 - \max_k h_{c,k}` of each cell's
    class histogram :math:`h_c` (0 exactly for a one-class cell), so the most mixed cells come first
    when the budget cannot split them all. A reference, not a method: it reads the labels."""
    onehot = F.one_hot(labels, n_classes).permute(0, 4, 1, 2, 3).to(torch.float32)
    return tuple(1.0 - F.avg_pool3d(onehot, CELL[lvl]).max(dim=1).values for lvl in (0, 1))


def random_scores(batch: int, shape, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """Uniform random split scores: the same budget spent without any information."""
    X, Y, Z = check_volume(shape)
    return tuple(torch.rand(batch, X // c, Y // c, Z // c, generator=generator) for c in CELL[:2])


def _normalise(s: torch.Tensor) -> torch.Tensor:
    """Min-max per scene to [0, 1] (a constant score maps to 0)."""
    B = s.shape[0]
    flat = s.reshape(B, -1)
    lo, hi = flat.min(1, keepdim=True).values, flat.max(1, keepdim=True).values
    return ((flat - lo) / (hi - lo).clamp_min(1e-12)).reshape(s.shape)


def rectify_scores(scores: tuple[torch.Tensor, torch.Tensor], probs: torch.Tensor, *,
                   keep: float = 0.5, invert: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    r"""One rectification step: :math:`s' = \text{keep}\cdot \mathrm{norm}(s) + (1-\text{keep})\,u`
    with :math:`u_c = 1 - \max_k \bar p_{c,k}` the uncertainty of the voxel-averaged predicted
    distribution over cell :math:`c`. ``probs`` is ``(B, K, X, Y, Z)``. ``invert=True`` uses
    :math:`1 - u` (split where the model is *confident*): a planted bug for controls."""
    if probs.dim() != 5:
        raise ValueError(f"probs must be (B, K, X, Y, Z), got {tuple(probs.shape)}")
    if not 0.0 <= keep <= 1.0:
        raise ValueError(f"keep must lie in [0, 1], got {keep}")
    out = []
    for lvl, s in zip((0, 1), scores):
        u = 1.0 - F.avg_pool3d(probs, CELL[lvl]).max(dim=1).values
        if invert:
            u = 1.0 - u
        out.append(keep * _normalise(s) + (1.0 - keep) * u)
    return out[0], out[1]


_OFFSETS = torch.stack(torch.meshgrid(*(torch.arange(3),) * 3, indexing="ij"), -1).reshape(27, 3)


class QueryDecoder(nn.Module):
    """Shared per-query MLP: (own-level 3^3 neighbourhood, level-0 ancestor's 3^3 neighbourhood,
    level one-hot, height) -> class logits."""

    def __init__(self, n_features: int = N_CLASSES, n_classes: int = N_CLASSES, hidden: int = 32):
        super().__init__()
        self.n_features, self.n_classes = int(n_features), int(n_classes)
        self.net = nn.Sequential(nn.Linear(2 * 27 * self.n_features + 3 + 1, hidden), nn.ReLU(),
                                 nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, n_classes))

    def flops_per_query(self) -> int:
        """Multiply-adds of the MLP, counted 2 per weight (the gathers are not counted)."""
        return 2 * sum(m.weight.numel() for m in self.net if isinstance(m, nn.Linear))

    @staticmethod
    def pooled(features: torch.Tensor) -> list[tuple[torch.Tensor, tuple[int, int, int]]]:
        """Per level, the features average-pooled to that level and zero-padded by one cell, as
        rows ``(B * (X+2) * (Y+2) * (Z+2), C)`` with the padded sizes. The features are inputs, not
        parameters, so this is computed once per batch; queries gather their neighbours from it."""
        out = []
        for c in CELL:
            v = F.avg_pool3d(features, c) if c > 1 else features
            p = F.pad(v, (1,) * 6)
            out.append((p.permute(0, 2, 3, 4, 1).reshape(-1, p.shape[1]), tuple(p.shape[2:])))
        return out

    @staticmethod
    def _neighbourhood(pooled, b, ijk) -> torch.Tensor:
        """Rows ``(Q, 27 C)``: the 3^3 neighbourhoods of cells ``ijk`` (unpadded coordinates)."""
        flat, (Xp, Yp, Zp) = pooled
        off = (_OFFSETS[:, 0] * Yp + _OFFSETS[:, 1]) * Zp + _OFFSETS[:, 2]
        base = ((b * Xp + ijk[:, 0]) * Yp + ijk[:, 1]) * Zp + ijk[:, 2]
        rows = (base.unsqueeze(1) + off.to(base.device).unsqueeze(0)).reshape(-1)
        return flat.index_select(0, rows).reshape(len(b), -1)

    def forward(self, pooled, level: int, idx: torch.Tensor, shape) -> torch.Tensor:
        """Logits ``(Q, K)`` for queries ``idx = (Q, 4)`` rows ``(b, i, j, k)`` at ``level`` of a
        volume of ``shape = (X, Y, Z)`` voxels; ``pooled`` comes from :meth:`pooled`."""
        Z = shape[2]
        b, ijk = idx[:, 0], idx[:, 1:]
        own = self._neighbourhood(pooled[level], b, ijk)
        anc = self._neighbourhood(pooled[0], b, torch.div(ijk, CELL[0] // CELL[level], rounding_mode="floor"))
        lvl = F.one_hot(torch.full((len(idx),), level, device=idx.device), 3).to(own.dtype)
        z = (ijk[:, 2:3].to(own.dtype) + 0.5) * CELL[level] / Z
        return self.net(torch.cat([own, anc, lvl, z], dim=1))


def decode(decoder: QueryDecoder, features: torch.Tensor, structure: Structure,
           pooled: list | None = None) -> torch.Tensor:
    """Full-resolution logits ``(B, K, X, Y, Z)``: the decoder run once per leaf, each leaf's
    logits broadcast over the voxels it covers."""
    if features.dim() != 5 or tuple(features.shape[-3:]) != structure.shape or \
            features.shape[0] != structure.leaf[0].shape[0]:
        raise ValueError(f"features must be (B, C, X, Y, Z) matching the structure {structure.shape}, "
                         f"got {tuple(features.shape)}")
    if features.shape[1] != decoder.n_features:
        raise ValueError(f"decoder expects {decoder.n_features} feature channels, got {features.shape[1]}")
    pooled = decoder.pooled(features) if pooled is None else pooled
    B, _, X, Y, Z = features.shape
    out = features.new_zeros(B, decoder.n_classes, X, Y, Z)
    for lvl, (mask, c) in enumerate(zip(structure.leaf, CELL)):
        idx = mask.nonzero()
        if len(idx) == 0:
            continue
        logits = decoder(pooled, lvl, idx, (X, Y, Z))
        grid = features.new_zeros(B, X // c, Y // c, Z // c, decoder.n_classes)
        grid = grid.index_put((idx[:, 0], idx[:, 1], idx[:, 2], idx[:, 3]), logits)
        out = out + _up(grid.permute(0, 4, 1, 2, 3), c)
    return out


@dataclass(frozen=True)
class Variant:
    """How a model places its queries.

    ``mode``: ``"dense"`` (all at level 2), ``"coarse"`` (all at level 1, broadcast), ``"octree"``.
    For the octree, ``init`` is ``"cue"`` (semantic-guided), ``"prior"`` (height prior only),
    ``"random"`` or ``"oracle"`` (ground truth), and ``rounds`` the rectification rounds.
    ``invert`` plants the inverted-uncertainty bug in rectification."""
    mode: str
    init: str = "cue"
    rounds: int = 1
    ratio0: float = 0.35
    ratio1: float = 0.6
    invert: bool = False

    def __post_init__(self):
        if self.mode not in ("dense", "coarse", "octree"):
            raise ValueError(f"unknown mode {self.mode!r}: dense, coarse or octree")
        if self.init not in ("cue", "prior", "random", "oracle"):
            raise ValueError(f"unknown init {self.init!r}: cue, prior, random or oracle")
        if self.rounds < 0:
            raise ValueError(f"rounds must be >= 0, got {self.rounds}")


def predict(decoder: QueryDecoder, variant: Variant, features: torch.Tensor, *, cue=None,
            prior=None, labels=None, generator: torch.Generator | None = None):
    """Run a variant: returns ``(logits, structure, n_evaluated)``, where ``n_evaluated`` counts
    the distinct (level, cell) queries the decoder ran over all passes."""
    B, _, X, Y, Z = features.shape
    if variant.mode != "octree":
        s = uniform_structure(B, (X, Y, Z), 2 if variant.mode == "dense" else 1)
        return decode(decoder, features, s), s, s.n_queries()
    if variant.init == "cue" or variant.init == "prior":
        if cue is None or prior is None:
            raise ValueError("a cue- or prior-initialised octree needs cue and prior")
        scores = cue_scores(cue, prior, use_cue=variant.init == "cue")
    elif variant.init == "oracle":
        if labels is None:
            raise ValueError("the oracle octree needs labels")
        scores = oracle_scores(labels)
    else:
        if generator is None:
            raise ValueError("a random octree needs a torch.Generator")
        scores = random_scores(B, (X, Y, Z), generator)
    pooled = decoder.pooled(features)
    s = structure_from_scores(*scores, variant.ratio0, variant.ratio1)
    seen = [m.clone() for m in s.leaf]
    logits = decode(decoder, features, s, pooled)
    for _ in range(variant.rounds):
        with torch.no_grad():
            scores = rectify_scores(scores, logits.detach().softmax(1), invert=variant.invert)
        s = structure_from_scores(*scores, variant.ratio0, variant.ratio1)
        seen = [a | m for a, m in zip(seen, s.leaf)]
        logits = decode(decoder, features, s, pooled)
    return logits, s, int(sum(int(m.sum()) for m in seen))


def class_weights(labels: torch.Tensor, n_classes: int = N_CLASSES) -> torch.Tensor:
    """Inverse-square-root class frequencies, normalised to mean 1 (the same for every variant)."""
    freq = torch.bincount(labels.reshape(-1), minlength=n_classes).to(torch.float32)
    w = (freq / freq.sum()).clamp_min(1e-6).rsqrt()
    return w / w.mean()


def train_decoder(variant: Variant, features: torch.Tensor, labels: torch.Tensor, cues: torch.Tensor,
                  prior, *, steps: int, batch: int, lr: float, seed: int, hidden: int = 32,
                  weights: torch.Tensor | None = None) -> QueryDecoder:
    """Train a fresh decoder for ``variant`` with Adam on the voxel-level weighted cross-entropy of
    the broadcast prediction (the loss every variant shares); the structure is recomputed each step
    from the current model (rectification) as at test time. Batches and initial weights come from
    ``seed``, so variants with the same seed see the same scenes in the same order."""
    if features.shape[0] != labels.shape[0] or labels.shape[0] != cues.shape[0]:
        raise ValueError("features, labels and cues must hold the same number of scenes")
    g = torch.Generator().manual_seed(int(seed))
    torch.manual_seed(int(seed))
    dec = QueryDecoder(features.shape[1], N_CLASSES, hidden)
    opt = torch.optim.Adam(dec.parameters(), lr=lr)
    w = class_weights(labels) if weights is None else weights
    n = features.shape[0]
    for _ in range(int(steps)):
        b = torch.randint(0, n, (min(batch, n),), generator=g)
        logits, _, _ = predict(dec, variant, features[b], cue=cues[b], prior=prior, labels=labels[b],
                               generator=g)
        loss = F.cross_entropy(logits, labels[b], weight=w)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return dec


def confusion(pred: torch.Tensor, labels: torch.Tensor, n_classes: int = N_CLASSES) -> torch.Tensor:
    """Confusion counts ``(K, K)``, rows = truth, over all voxels given."""
    if pred.shape != labels.shape:
        raise ValueError(f"pred and labels must have the same shape, got {tuple(pred.shape)} and "
                         f"{tuple(labels.shape)}")
    return torch.bincount(labels.reshape(-1) * n_classes + pred.reshape(-1),
                          minlength=n_classes * n_classes).reshape(n_classes, n_classes)


def iou_from_confusion(conf: torch.Tensor) -> dict:
    """Per-class IoU (NaN for a class absent from truth and prediction), mIoU over the non-empty
    classes, IoU of the thin classes (mean of pole and wire) and geometric IoU (occupied vs empty)."""
    conf = conf.to(torch.float64)
    tp = conf.diag()
    union = conf.sum(0) + conf.sum(1) - tp
    iou = torch.where(union > 0, tp / union.clamp_min(1), torch.full_like(tp, float("nan")))
    occ_tp = conf[1:, 1:].sum()
    occ_union = conf.sum() - conf[0, 0]
    return {"per_class": iou.tolist(),
            "miou": float(np.nanmean(iou[1:].numpy())),
            "thin": float(np.nanmean(iou[list(THIN)].numpy())),
            "geometric": float(occ_tp / occ_union) if occ_union > 0 else float("nan")}
