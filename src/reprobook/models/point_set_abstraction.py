r"""Set abstraction (PointNet++) against LinNet's disassembled set abstraction, in a small U-net.

A *set abstraction* maps the features :math:`f_j \in \mathbb R^{C}` of :math:`N` input points to
:math:`M < N` sampled centres, each pooling its :math:`k` neighbours :math:`\mathcal N(m)`;
:math:`\Delta_{mj} = (p_j - p_m)/r` is a neighbour's offset in units of the stage's cell size.

**SA** (PointNet++, Qi et al. 2017): a shared MLP on every (centre, neighbour) pair, then max,

.. math:: g_m = \max_{j \in \mathcal N(m)} \sigma\big(W_2\, \sigma(W_1 [f_j; \Delta_{mj}])\big),

which costs :math:`M k\,((C + 3) C' + C'^2)` multiply-adds: every high-dimensional map runs
:math:`M k` times.

**DSA** (LinNet, Deng et al. 2024; our reconstruction from the paper's description, which
separates a *channel* mapping done once per point from a low-dimensional *spatial* mapping done per
pair): a channel map :math:`h_j = W_c f_j` on each of the :math:`N` input points, a spatial map
:math:`s_{mj} = U_2\, \sigma(U_1 \Delta_{mj}) \in \mathbb R^{C'}` through a hidden width
:math:`d_s \ll C'` (a per-channel, direction-dependent weight), their sum pooled, and one map per
centre,

.. math:: g_m = \sigma\Big(W_o \max_{j \in \mathcal N(m)} \sigma(h_{j} + s_{mj})\Big),

which costs :math:`N C C' + M k (3 d_s + d_s C') + M C'^2`: the high-dimensional maps run
:math:`N + M` times instead of :math:`Mk`. (:math:`W_1 [f_j; \Delta]` splits exactly into
:math:`W_f f_j + W_p \Delta`; DSA keeps that split, makes the spatial part a small MLP and moves the
second layer after the pooling.)

Variants for controls: ``"dsa-nospatial"`` (the spatial map removed, :math:`s \equiv 0`: the
aggregation no longer sees where a neighbour is) and ``"dsa-per-pair"`` (DSA's maps with the
disassembly undone: the channel map and the output map run on every pair, the cost of SA).

The network (:class:`PointSegNet`) is a 3-stage encoder-decoder: a per-point stem, one aggregator
per stage on a precomputed :class:`Pyramid` (sampled centres, neighbour lists, and the 3 nearest
coarse points of each fine point for the decoder's inverse-distance interpolation), skip
connections, and a per-point head. Which sampler and which neighbour search built the pyramid is
the only difference between the linear pipeline and FPS + kNN.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from scipy.spatial import cKDTree
from torch import nn

from reprobook.vision.point_sampling import (farthest_point_sample, hash_query, knn_query,
                                             linearization_sample, random_sample)

__all__ = ["AGGREGATORS", "SAMPLERS", "SEARCHES", "Stage", "Pyramid", "build_pyramid", "collate",
           "SetAbstraction", "DisassembledSetAbstraction", "PointSegNet", "aggregator_macs",
           "train_segmenter", "predict", "confusion", "miou"]

AGGREGATORS = ("sa", "dsa", "dsa-nospatial", "dsa-per-pair")
SAMPLERS = ("ls", "fps", "random")
SEARCHES = ("hash", "knn")


@dataclass
class Stage:
    """One down-sampling stage: ``centres`` (M,) index the previous level, ``group`` (M, k)
    indexes the previous level, ``up`` (N_prev, 3) indexes this level and ``up_w`` (N_prev, 3)
    are the interpolation weights; ``cell`` is the stage's cell size."""
    centres: np.ndarray
    group: np.ndarray
    up: np.ndarray
    up_w: np.ndarray
    cell: float


@dataclass
class Pyramid:
    """Point positions of level 0 and the stages built on them."""
    xyz: np.ndarray
    stages: list


def _up_weights(fine, coarse, idx):
    d = np.sqrt(((fine[:, None, :] - coarse[idx]) ** 2).sum(-1))
    w = 1.0 / (d + 1e-8)
    return (w / w.sum(1, keepdims=True)).astype(np.float32)


