r"""Weight-balancing super-resolution (WBSR; Yu et al., NeurIPS 2024), rebuilt small, and its
uniform-L1 baseline.

**The network.** :class:`SlimSR` is an SRResNet-like ×2 network whose width is *slimmable*: one set
of weights of full width :math:`W` holds sub-networks of width :math:`w \le W` that use the first
:math:`w` channels of every layer (a supernet whose sub-nets share weights, as the paper's
dynamic inference needs). For an LR input :math:`x`,

.. math:: \hat y = \mathrm{bicubic}_{\times 2}(x) + \mathrm{PS}\big(T_w(R_w^{(n)}\cdots R_w^{(1)}(H_w x))\big),

a 3x3 head :math:`H_w: 1 \to w`, residual blocks :math:`R_w(z) = z + C_2\,\mathrm{ReLU}(C_1 z)` of
3x3 convolutions :math:`w \to w`, a 3x3 tail :math:`T_w: w \to 4` and a pixel shuffle PS. Its
forward cost per LR pixel is (:func:`sr_flops`, 2 FLOPs per multiply-add, the convention of
PyTorch's counter)

.. math:: F(w) = 2 \cdot 9\,(w + 2 n w^2 + 4 w),

so halving the width roughly quarters the cost.

**Complexity categories.** Patches are put in :math:`K` categories by their gradient score
(:func:`category_edges`, :func:`categorize`). The edges are equally spaced between 0 and a high
quantile of the training scores (the last category is open above), so that the categories are as
*imbalanced* as the data: most patches of natural images are smooth. (Equal-count, quantile
categories would make the balanced sampler below identical to uniform sampling.)

**Hierarchical equalization sampling (HES)** (:class:`BalancedSampler`): draw a category uniformly
among the non-empty ones, then a patch uniformly inside it, so texture-rich categories are seen as
often as smooth ones. The baseline's :class:`UniformSampler` draws patches uniformly.

**Balanced diversity loss (BDLoss)** (:class:`BalancedDiversityLoss`, a reconstruction: the paper's
exact form was not recovered). With per-sample L1 errors :math:`\ell_{w,i}` of sub-net :math:`w`,
category means :math:`\bar\ell_{w,c}` over the batch and a running mean error :math:`e_c` per
category (of the full width),

.. math:: L = \sum_w \frac{\sum_c \pi_{w,c}\, a_c\, \bar\ell_{w,c}}{\sum_c \pi_{w,c}\, a_c},
          \qquad a_c \propto e_c^{\gamma},

where :math:`\pi_{w,c} = 1` if category :math:`c` is routed to width :math:`w` and ``off_weight``
otherwise: each sub-net concentrates on the categories it will serve, small widths on smooth
patches and the full width on texture, and within a width the categories that are still badly
reconstructed weigh more. All widths are trained at every step (the sandwich rule).

**Gradient-projection dynamic inference** (:func:`project_thresholds`, :func:`route`): at test time
only the LR patch is known. Its gradient score is compared with thresholds *projected* from the HR
category edges onto the LR score scale by matching quantiles on the training patches (the share of
training patches below an HR edge equals the share below its LR threshold), the resulting category
is mapped to a width (:func:`category_widths`), and that sub-net reconstructs the patch.
"""
from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

__all__ = ["SlimSR", "sr_flops", "category_edges", "categorize", "category_widths",
           "UniformSampler", "BalancedSampler", "BalancedDiversityLoss", "L1Loss", "train_sr",
           "predict", "category_psnr", "image_psnr", "project_thresholds", "route", "routed_flops"]


