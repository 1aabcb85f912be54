r"""SimVG in miniature: a decoupled fusion encoder, a decoder branch, a token branch and dynamic
weight-balance distillation (DWBD) between them (Dai et al., NeurIPS 2024).

**Fusion encoder** (:class:`FusionEncoder`, the stand-in for BEiT-3). One stream of tokens
``[object token ; image patches ; words]`` through a pre-norm transformer encoder: patches are
linear embeddings of ``patch`` x ``patch`` pixel blocks plus learned positions, words are learned
embeddings plus positions, each stream has a type embedding. The extra *object token* is SimVG's
addition to the pretrained model: its output is where the token branch reads the referent.
It is pretrained *before and apart from* grounding (:func:`pretrain_fusion`) on image-caption
pairs with no boxes: image-text matching (ITM, a binary head on the object token; half the
captions are swapped for another image's) plus masked-word prediction (MLM, one in four words
replaced by ``[MASK]`` and predicted from the fused output), the two objectives of BEiT-3-style
multimodal pretraining. That is the *decoupling*: fusion is learned from generic paired data,
grounding only fine-tunes it.

**Branches** (both on the same encoder output).

* Decoder branch (:class:`DecoderBranch`): a DETR decoder -- ``queries`` learned queries, self-
  and cross-attention to the visual tokens, a 2-way class head (object / no object) and a box head
  (sigmoid ``cxcywh``). Trained with the DETR set loss: each image's one target is matched to
  the query of least cost :math:`c = -1\cdot p_\text{obj} + 5\,\lVert b-\hat b\rVert_1 - 2\,
  \mathrm{GIoU}(b,\hat b)` (Hungarian matching, which with one target is this argmin), then
  :math:`L = \mathrm{CE} + 5 L_1 + 2(1-\mathrm{GIoU})` with the no-object class down-weighted to
  0.1 (``eos_coef``).
* Token branch (:class:`TokenBranch`): the same class and box heads (a linear score and a 3-layer
  box MLP) straight on the object token's output: one prediction per image, no attention at
  inference.

**DWBD** (:func:`distill_token_loss`). For each image :math:`b` the detached decoder output gives
a pseudo-target: the box of the query matched to the ground truth and a weight
:math:`c_b = s_b \cdot \mathrm{IoU}(\hat b_b, b_b)` (its object score times its IoU with the
truth; the official ``score_iou_weighted`` mode). The batch weight is
:math:`w = \tfrac1B\sum_b c_b` and the token branch's loss is

.. math:: L_\text{token} = \lambda_t\,(1-w)\,L(\text{token}, \text{GT})
          + \lambda_d\,w\,L_c(\text{token}, \text{decoder}),

where :math:`L_c` is the set loss against the pseudo-targets with each image's class term
weighted by :math:`c_b`. While the decoder is poor, :math:`w\approx 0` and the token branch learns
from the ground truth; as the decoder becomes confident and right, supervision moves to it.
Variants: ``fixed`` (:math:`w` a constant, the usual fixed-weight distillation), ``reversed`` (a
planted bug: :math:`1-w` in :math:`w`'s place), ``token`` (no decoder, no distillation).
"""
from __future__ import annotations

import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from .boxes import box_area, cxcywh_to_xyxy

__all__ = ["sincos_2d", "FusionEncoder", "DecoderBranch", "TokenBranch", "SimVG", "giou", "match_single",
           "decoder_loss", "token_loss", "soft_targets", "distill_token_loss", "mask_words",
           "pretrain_fusion", "train_grounding", "evaluate", "time_branches", "MODES"]

MODES = ("token", "fixed", "dynamic", "reversed")
COST_CLASS, COST_L1, COST_GIOU = 1.0, 5.0, 2.0          # the official matcher / loss weights
EOS_COEF = 0.1


def _block(dim, heads):
    return nn.TransformerEncoderLayer(dim, heads, 2 * dim, dropout=0.0, batch_first=True,
                                      norm_first=True)