def build_pyramid(xyz, cells, k: int = 16, sampler: str = "ls", search: str = "hash",
                  cell_scale: float = 1.0, rng: np.random.Generator | None = None,
                  curve: str = "hilbert") -> Pyramid:
    """Sample and group a cloud stage by stage (cell sizes ``cells``, e.g. doubling).

    ``sampler``: ``"ls"`` (one point per occupied cell, LinNet), ``"fps"`` or ``"random"``, the
    latter two drawing as many centres as LS would (equal sample counts). ``search``: ``"hash"``
    (27 adjacent cells of size ``cell * cell_scale``, LinNet) or ``"knn"`` (exact, k-d tree). The
    decoder's 3 nearest coarse points come from the same search (with ``cell_scale = 1``); where a
    hash block holds no coarse point (possible only with a sampler other than LS), the exact
    nearest is filled in.
    """
    if sampler not in SAMPLERS:
        raise ValueError(f"unknown sampler {sampler!r}; choose one of {SAMPLERS}")
    if search not in SEARCHES:
        raise ValueError(f"unknown search {search!r}; choose one of {SEARCHES}")
    if sampler == "random" and rng is None:
        raise ValueError("the random sampler needs rng")
    if not cell_scale > 0:
        raise ValueError(f"cell_scale must be > 0, got {cell_scale!r}")
    xyz = np.asarray(xyz, dtype=np.float64)
    pts, stages = xyz, []
    for cell in cells:
        ls = linearization_sample(pts, cell, curve)
        if sampler == "ls":
            centres = ls
        elif sampler == "fps":
            centres = farthest_point_sample(pts, len(ls))
        else:
            centres = random_sample(pts, len(ls), rng)
        q = pts[centres]
        kk = min(k, len(pts))
        if search == "hash":
            group, _ = hash_query(pts, q, cell * cell_scale, kk, curve)
            up, cnt = hash_query(q, pts, cell, min(3, len(q)), curve)
            if (cnt == 0).any():
                miss = cnt == 0
                up[miss] = knn_query(q, pts[miss], 1)
        else:
            group = knn_query(pts, q, kk)
            up = knn_query(q, pts, min(3, len(q)))
        if up.shape[1] < 3:
            up = np.concatenate([up, np.repeat(up[:, :1], 3 - up.shape[1], 1)], 1)
        stages.append(Stage(centres, group, up, _up_weights(pts, q, up), float(cell)))
        pts = q
    return Pyramid(xyz, stages)


def collate(pyramids):
    """Join pyramids of several clouds into one: indices shifted by each cloud's offset, so a
    batch is one long cloud (nothing is ever gathered across clouds). Returns a dict of tensors."""
    if not pyramids:
        raise ValueError("collate needs at least one pyramid")
    n_st = len(pyramids[0].stages)
    if any(len(p.stages) != n_st for p in pyramids):
        raise ValueError("pyramids have different numbers of stages")
    out = {"xyz": [torch.from_numpy(np.concatenate([p.xyz for p in pyramids])).float()],
           "stages": []}
    sizes = [np.array([len(p.xyz) for p in pyramids])]
    for s in range(n_st):
        prev = np.concatenate([[0], np.cumsum(sizes[-1])[:-1]])
        here = np.array([len(p.stages[s].centres) for p in pyramids])
        off = np.concatenate([[0], np.cumsum(here)[:-1]])
        st = [p.stages[s] for p in pyramids]
        centres = np.concatenate([x.centres + o for x, o in zip(st, prev)])
        out["stages"].append(dict(
            centres=torch.from_numpy(centres),
            group=torch.from_numpy(np.concatenate([x.group + o for x, o in zip(st, prev)])),
            up=torch.from_numpy(np.concatenate([x.up + o for x, o in zip(st, off)])),
            up_w=torch.from_numpy(np.concatenate([x.up_w for x in st])),
            cell=st[0].cell))
        out["xyz"].append(out["xyz"][-1][centres])
        sizes.append(here)
    return out