# --------------------------------------------------------------------------- the network
class SlimSR(nn.Module):
    """Slimmable ×2 SR network (module docstring). ``forward(lr, width)``; ``width`` one of ``widths``
    (default: the largest)."""

    def __init__(self, widths: Sequence[int] = (8, 16, 32), n_blocks: int = 4):
        super().__init__()
        widths = tuple(int(w) for w in widths)
        if not widths or any(w < 1 for w in widths) or list(widths) != sorted(set(widths)):
            raise ValueError(f"widths must be increasing positive integers, got {widths!r}")
        if int(n_blocks) != n_blocks or n_blocks < 0:
            raise ValueError(f"n_blocks must be a non-negative integer, got {n_blocks!r}")
        self.widths, self.n_blocks = widths, int(n_blocks)
        W = widths[-1]
        self.head = nn.Conv2d(1, W, 3, padding=1)
        self.blocks = nn.ModuleList(nn.ModuleList([nn.Conv2d(W, W, 3, padding=1),
                                                   nn.Conv2d(W, W, 3, padding=1)])
                                    for _ in range(self.n_blocks))
        self.tail = nn.Conv2d(W, 4, 3, padding=1)
        with torch.no_grad():   # start exactly at bicubic: the residual branch's output begins at 0
            self.tail.weight.zero_()
            self.tail.bias.zero_()
            for c1, c2 in self.blocks:
                c2.weight.mul_(0.1)

    @property
    def full_width(self) -> int:
        return self.widths[-1]

    def forward(self, lr: torch.Tensor, width: int | None = None) -> torch.Tensor:
        if lr.dim() != 4 or lr.shape[1] != 1:
            raise ValueError(f"expected grey LR patches [B, 1, h, w], got {tuple(lr.shape)}")
        w = self.full_width if width is None else int(width)
        if w not in self.widths:
            raise ValueError(f"width {width!r} is not one of {self.widths}")
        z = F.conv2d(lr, self.head.weight[:w], self.head.bias[:w], padding=1)
        for c1, c2 in self.blocks:
            h = F.relu(F.conv2d(z, c1.weight[:w, :w], c1.bias[:w], padding=1))
            z = z + F.conv2d(h, c2.weight[:w, :w], c2.bias[:w], padding=1)
        res = F.pixel_shuffle(F.conv2d(z, self.tail.weight[:, :w], self.tail.bias, padding=1), 2)
        up = F.interpolate(lr, scale_factor=2, mode="bicubic", align_corners=False)
        return up + res


def sr_flops(width: int, n_blocks: int, h: int, w: int) -> int:
    """Forward FLOPs of :class:`SlimSR` at ``width`` on one ``h x w`` LR patch (convolutions only,
    2 per multiply-add; the bicubic skip and element-wise work are not counted)."""
    for name, v in (("width", width), ("h", h), ("w", w)):
        if int(v) != v or v < 1:
            raise ValueError(f"{name} must be a positive integer, got {v!r}")
    if int(n_blocks) != n_blocks or n_blocks < 0:
        raise ValueError(f"n_blocks must be a non-negative integer, got {n_blocks!r}")
    macs_per_pixel = 9 * (1 * width + 2 * n_blocks * width * width + width * 4)
    return int(2 * macs_per_pixel * h * w)


# --------------------------------------------------------------------------- categories
def category_edges(scores, k: int = 5, upper_quantile: float = 0.99) -> torch.Tensor:
    """``k - 1`` interior edges equally spaced on ``[0, quantile(scores, upper_quantile)]``."""
    s = torch.as_tensor(scores, dtype=torch.float64)
    if s.dim() != 1 or s.numel() == 0:
        raise ValueError(f"scores must be a non-empty 1-D array, got shape {tuple(s.shape)}")
    if int(k) != k or k < 2:
        raise ValueError(f"k must be an integer >= 2, got {k!r}")
    if not 0 < upper_quantile <= 1:
        raise ValueError(f"upper_quantile must be in (0, 1], got {upper_quantile!r}")
    top = float(torch.quantile(s, upper_quantile))
    if not top > 0:
        raise ValueError("the scores' upper quantile is 0: every patch is flat")
    return torch.linspace(0.0, top, int(k) + 1, dtype=torch.float64)[1:-1].float()


def categorize(scores, edges) -> torch.Tensor:
    """Category of each score: 0 below the first edge, ..., ``len(edges)`` above the last."""
    s = torch.as_tensor(scores, dtype=torch.float32)
    e = torch.as_tensor(edges, dtype=torch.float32)
    if e.dim() != 1 or (e.numel() > 1 and not bool((e[1:] > e[:-1]).all())):
        raise ValueError("edges must be a strictly increasing 1-D array")
    return torch.bucketize(s, e, right=True)


