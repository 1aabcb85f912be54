r"""Phenotype imputation with multi-modal biology by view decoupling (MPI; Zhang et al., NeurIPS
2024), its ablations and the baselines it is compared with, on a
:class:`reprobook.data.phenotype_cohort.PhenotypeCohort`.

**Biological view.** Each omics modality is standardised on the patients who have it and turned
into discrete *biological factors* by residual quantisation (RQ): level 1 runs k-means on the
features, level :math:`l` runs k-means on what level :math:`l-1` left over,

.. math:: c_{p,l} = \arg\min_c \lVert r_{p,l-1} - C_l[c]\rVert,\qquad r_{p,l} = r_{p,l-1} - C_l[c_{p,l}],
          \qquad r_{p,0} = x_p .

Every (modality, level, code) is a factor node, and a patient is joined to the ``levels`` codes of
each modality it has: a missing modality is simply no edges. A LightGCN on this patient-factor
graph (the *teacher*) gives :math:`h^{bio}_p`.

**Phenotype view.** A LightGCN on the patient-phenotype graph of the training edges (the
*student*) gives :math:`h^{phen}_p` and the phenotype embeddings :math:`h_m`; the imputation score
is :math:`h^{phen}_p\cdot h_m`.

**Cross-view contrastive distillation.** InfoNCE between the student's and the (stop-gradient)
teacher's patient embeddings, over a batch :math:`\mathcal B` of patients with at least one
modality, cosine similarity and temperature :math:`\tau`:

.. math:: \mathcal L_{KD} = -\frac{1}{|\mathcal B|}\sum_{p\in\mathcal B}\log
          \frac{\exp(\cos(h^{phen}_p, \bar h^{bio}_p)/\tau)}{\sum_{q\in\mathcal B}
          \exp(\cos(h^{phen}_p, \bar h^{bio}_q)/\tau)} .

Only the *similarity structure* between patients crosses from one view to the other, not the
biological features themselves, which is the paper's argument for robustness to noisy omics. The
loss is :math:`\mathrm{BPR}(h^{phen}, h) + \mu\,\mathcal L_{KD} + \mathrm{BPR}(h^{bio}, \bar h)`,
the last term (phenotype embeddings detached) training the teacher.

**Ablations** (``method=``): ``"mpi-sum"`` fuses the two views by summing the patient embeddings
and trains the sum with BPR (no distillation); ``"mpi-flat"`` replaces RQ by one level of k-means
with as many codes as RQ's levels together (the same number of factor nodes, no residual
hierarchy). **Baselines**: ``"popularity"`` (phenotype prevalence in training),
``"phenotype-lightgcn"`` (the phenotype view alone), ``"early-fusion"`` (LightGCN whose patient
layer-0 embedding adds an MLP of the zero-imputed omics and the missing-modality indicators).

Metrics: every held-out positive :math:`(p, m)` is ranked among the phenotypes not known for
:math:`p` (ties count half); Hit@k is the share ranked in the top k, MRR the mean reciprocal rank.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch
from sklearn.cluster import KMeans
from torch import nn

from ..gnn.lightgcn import LightGCN, bipartite_adjacency, bpr_loss, sample_negatives
from ..seeding import rng as _rng

__all__ = ["METHODS", "TrainConfig", "FitResult", "RQResult", "standardize", "residual_quantize",
           "factor_edges", "info_nce", "fit_method", "known_matrix", "ranks", "hit_at", "mrr"]

METHODS = ("popularity", "phenotype-lightgcn", "early-fusion", "mpi", "mpi-sum", "mpi-flat")


@dataclass(frozen=True)
class TrainConfig:
    """Every trained method gets the same ``epochs`` of full-batch Adam (one fresh negative per
    training edge each epoch); ``mu``, ``tau``, ``kd_batch``, ``levels`` and ``codebook`` are
    MPI's."""

    dim: int = 32
    layers: int = 3
    epochs: int = 200
    lr: float = 1e-2
    weight_decay: float = 1e-4
    mu: float = 0.1
    tau: float = 0.2
    kd_batch: int = 512
    levels: int = 2
    codebook: int = 16
    mlp_hidden: int = 64

    def __post_init__(self):
        for name in ("dim", "epochs", "kd_batch", "levels", "codebook", "mlp_hidden"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{name} must be a positive integer, got {v!r}")
        if isinstance(self.layers, bool) or not isinstance(self.layers, int) or self.layers < 0:
            raise ValueError(f"layers must be an integer >= 0, got {self.layers!r}")
        if not self.lr > 0 or self.weight_decay < 0 or self.mu < 0 or not self.tau > 0:
            raise ValueError("need lr > 0, weight_decay >= 0, mu >= 0 and tau > 0")


@dataclass
class FitResult:
    scores: np.ndarray                       # (P, M) imputation scores
    history: dict = field(default_factory=dict)   # per-epoch losses ("bpr", "kd")
    rq_errors: list | None = None            # per modality, residual energy after each RQ level


@dataclass
class RQResult:
    codes: np.ndarray        # (n, levels) int
    codebooks: list          # per level, (codebook, D)
    errors: np.ndarray       # (levels + 1,) mean squared residual norm after 0..levels levels


def standardize(x: np.ndarray, present: np.ndarray) -> np.ndarray:
    """Z-score every column on the patients that have the modality; absent rows become 0."""
    x = np.asarray(x, dtype=np.float64)
    present = np.asarray(present, dtype=bool)
    if x.ndim != 2 or present.shape != (x.shape[0],):
        raise ValueError(f"x must be (P, D) and present (P,), got {x.shape} and {present.shape}")
    if present.sum() < 2:
        raise ValueError("a modality needs at least 2 patients who have it")
    xp = x[present]
    if np.isnan(xp).any():
        raise ValueError("present patients must have no NaN features")
    out = np.zeros_like(x)
    out[present] = (xp - xp.mean(0)) / np.maximum(xp.std(0), 1e-8)
    return out


def residual_quantize(x: np.ndarray, levels: int, codebook_size: int, seed: int) -> RQResult:
    """Residual quantisation of the rows of ``x`` by k-means (scikit-learn) at every level."""
    x = np.asarray(x, dtype=np.float64)
    if x.ndim != 2:
        raise ValueError(f"x must be 2-D (n, D), got shape {x.shape}")
    if levels < 1 or codebook_size < 1:
        raise ValueError(f"levels and codebook_size must be >= 1, got {levels}, {codebook_size}")
    if codebook_size > len(x):
        raise ValueError(f"codebook_size ({codebook_size}) exceeds the number of rows ({len(x)})")
    r = x.copy()
    codes, books, errors = [], [], [float((r ** 2).sum(1).mean())]
    for level in range(levels):
        km = KMeans(codebook_size, n_init=1, random_state=int(seed) * 97 + level, max_iter=50)
        c = km.fit_predict(r)
        books.append(km.cluster_centers_)
        r = r - km.cluster_centers_[c]
        codes.append(c)
        errors.append(float((r ** 2).sum(1).mean()))
    return RQResult(np.stack(codes, 1), books, np.array(errors))


def factor_edges(omics, present: np.ndarray, levels: int, codebook_size: int, seed: int):
    """(patient, factor) edges of the biological view, the number of factor nodes and each
    modality's RQ errors. Factor ids run over (modality, level, code)."""
    present = np.asarray(present, dtype=bool)
    if present.ndim != 2 or present.shape[1] != len(omics):
        raise ValueError(f"present must be (P, {len(omics)}), got {present.shape}")
    edges, errors, base = [], [], 0
    for k, x in enumerate(omics):
        pk = present[:, k]
        rq = residual_quantize(standardize(x, pk)[pk], levels, codebook_size, seed + 1000 * k)
        pats = np.nonzero(pk)[0]
        for level in range(levels):
            edges.append(np.stack([pats, base + level * codebook_size + rq.codes[:, level]], 1))
        errors.append(rq.errors)
        base += levels * codebook_size
    return np.concatenate(edges).astype(np.int64), base, errors


def info_nce(student: torch.Tensor, teacher: torch.Tensor, tau: float) -> torch.Tensor:
    """InfoNCE of rows of ``student`` against the matching rows of ``teacher`` (the other rows
    are the negatives), cosine similarity over temperature ``tau``."""
    if student.shape != teacher.shape or student.dim() != 2:
        raise ValueError(f"student and teacher must be the same (B, d) shape, got "
                         f"{tuple(student.shape)} and {tuple(teacher.shape)}")
    s = nn.functional.normalize(student, dim=1)
    t = nn.functional.normalize(teacher, dim=1)
    logits = s @ t.T / tau
    return nn.functional.cross_entropy(logits, torch.arange(len(s), device=s.device))


def known_matrix(edges, n_patients: int, n_phenotypes: int) -> np.ndarray:
    """(P, M) bool: True where (patient, phenotype) is in ``edges``."""
    k = np.zeros((n_patients, n_phenotypes), dtype=bool)
    e = np.asarray(edges, dtype=np.int64).reshape(-1, 2)
    k[e[:, 0], e[:, 1]] = True
    return k


def ranks(scores: np.ndarray, targets, known: np.ndarray) -> np.ndarray:
    """Rank (1 = best) of each target (patient, phenotype) among the phenotypes not ``known`` for
    the patient (the target itself always competes); ties count half."""
    scores = np.asarray(scores, dtype=np.float64)
    if scores.shape != known.shape:
        raise ValueError(f"scores {scores.shape} and known {known.shape} must have the same shape")
    t = np.asarray(targets, dtype=np.int64).reshape(-1, 2)
    if not len(t):
        return np.zeros(0)
    s = scores[t[:, 0]]
    cand = ~known[t[:, 0]]
    cand[np.arange(len(t)), t[:, 1]] = False
    own = s[np.arange(len(t)), t[:, 1]][:, None]
    greater = ((s > own) & cand).sum(1)
    ties = ((s == own) & cand).sum(1)
    return 1 + greater + 0.5 * ties


def hit_at(r: np.ndarray, k: int) -> float:
    return float(np.mean(np.asarray(r) <= k)) if len(r) else float("nan")


def mrr(r: np.ndarray) -> float:
    return float(np.mean(1 / np.asarray(r))) if len(r) else float("nan")


def _features(cohort) -> np.ndarray:
    """Zero-imputed standardised omics and one missing-modality indicator per modality."""
    blocks = [standardize(x, cohort.present[:, k]) for k, x in enumerate(cohort.omics)]
    blocks.append(cohort.present.astype(np.float64))
    return np.concatenate(blocks, 1)


class _EarlyFusion(nn.Module):
    def __init__(self, P, M, n_features, cfg, gen):
        super().__init__()
        self.gcn = LightGCN(P, M, cfg.dim, cfg.layers, generator=gen)
        self.mlp = nn.Sequential(nn.Linear(n_features, cfg.mlp_hidden), nn.ReLU(),
                                 nn.Linear(cfg.mlp_hidden, cfg.dim))
        with torch.no_grad():     # seeded init of the MLP, independent of the global RNG
            for p in self.mlp.parameters():
                p.copy_(0.1 * torch.randn(p.shape, generator=gen))

    def forward(self, adj, feats):
        return self.gcn(adj, self.mlp(feats))


def fit_method(method: str, cohort, config: TrainConfig, seed: int, *,
               device="cpu", train_edges=None) -> FitResult:
    """Train ``method`` (one of :data:`METHODS`) on ``cohort.train`` (or ``train_edges``) and
    return its (P, M) scores. ``seed`` fixes the initial weights, the negatives, the KD batches
    and the k-means."""
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; choose one of {METHODS}")
    P, M = cohort.n_patients, cohort.n_phenotypes
    train = np.asarray(cohort.train if train_edges is None else train_edges, dtype=np.int64)
    if method == "popularity":
        pop = np.bincount(train[:, 1], minlength=M).astype(np.float64)
        return FitResult(np.broadcast_to(pop, (P, M)).copy())

    cfg = config
    gen = torch.Generator().manual_seed(int(seed))
    g = _rng(seed, 351)
    positive = known_matrix(train, P, M)
    adj = bipartite_adjacency(train, P, M).to(device)
    hist = {"bpr": [], "kd": []}
    rq_errors = None
    feats = None
    if method == "phenotype-lightgcn":
        model = LightGCN(P, M, cfg.dim, cfg.layers, generator=gen)
    elif method == "early-fusion":
        feats = torch.tensor(_features(cohort), dtype=torch.float32, device=device)
        model = _EarlyFusion(P, M, feats.shape[1], cfg, gen)
    else:
        levels, size = (cfg.levels, cfg.codebook) if method != "mpi-flat" else \
            (1, cfg.levels * cfg.codebook)
        fe, n_factors, rq_errors = factor_edges(cohort.omics, cohort.present, levels, size, seed)
        bio_adj = bipartite_adjacency(fe, P, n_factors).to(device)
        model = nn.ModuleDict({"phen": LightGCN(P, M, cfg.dim, cfg.layers, generator=gen),
                               "bio": LightGCN(P, n_factors, cfg.dim, cfg.layers, generator=gen)})
        has_bio = torch.from_numpy(np.nonzero(cohort.present.any(1))[0]).to(device)
    model.to(device)
    opt = torch.optim.Adam(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    u_idx = torch.from_numpy(train[:, 0]).to(device)
    i_idx = torch.from_numpy(train[:, 1]).to(device)

    def embed():
        if method == "phenotype-lightgcn":
            hp, hi = model(adj)
            return hp, hi, None
        if method == "early-fusion":
            hp, hi = model(adj, feats)
            return hp, hi, None
        hp, hi = model["phen"](adj)
        hb, _ = model["bio"](bio_adj)
        return hp, hi, hb

    for _ in range(cfg.epochs):
        j_idx = torch.from_numpy(sample_negatives(train, positive, g)).to(device)
        hp, hi, hb = embed()
        if method == "mpi-sum":
            h = hp + hb
            loss = bpr_loss(h[u_idx], hi[i_idx], hi[j_idx])
            hist["bpr"].append(float(loss.detach()))
        else:
            loss = bpr_loss(hp[u_idx], hi[i_idx], hi[j_idx])
            hist["bpr"].append(float(loss.detach()))
            if hb is not None:
                hid = hi.detach()       # the teacher learns from the phenotypes, not vice versa
                loss = loss + bpr_loss(hb[u_idx], hid[i_idx], hid[j_idx])
                n = min(cfg.kd_batch, len(has_bio))
                pick = has_bio[torch.from_numpy(g.choice(len(has_bio), n, replace=False)).to(device)]
                kd = info_nce(hp[pick], hb[pick].detach(), cfg.tau)
                hist["kd"].append(float(kd.detach()))
                loss = loss + cfg.mu * kd
        opt.zero_grad()
        loss.backward()
        opt.step()

    with torch.no_grad():
        hp, hi, hb = embed()
        if method == "mpi-sum":
            hp = hp + hb
        scores = (hp @ hi.T).cpu().numpy().astype(np.float64)
    return FitResult(scores, hist, rq_errors)