class SetAbstraction(nn.Module):
    """PointNet++ SA: a two-layer MLP on every (centre, neighbour) pair, max over neighbours."""

    def __init__(self, c_in: int, c_out: int):
        super().__init__()
        self.l1 = nn.Linear(c_in + 3, c_out)
        self.l2 = nn.Linear(c_out, c_out)

    def forward(self, f, xyz, xyz_c, group, cell):
        rel = (xyz[group] - xyz_c[:, None]) / cell
        x = torch.relu(self.l1(torch.cat([f[group], rel], -1)))
        return torch.relu(self.l2(x)).amax(1)


class DisassembledSetAbstraction(nn.Module):
    """DSA: channel map per point, low-dimensional spatial map per pair, output map per centre.

    ``spatial=False`` removes the spatial map; ``per_pair=True`` runs the channel and output maps
    on every pair (the disassembly undone)."""

    def __init__(self, c_in: int, c_out: int, spatial_hidden: int = 8, spatial: bool = True,
                 per_pair: bool = False):
        super().__init__()
        self.channel = nn.Linear(c_in, c_out)
        self.s1 = nn.Linear(3, spatial_hidden)
        self.s2 = nn.Linear(spatial_hidden, c_out)
        self.out = nn.Linear(c_out, c_out)
        self.spatial, self.per_pair = spatial, per_pair

    def forward(self, f, xyz, xyz_c, group, cell):
        m, k = group.shape
        bias = self.channel.bias + self.s2.bias if self.spatial else self.channel.bias
        if self.per_pair:
            h = nn.functional.linear(f[group], self.channel.weight, bias)
        else:
            # the spatial bias is folded into the per-point map (N rows, not M k)
            h = nn.functional.linear(f, self.channel.weight, bias)[group]
        h = h.reshape(m * k, -1)
        if self.spatial:
            rel = ((xyz[group] - xyz_c[:, None]) / cell).reshape(m * k, 3)
            hid = torch.relu(self.s1(rel))
            h = h.addmm_(hid, self.s2.weight.t())           # h + U_2 hid in place (h is a fresh gather)
        a = torch.relu_(h).reshape(m, k, -1)
        if self.per_pair:
            return torch.relu(self.out(a)).amax(1)
        return torch.relu(self.out(a.amax(1)))


def _aggregator(kind, c_in, c_out, spatial_hidden):
    if kind == "sa":
        return SetAbstraction(c_in, c_out)
    if kind == "dsa":
        return DisassembledSetAbstraction(c_in, c_out, spatial_hidden)
    if kind == "dsa-nospatial":
        return DisassembledSetAbstraction(c_in, c_out, spatial_hidden, spatial=False)
    if kind == "dsa-per-pair":
        return DisassembledSetAbstraction(c_in, c_out, spatial_hidden, per_pair=True)
    raise ValueError(f"unknown aggregator {kind!r}; choose one of {AGGREGATORS}")


def aggregator_macs(kind: str, n: int, m: int, k: int, c_in: int, c_out: int,
                    spatial_hidden: int = 8) -> int:
    """Multiply-adds of one aggregator's linear maps (the formulas of the module docstring)."""
    if kind == "sa":
        return m * k * ((c_in + 3) * c_out + c_out * c_out)
    spatial = m * k * (3 * spatial_hidden + spatial_hidden * c_out)
    if kind == "dsa":
        return n * c_in * c_out + spatial + m * c_out * c_out
    if kind == "dsa-nospatial":
        return n * c_in * c_out + m * c_out * c_out
    if kind == "dsa-per-pair":
        return m * k * (c_in * c_out + c_out * c_out) + spatial
    raise ValueError(f"unknown aggregator {kind!r}; choose one of {AGGREGATORS}")