def category_widths(k: int, n_widths: int) -> list[int]:
    """Width index of each of ``k`` categories: consecutive categories share a width, the smoothest
    get the smallest (K = 5, 3 widths: [0, 0, 1, 1, 2])."""
    if int(k) != k or k < 1 or int(n_widths) != n_widths or n_widths < 1:
        raise ValueError(f"k and n_widths must be positive integers, got {k!r}, {n_widths!r}")
    return [min(n_widths - 1, (c * n_widths) // k) for c in range(k)]


# --------------------------------------------------------------------------- samplers
class UniformSampler:
    """The baseline: every patch equally likely."""

    def __init__(self, n: int, generator: torch.Generator):
        if int(n) != n or n < 1:
            raise ValueError(f"n must be a positive integer, got {n!r}")
        self.n, self.g = int(n), generator

    def sample(self, batch_size: int) -> torch.Tensor:
        return torch.randint(self.n, (int(batch_size),), generator=self.g)


class BalancedSampler:
    """Hierarchical equalization sampling: a category uniformly among the non-empty ones, then a
    patch uniformly inside it."""

    def __init__(self, categories, k: int, generator: torch.Generator):
        cats = torch.as_tensor(categories, dtype=torch.long)
        if cats.dim() != 1 or cats.numel() == 0:
            raise ValueError("categories must be a non-empty 1-D array")
        if int(cats.min()) < 0 or int(cats.max()) >= k:
            raise ValueError(f"categories must lie in [0, {k})")
        self.members = [torch.nonzero(cats == c).flatten() for c in range(int(k))]
        self.members = [m for m in self.members if m.numel()]
        self.g = generator

    def sample(self, batch_size: int) -> torch.Tensor:
        c = torch.randint(len(self.members), (int(batch_size),), generator=self.g)
        u = torch.rand(int(batch_size), generator=self.g)
        sizes = torch.tensor([m.numel() for m in self.members])
        j = (u * sizes[c]).long().clamp_max(sizes[c] - 1)
        return torch.stack([self.members[ci][ji] for ci, ji in zip(c.tolist(), j.tolist())])


# --------------------------------------------------------------------------- losses
class L1Loss:
    """The baseline's loss: mean absolute error of the full width only."""

    def widths(self, model: SlimSR) -> tuple:
        return (model.full_width,)

    def __call__(self, errors: dict, cats: torch.Tensor) -> torch.Tensor:
        (e,) = errors.values()
        return e.mean()


class BalancedDiversityLoss:
    """BDLoss as reconstructed in the module docstring. ``errors`` maps each trained width to the
    per-sample L1 ``[B]``; ``cats [B]`` are the samples' categories."""

    def __init__(self, k: int, widths: Sequence[int], gamma: float = 0.5, off_weight: float = 0.2,
                 momentum: float = 0.9):
        if not 0 <= off_weight <= 1:
            raise ValueError(f"off_weight must be in [0, 1], got {off_weight!r}")
        if not 0 <= momentum < 1:
            raise ValueError(f"momentum must be in [0, 1), got {momentum!r}")
        self.k, self.all_widths = int(k), tuple(widths)
        self.gamma, self.momentum = float(gamma), float(momentum)
        home = category_widths(self.k, len(self.all_widths))
        self.pi = torch.full((len(self.all_widths), self.k), float(off_weight))
        for c, wi in enumerate(home):
            self.pi[wi, c] = 1.0
        self.running = None   # running mean L1 per category (full width), set on first call

    def widths(self, model: SlimSR) -> tuple:
        if tuple(model.widths) != self.all_widths:
            raise ValueError(f"loss built for widths {self.all_widths}, model has {model.widths}")
        return self.all_widths

    def __call__(self, errors: dict, cats: torch.Tensor) -> torch.Tensor:
        cats = cats.long()
        present = torch.bincount(cats, minlength=self.k) > 0
        onehot = F.one_hot(cats, self.k).float()                     # [B, K]
        counts = onehot.sum(0).clamp_min(1.0)
        full = errors[self.all_widths[-1]].detach()
        batch_mean = (onehot * full[:, None]).sum(0) / counts
        if self.running is None:
            self.running = torch.where(present, batch_mean, batch_mean[present].mean())
        else:
            m = self.momentum
            self.running = torch.where(present, m * self.running + (1 - m) * batch_mean, self.running)
        a = self.running.clamp_min(1e-8) ** self.gamma
        a = a / a.mean()
        total = 0.0
        for wi, w in enumerate(self.all_widths):
            cat_mean = (onehot * errors[w][:, None]).sum(0) / counts   # \bar l_{w,c}
            weight = self.pi[wi] * a * present
            total = total + (weight * cat_mean).sum() / weight.sum()
        return total


# --------------------------------------------------------------------------- training
def train_sr(model: SlimSR, lr_patches: torch.Tensor, hr_patches: torch.Tensor, cats: torch.Tensor, *,
             sampler, loss, steps: int, batch_size: int, lr: float = 2e-3) -> list[float]:
    """Adam with cosine decay for ``steps`` steps; each step draws a batch from ``sampler`` and
    trains every width the ``loss`` asks for (baseline: full width). Returns the loss per step."""
    if int(steps) != steps or steps < 0 or int(batch_size) != batch_size or batch_size < 1:
        raise ValueError(f"steps must be >= 0 and batch_size >= 1, got {steps!r}, {batch_size!r}")
    if not (lr_patches.shape[0] == hr_patches.shape[0] == cats.shape[0]):
        raise ValueError("lr_patches, hr_patches and cats must have the same length")
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda t: 0.5 * (1 + math.cos(math.pi * min(t, steps) / max(steps, 1))))
    widths = loss.widths(model)
    history = []
    model.train()
    for _ in range(int(steps)):
        idx = sampler.sample(batch_size)
        x, y, c = lr_patches[idx], hr_patches[idx], cats[idx]
        errors = {w: (model(x, w) - y).abs().flatten(1).mean(1) for w in widths}
        value = loss(errors, c)
        opt.zero_grad(set_to_none=True)
        value.backward()
        opt.step()
        sched.step()
        history.append(float(value.detach()))
    return history


# --------------------------------------------------------------------------- evaluation
@torch.no_grad()
def predict(model: SlimSR, lr_patches: torch.Tensor, widths=None, chunk: int = 512) -> torch.Tensor:
    """SR of every patch, clamped to [0, 1]; ``widths`` is one width for all, or one per patch."""
    model.eval()
    n = lr_patches.shape[0]
    if widths is None or np.isscalar(widths) or (torch.is_tensor(widths) and widths.dim() == 0):
        w = model.full_width if widths is None else int(widths)
        out = torch.cat([model(lr_patches[i:i + chunk], w) for i in range(0, n, chunk)])
        return out.clamp(0, 1)
    widths = torch.as_tensor(widths, dtype=torch.long)
    if widths.shape != (n,):
        raise ValueError(f"need one width per patch ({n}), got shape {tuple(widths.shape)}")
    out = torch.empty(n, 1, 2 * lr_patches.shape[2], 2 * lr_patches.shape[3])
    for w in widths.unique().tolist():
        sel = torch.nonzero(widths == w).flatten()
        out[sel] = torch.cat([model(lr_patches[sel[i:i + chunk]], w) for i in range(0, sel.numel(), chunk)])
    return out.clamp(0, 1)


def _psnr_of_mse(mse: torch.Tensor) -> torch.Tensor:
    return 10.0 * torch.log10(1.0 / mse.clamp_min(1e-12))


def category_psnr(sr: torch.Tensor, hr: torch.Tensor, cats: torch.Tensor, k: int) -> torch.Tensor:
    """PSNR (dB) of each category, from the mean squared error over all its patches (NaN if empty)."""
    if sr.shape != hr.shape:
        raise ValueError(f"sr and hr differ in shape: {tuple(sr.shape)} vs {tuple(hr.shape)}")
    mse = (sr - hr).pow(2).flatten(1).mean(1)
    out = torch.full((int(k),), float("nan"))
    for c in range(int(k)):
        m = cats == c
        if bool(m.any()):
            out[c] = _psnr_of_mse(mse[m].mean())
    return out


def image_psnr(sr: torch.Tensor, hr: torch.Tensor, image: torch.Tensor) -> torch.Tensor:
    """PSNR (dB) of each test image reconstructed from its tiles (MSE over all its pixels), in the
    order of the image indices present."""
    if sr.shape != hr.shape:
        raise ValueError(f"sr and hr differ in shape: {tuple(sr.shape)} vs {tuple(hr.shape)}")
    mse = (sr - hr).pow(2).flatten(1).mean(1)
    return torch.stack([_psnr_of_mse(mse[image == i].mean()) for i in image.unique()])


# --------------------------------------------------------------------------- dynamic inference
def project_thresholds(score_hr, score_lr, edges_hr) -> torch.Tensor:
    """LR-score thresholds matching HR category edges by quantile on the training patches."""
    s_hr = torch.as_tensor(score_hr, dtype=torch.float64)
    s_lr = torch.as_tensor(score_lr, dtype=torch.float64)
    if s_hr.shape != s_lr.shape or s_hr.dim() != 1:
        raise ValueError("score_hr and score_lr must be 1-D and of equal length")
    e = torch.as_tensor(edges_hr, dtype=torch.float64)
    q = torch.stack([(s_hr <= v).double().mean() for v in e])
    t = torch.quantile(s_lr, q.clamp(0, 1))
    # keep them strictly increasing (ties only when a category is empty)
    for i in range(1, t.numel()):
        t[i] = torch.maximum(t[i], t[i - 1] + 1e-12)
    return t.float()


def route(score_lr, thresholds_lr, widths: Sequence[int], k: int) -> torch.Tensor:
    """Width of each LR patch: its projected category mapped by :func:`category_widths`."""
    cats = categorize(score_lr, thresholds_lr)
    table = torch.tensor([widths[i] for i in category_widths(k, len(widths))])
    return table[cats]


def routed_flops(routes, n_blocks: int, h: int, w: int) -> int:
    """Total forward FLOPs of reconstructing each patch at its routed width."""
    routes = torch.as_tensor(routes)
    return int(sum(int(n) * sr_flops(int(wd), n_blocks, h, w)
                   for wd, n in zip(*torch.unique(routes, return_counts=True))))