def sincos_2d(side: int, dim: int) -> torch.Tensor:
    r"""Fixed 2-D sin-cos positions of a ``side`` x ``side`` patch grid, ``[side**2, dim]`` (row-major):
    a quarter of the channels each :math:`\sin(\omega_k x), \cos(\omega_k x), \sin(\omega_k y),
    \cos(\omega_k y)` with :math:`\omega_k = (\pi/2)\,10^{-k/(d/4)}`, so neighbouring patches get
    nearby codes and every patch a distinct one."""
    d = dim // 4
    om = (torch.pi / 2) * 10.0 ** (-torch.arange(d, dtype=torch.float64) / d)
    yy, xx = torch.meshgrid(torch.arange(side, dtype=torch.float64), torch.arange(side, dtype=torch.float64),
                            indexing="ij")
    parts = [f(v.reshape(-1, 1) * om) for v in (xx, yy) for f in (torch.sin, torch.cos)]
    return torch.cat(parts, 1).float()


class FusionEncoder(nn.Module):
    """``(images [B,3,S,S], ids [B,L]) -> (object token [B,d], visual [B,P,d], words [B,L,d])``.

    ``positions``: ``"learned"`` patch positions (BEiT-3's; they start near zero) or fixed
    ``"sincos"`` ones (:func:`sincos_2d`). A small encoder trained from scratch for a few hundred
    steps needs the latter to know *where* the patch it attends to lies."""

    def __init__(self, vocab_size: int, size: int = 32, patch: int = 8, dim: int = 64,
                 layers: int = 4, heads: int = 4, max_len: int = 10, positions: str = "learned"):
        super().__init__()
        if positions not in ("learned", "sincos"):
            raise ValueError(f"positions must be 'learned' or 'sincos', got {positions!r}")
        if positions == "sincos" and dim % 4:
            raise ValueError(f"2-D sin-cos positions need dim divisible by 4, got {dim}")
        if size % patch:
            raise ValueError(f"image size {size} must be a multiple of the patch size {patch}")
        if dim % heads:
            raise ValueError(f"dim {dim} must be divisible by heads {heads}")
        self.size, self.patch, self.max_len, self.dim = size, patch, max_len, dim
        self.n_patches = (size // patch) ** 2
        self.mask_id = vocab_size                      # one extra id for [MASK]
        self.patch_embed = nn.Linear(3 * patch * patch, dim)
        if positions == "sincos":
            self.register_buffer("patch_pos", sincos_2d(size // patch, dim))
        else:
            self.patch_pos = nn.Parameter(0.02 * torch.randn(self.n_patches, dim))
        self.word = nn.Embedding(vocab_size + 1, dim, padding_idx=0)
        self.word_pos = nn.Parameter(0.02 * torch.randn(max_len, dim))
        self.types = nn.Parameter(0.02 * torch.randn(3, dim))
        self.obj = nn.Parameter(0.02 * torch.randn(dim))
        self.enc = nn.TransformerEncoder(_block(dim, heads), layers, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(dim)

    def forward(self, images: torch.Tensor, ids: torch.Tensor):
        B = images.shape[0]
        if images.ndim != 4 or images.shape[1:] != (3, self.size, self.size):
            raise ValueError(f"images must be [B, 3, {self.size}, {self.size}], got {tuple(images.shape)}")
        if ids.ndim != 2 or ids.shape[0] != B or ids.dtype != torch.long:
            raise ValueError(f"ids must be a [B, L] long tensor with B = {B}, got {tuple(ids.shape)} {ids.dtype}")
        if ids.shape[1] > self.max_len:
            raise ValueError(f"{ids.shape[1]} words exceed max_len = {self.max_len}")
        p = self.patch
        x = images.unfold(2, p, p).unfold(3, p, p)                # [B,3,h,w,p,p]
        x = x.permute(0, 2, 3, 1, 4, 5).reshape(B, self.n_patches, 3 * p * p)
        vis = self.patch_embed(x) + self.patch_pos + self.types[1]
        txt = self.word(ids) + self.word_pos[:ids.shape[1]] + self.types[2]
        obj = (self.obj + self.types[0]).expand(B, 1, self.dim)
        pad = torch.cat([torch.zeros(B, 1 + self.n_patches, dtype=torch.bool, device=ids.device),
                         ids == 0], 1)
        h = self.norm(self.enc(torch.cat([obj, vis, txt], 1), src_key_padding_mask=pad))
        return h[:, 0], h[:, 1:1 + self.n_patches], h[:, 1 + self.n_patches:]


class DecoderBranch(nn.Module):
    """DETR decoder over the visual tokens: ``-> (logits [B,Q,2], boxes cxcywh [B,Q,4])``."""

    def __init__(self, dim: int = 64, queries: int = 8, layers: int = 2, heads: int = 4):
        super().__init__()
        self.query = nn.Parameter(0.02 * torch.randn(queries, dim))
        layer = nn.TransformerDecoderLayer(dim, heads, 2 * dim, dropout=0.0, batch_first=True,
                                           norm_first=True)
        self.dec = nn.TransformerDecoder(layer, layers, norm=nn.LayerNorm(dim))
        self.cls = nn.Linear(dim, 2)
        self.box = nn.Sequential(nn.Linear(dim, dim), nn.ReLU(), nn.Linear(dim, dim), nn.ReLU(),
                                 nn.Linear(dim, 4))

    def forward(self, visual: torch.Tensor):
        q = self.query.expand(visual.shape[0], -1, -1)
        h = self.dec(q, visual)
        return self.cls(h), self.box(h).sigmoid()


class TokenBranch(nn.Module):
    """The light branch on the object token: ``-> (logits [B,2], box cxcywh [B,4])``, a linear
    score head and a 3-layer box MLP (the notes' "3-layer MLP on the object token"; the same heads
    as the decoder's). ``hidden_layers`` adds that many ReLU layers before the heads; the default 0
    is the paper's branch. A deeper stack is not harmless: with 3 extra layers (6 ReLU layers to
    the box) the box centre of a from-scratch encoder stayed at the median position for thousands of
    steps under the L1 + GIoU loss, while the plain heads learned to ground."""

    def __init__(self, dim: int = 64, hidden_layers: int = 0):
        super().__init__()
        if hidden_layers < 0:
            raise ValueError(f"hidden_layers must be >= 0, got {hidden_layers}")
        mlp = []
        for _ in range(hidden_layers):
            mlp += [nn.Linear(dim, dim), nn.ReLU()]
        self.mlp = nn.Sequential(*mlp)
        self.cls = nn.Linear(dim, 2)
        self.box = nn.Sequential(nn.Linear(dim, dim), nn.ReLU(), nn.Linear(dim, dim), nn.ReLU(),
                                 nn.Linear(dim, 4))

    def forward(self, obj: torch.Tensor):
        h = self.mlp(obj)
        return self.cls(h), self.box(h).sigmoid()


class SimVG(nn.Module):
    """The encoder with both branches (``decoder=False``: token branch only)."""

    def __init__(self, encoder: FusionEncoder, queries: int = 8, decoder_layers: int = 2,
                 heads: int = 4, decoder: bool = True):
        super().__init__()
        self.encoder = encoder
        self.token = TokenBranch(encoder.dim)
        self.decoder = DecoderBranch(encoder.dim, queries, decoder_layers, heads) if decoder else None

    def forward(self, images, ids, branches=("token", "decoder")):
        obj, vis, _ = self.encoder(images, ids)
        out = {}
        if "token" in branches:
            out["token"] = self.token(obj)
        if "decoder" in branches:
            if self.decoder is None:
                raise ValueError("this model was built without a decoder branch")
            out["decoder"] = self.decoder(vis)
        return out


# ----------------------------------------------------------------------------- losses


def giou(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    r"""Elementwise generalised IoU of xyxy boxes ``a, b: [..., 4]``:
    :math:`\mathrm{IoU} - |C \setminus (a\cup b)|/|C|`, C the smallest box enclosing both."""
    if a.shape != b.shape or a.shape[-1] != 4:
        raise ValueError(f"giou needs two [..., 4] tensors of one shape, got {tuple(a.shape)}, {tuple(b.shape)}")
    lt, rb = torch.maximum(a[..., :2], b[..., :2]), torch.minimum(a[..., 2:], b[..., 2:])
    inter = (rb - lt).clamp(min=0).prod(-1)
    union = box_area(a) + box_area(b) - inter
    iou = inter / union.clamp(min=1e-9)
    c = (torch.maximum(a[..., 2:], b[..., 2:]) - torch.minimum(a[..., :2], b[..., :2])).clamp(min=0).prod(-1)
    return iou - (c - union) / c.clamp(min=1e-9)


def iou_pairs(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Elementwise IoU of xyxy boxes (0 for two empty boxes)."""
    lt, rb = torch.maximum(a[..., :2], b[..., :2]), torch.minimum(a[..., 2:], b[..., 2:])
    inter = (rb - lt).clamp(min=0).prod(-1)
    return inter / (box_area(a) + box_area(b) - inter).clamp(min=1e-9)


def match_single(logits: torch.Tensor, boxes: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Index ``[B]`` of the query matched to each image's one target (xyxy ``[B,4]``): the
    Hungarian assignment with one column is the row of least cost (module docstring)."""
    with torch.no_grad():
        p = logits.softmax(-1)[..., 0]
        pb = cxcywh_to_xyxy(boxes)
        t = target[:, None].expand_as(pb)
        cost = (-COST_CLASS * p + COST_L1 * (boxes - _xyxy_to_cxcywh(t)).abs().sum(-1)
                - COST_GIOU * giou(pb, t))
        return cost.argmin(1)


def _xyxy_to_cxcywh(b):
    return torch.stack([(b[..., 0] + b[..., 2]) / 2, (b[..., 1] + b[..., 3]) / 2,
                        b[..., 2] - b[..., 0], b[..., 3] - b[..., 1]], -1)


def _box_terms(pred_cxcywh, target_xyxy):
    """Per-image ``5 L1 + 2 (1 - GIoU)`` (L1 in cxcywh, as DETR)."""
    l1 = (pred_cxcywh - _xyxy_to_cxcywh(target_xyxy)).abs().sum(-1)
    return COST_L1 * l1 + COST_GIOU * (1 - giou(cxcywh_to_xyxy(pred_cxcywh), target_xyxy))


def decoder_loss(logits: torch.Tensor, boxes: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """DETR set loss of the decoder branch against one target box an image (xyxy ``[B,4]``)."""
    B, Q, _ = logits.shape
    idx = match_single(logits, boxes, target)
    labels = torch.ones(B, Q, dtype=torch.long, device=logits.device)
    labels[torch.arange(B), idx] = 0
    ce = F.cross_entropy(logits.reshape(B * Q, 2), labels.reshape(-1),
                         weight=torch.tensor([1.0, EOS_COEF], device=logits.device))
    return ce + _box_terms(boxes[torch.arange(B), idx], target).mean()


def token_loss(logits: torch.Tensor, box: torch.Tensor, target: torch.Tensor,
               class_weight: torch.Tensor | None = None) -> torch.Tensor:
    """Set loss of the token branch's one prediction against one target box an image; with
    ``class_weight [B]`` each image's class term is weighted (the weighted-CE distillation loss)."""
    ce = F.cross_entropy(logits, torch.zeros(len(logits), dtype=torch.long, device=logits.device),
                         reduction="none")
    if class_weight is not None:
        ce = ce * class_weight
    return (ce + _box_terms(box, target)).mean()


def soft_targets(logits: torch.Tensor, boxes: torch.Tensor, target: torch.Tensor):
    """Pseudo-targets from the (detached) decoder: the matched query's box (xyxy ``[B,4]``) and
    its weight :math:`c_b = s_b\\,\\mathrm{IoU}_b` (``[B]``)."""
    logits, boxes = logits.detach(), boxes.detach()
    idx = match_single(logits, boxes, target)
    r = torch.arange(len(idx))
    tb = cxcywh_to_xyxy(boxes[r, idx])
    score = logits.softmax(-1)[r, idx, 0]
    return tb, score * iou_pairs(tb, target)


def distill_token_loss(tok_logits, tok_box, target, dec_logits, dec_boxes, mode: str = "dynamic",
                       fixed_weight: float = 0.5, lam_token: float = 1.0, lam_distill: float = 1.0):
    """The token branch's loss under ``mode`` (one of :data:`MODES`); returns ``(loss, w)`` with
    ``w`` the distillation weight applied (a float). See the module docstring."""
    if mode not in MODES:
        raise ValueError(f"unknown distillation mode {mode!r}; one of {MODES}")
    l_gt = token_loss(tok_logits, tok_box, target)
    if mode == "token":
        return lam_token * l_gt, 0.0
    tb, c = soft_targets(dec_logits, dec_boxes, target)
    w_dyn = c.mean()
    w = {"dynamic": w_dyn, "reversed": 1.0 - w_dyn,
         "fixed": torch.tensor(float(fixed_weight))}[mode]
    l_kd = token_loss(tok_logits, tok_box, tb, class_weight=c)
    return lam_token * (1 - w) * l_gt + lam_distill * w * l_kd, float(w)


# ----------------------------------------------------------------------------- training


def mask_words(ids: torch.Tensor, mask_id: int, generator: torch.Generator, rate: float = 0.25):
    """``(masked ids, labels)``: each real word replaced by ``mask_id`` with probability ``rate``
    (at least one a caption); labels are the original ids there and -100 elsewhere."""
    real = ids != 0
    pick = (torch.rand(ids.shape, generator=generator) < rate) & real
    first = torch.multinomial(real.float(), 1, generator=generator)[:, 0]
    pick[torch.arange(len(ids)), first] |= ~pick.any(1)
    return ids.masked_fill(pick, mask_id), torch.where(pick, ids, torch.full_like(ids, -100))


def pretrain_fusion(encoder: FusionEncoder, images: torch.Tensor, ids: torch.Tensor, *, steps: int,
                    batch_size: int, lr: float, generator: torch.Generator,
                    shuffle_text: bool = False) -> list[float]:
    """ITM + MLM pretraining of the encoder on image-caption pairs (no boxes, no grounding).
    ``shuffle_text=True`` (a control) breaks the pairing once, before training, so no image-text
    fusion can be learned. Returns the loss of every step; the heads are discarded."""
    n = len(images)
    if len(ids) != n:
        raise ValueError(f"{n} images but {len(ids)} captions")
    if shuffle_text:
        ids = ids[torch.randperm(n, generator=generator)]
    d = encoder.dim
    itm = nn.Linear(d, 2)
    mlm = nn.Linear(d, encoder.mask_id + 1)
    params = list(encoder.parameters()) + list(itm.parameters()) + list(mlm.parameters())
    opt = torch.optim.AdamW(params, lr=lr, weight_decay=0.01)
    encoder.train()
    losses = []
    for _ in range(steps):
        idx = torch.randperm(n, generator=generator)[:batch_size]
        x, t = images[idx], ids[idx]
        neg = torch.rand(len(idx), generator=generator) < 0.5
        t = torch.where(neg[:, None], t.roll(1, 0), t)        # another image's caption
        masked, labels = mask_words(t, encoder.mask_id, generator)
        labels[neg] = -100                                      # predict words of true pairs only
        obj, _, words = encoder(x, masked)
        loss = F.cross_entropy(itm(obj), neg.long()) + F.cross_entropy(
            mlm(words).reshape(-1, encoder.mask_id + 1), labels.reshape(-1), ignore_index=-100)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    encoder.eval()
    return losses


def train_grounding(model: SimVG, images: torch.Tensor, ids: torch.Tensor, boxes: torch.Tensor, *,
                    mode: str, steps: int, batch_size: int, lr: float, generator: torch.Generator,
                    fixed_weight: float = 0.5, freeze_decoder: bool = False,
                    shuffle_text: bool = False) -> dict:
    """Fine-tune encoder and branches for grounding: the decoder's set loss plus the token
    branch's :func:`distill_token_loss` under ``mode``, both branches learning together
    (``mode="token"``: the token branch alone). ``freeze_decoder`` (a control) keeps the decoder
    at its random initialisation and drops its loss: an untrained teacher. ``shuffle_text`` (a
    control) pairs each image with a random other image's expression. Returns ``{"w": [...],
    "loss": [...]}`` per step."""
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}; one of {MODES}")
    if mode != "token" and model.decoder is None:
        raise ValueError(f"mode {mode!r} distils from the decoder branch, which this model lacks")
    n = len(images)
    if not (len(ids) == len(boxes) == n):
        raise ValueError("images, ids and boxes need one row per example")
    if shuffle_text:
        ids = ids[torch.randperm(n, generator=generator)]
    if freeze_decoder and model.decoder is not None:
        for p in model.decoder.parameters():
            p.requires_grad_(False)
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=lr, weight_decay=0.01)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=lr, total_steps=steps, pct_start=0.1)
    branches = ("token",) if mode == "token" else ("token", "decoder")
    model.train()
    hist = {"w": [], "loss": []}
    for _ in range(steps):
        idx = torch.randperm(n, generator=generator)[:batch_size]
        out = model(images[idx], ids[idx], branches)
        tgt = boxes[idx]
        dec = out.get("decoder", (None, None))
        loss, w = distill_token_loss(*out["token"], tgt, *dec, mode=mode, fixed_weight=fixed_weight)
        if mode != "token" and not freeze_decoder:
            loss = loss + decoder_loss(*dec, tgt)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        sched.step()
        hist["w"].append(w)
        hist["loss"].append(float(loss.detach()))
    model.eval()
    return hist


@torch.no_grad()
def evaluate(model: SimVG, images, ids, boxes, batch_size: int = 256) -> dict:
    """IoU of each branch's box with the truth, per example: ``{"token": [n], "decoder": [n]}``
    (the decoder's box is its highest-scoring query's)."""
    model.eval()
    res = {"token": [], "decoder": []}
    for s in range(0, len(images), batch_size):
        sl = slice(s, s + batch_size)
        br = ("token", "decoder") if model.decoder is not None else ("token",)
        out = model(images[sl], ids[sl], br)
        res["token"].append(iou_pairs(cxcywh_to_xyxy(out["token"][1]), boxes[sl]))
        if "decoder" in out:
            lg, bx = out["decoder"]
            best = lg.softmax(-1)[..., 0].argmax(1)
            pb = cxcywh_to_xyxy(bx[torch.arange(len(best)), best])
            res["decoder"].append(iou_pairs(pb, boxes[sl]))
    return {k: torch.cat(v).numpy() for k, v in res.items() if v}


@torch.no_grad()
def time_branches(model: SimVG, images, ids, repeats: int = 5, decoder_in_token_slot: bool = False) -> dict:
    """Inference seconds per image of each branch *end to end* (encoder + head, as deployed;
    the decoder path includes picking its best query), the median of ``repeats`` interleaved
    passes over the batch, after one warm-up pass each. ``decoder_in_token_slot`` (a control) times
    the decoder path in both slots."""
    if model.decoder is None:
        raise ValueError("time_branches needs a model with both branches")
    model.eval()

    def tok():
        obj, _, _ = model.encoder(images, ids)
        return model.token(obj)[1]

    def dec():
        _, vis, _ = model.encoder(images, ids)
        lg, bx = model.decoder(vis)
        return bx[torch.arange(len(bx)), lg.softmax(-1)[..., 0].argmax(1)]

    fns = {"token": dec if decoder_in_token_slot else tok, "decoder": dec}
    ts = {k: [] for k in fns}
    for fn in fns.values():
        fn()
    for _ in range(repeats):        # interleaved, so a change of machine load hits both alike
        for name, fn in fns.items():
            t0 = time.perf_counter()
            fn()
            ts[name].append(time.perf_counter() - t0)
    return {k: float(np.median(v)) / len(images) for k, v in ts.items()}