class PointSegNet(nn.Module):
    """Stem -> one aggregator per stage -> decoder (3-NN interpolation + skip) -> per-point head."""

    def __init__(self, n_classes: int, widths=(32, 64, 128), stem: int = 32, aggregator: str = "dsa",
                 spatial_hidden: int = 8, in_dim: int = 3):
        super().__init__()
        if aggregator not in AGGREGATORS:
            raise ValueError(f"unknown aggregator {aggregator!r}; choose one of {AGGREGATORS}")
        if len(widths) < 1 or min(widths) < 1 or stem < 1:
            raise ValueError(f"widths and stem must be positive, got {widths}, {stem}")
        self.stem = nn.Linear(in_dim, stem)
        chans = [stem, *widths]
        self.enc = nn.ModuleList(_aggregator(aggregator, chans[i], chans[i + 1], spatial_hidden)
                                 for i in range(len(widths)))
        self.dec = nn.ModuleList(nn.Linear(chans[i + 1] + chans[i], chans[i])
                                 for i in range(len(widths)))
        self.head = nn.Sequential(nn.Linear(stem, stem), nn.ReLU(), nn.Linear(stem, n_classes))

    def encode(self, batch, feats):
        xyz = batch["xyz"]
        fs = [torch.relu(self.stem(feats))]
        for s, st in enumerate(batch["stages"]):
            fs.append(self.enc[s](fs[-1], xyz[s], xyz[s + 1], st["group"], st["cell"]))
        return fs

    def forward(self, batch, feats):
        fs = self.encode(batch, feats)
        x = fs[-1]
        for s in range(len(batch["stages"]) - 1, -1, -1):
            st = batch["stages"][s]
            up = (x[st["up"]] * st["up_w"][..., None]).sum(1)
            x = torch.relu(self.dec[s](torch.cat([up, fs[s]], -1)))
        return self.head(x)


def _features(xyz: torch.Tensor) -> torch.Tensor:
    return xyz - xyz.mean(0, keepdim=True) * torch.tensor([1.0, 1.0, 0.0])


def train_segmenter(pyramids, labels, n_classes: int, *, aggregator: str = "dsa", widths=(32, 64, 128),
                    stem: int = 32, steps: int = 100, batch: int = 4, lr: float = 3e-3, seed: int = 0,
                    spatial_hidden: int = 8) -> PointSegNet:
    """Adam on per-point cross-entropy, ``batch`` clouds per step in a seeded order. Features are
    the point positions, centred horizontally on each cloud."""
    if len(pyramids) != len(labels) or not pyramids:
        raise ValueError("need one label array per pyramid, and at least one")
    g = torch.Generator().manual_seed(int(seed))
    torch.manual_seed(int(seed))
    net = PointSegNet(n_classes, widths, stem, aggregator, spatial_hidden)
    opt = torch.optim.Adam(net.parameters(), lr=lr)
    feats = [_features(torch.from_numpy(np.asarray(p.xyz)).float()) for p in pyramids]
    labs = [torch.as_tensor(np.asarray(y), dtype=torch.long) for y in labels]
    n = len(pyramids)
    for _ in range(int(steps)):
        pick = torch.randperm(n, generator=g)[: min(batch, n)].tolist()
        # the picked clouds as one long cloud: one forward pass per step
        b = collate([pyramids[i] for i in pick])
        out = net(b, torch.cat([feats[i] for i in pick]))
        loss = nn.functional.cross_entropy(out, torch.cat([labs[i] for i in pick]))
        opt.zero_grad()
        loss.backward()
        opt.step()
    return net


@torch.no_grad()
def predict(net: PointSegNet, pyramid: Pyramid) -> np.ndarray:
    """Per-point class predictions for one cloud."""
    b = collate([pyramid])
    return net(b, _features(b["xyz"][0])).argmax(1).numpy()


def confusion(pred, labels, n_classes: int) -> np.ndarray:
    """Confusion counts (true class, predicted class)."""
    pred, labels = np.asarray(pred).ravel(), np.asarray(labels).ravel()
    if pred.shape != labels.shape:
        raise ValueError(f"pred and labels differ in size: {pred.shape} vs {labels.shape}")
    return np.bincount(labels * n_classes + pred, minlength=n_classes ** 2).reshape(n_classes, n_classes)


def miou(conf: np.ndarray) -> float:
    """Mean IoU over the classes present (in truth or prediction)."""
    tp = np.diag(conf).astype(float)
    denom = conf.sum(0) + conf.sum(1) - tp
    present = denom > 0
    return float((tp[present] / denom[present]).mean())
