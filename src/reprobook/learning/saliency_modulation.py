r"""Saliency-driven modulation of a continual learner (SER, Bellitto et al., NeurIPS 2024), small.

Two convolutional branches with the **same** stage architecture (:class:`StageNet`: per stage a
3x3 convolution and a GroupNorm, whose output :math:`f_l` is the stage's *pre-ReLU* feature):

* a **saliency network** (:class:`SaliencyNet`) = a backbone plus a decoder (a 1x1 convolution per
  stage, upsampled bilinearly to the input size and summed) giving a log-density over pixels,
  :math:`\log p = \operatorname{log\,softmax}_{\text{pixels}}(\text{decoder})`. It is trained
  *separately* (:func:`train_saliency`, Adam) on saliency maps :math:`t` with the KL divergence of
  the UNISAL family,

  .. math:: \mathrm{KL}(t\,\|\,p) = \sum_{\text{pixels}} t \,(\log t - \log p),

  then frozen.
* a **learner** (:class:`ModulatedLearner`) = a backbone and a linear head on the global average of
  its last stage. With modulation, stage :math:`l`'s pre-ReLU feature is replaced by
  :math:`\mathrm{ReLU}(f_l \odot s_l)`, where :math:`s_l` is the saliency backbone's stage-:math:`l`
  pre-ReLU feature of the same image and shape (the official ``MNPMultiply``). The saliency
  features enter *detached*: classification gradients never reach the saliency network (its
  parameters are frozen as well), and rehearsal (ER, DER++) recomputes them for replayed images.

Because the learner is an ordinary ``nn.Module`` mapping images to logits, the replay methods of
:mod:`reprobook.learning.continual` train it unchanged: the buffer stores images, as in SER.

``mode`` of the learner: ``"none"`` (no modulation: the baseline), ``"saliency"`` (SER, with the
saliency network given, or a broken one for a control: untrained, or trained on the wrong maps),
``"constant"`` (every :math:`s_l = 1`: modulation with no information, identical to ``"none"``;
kept as the unit-tested identity) and ``"oracle"`` (a positive control: the *true* saliency map,
average-pooled to each stage's grid and scaled to maximum 1, gates every channel). The oracle needs
the map at test and replay time, so inputs carry it as a second channel (:func:`stack_inputs`):
channel 0 is the image and the only channel any network looks at, channel 1 the map, read by the
oracle alone and never attacked.

**FGSM** (Goodfellow et al. 2015): :math:`x' = \mathrm{clip}_{[0,1]}(x + \varepsilon\,
\mathrm{sign}\,\nabla_x \mathrm{CE}(g(x), y))`, white-box through *both* branches (the attacker
differentiates through the saliency network too).
"""
from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn as nn
import torch.nn.functional as F


__all__ = ["MODES", "StageNet", "SaliencyNet", "ModulatedLearner", "saliency_kl", "train_saliency",
           "stack_inputs", "fgsm", "accuracy"]

MODES = ("none", "saliency", "constant", "oracle")


class StageNet(nn.Module):
    """Stages of conv3x3 (stride) + GroupNorm; :meth:`features` returns every stage's pre-ReLU
    feature (after modulation, if given) and the final post-ReLU map."""

    def __init__(self, in_channels: int = 1, widths: Sequence[int] = (16, 32, 64),
                 strides: Sequence[int] = (1, 2, 2), groups: int = 4):
        super().__init__()
        widths, strides = tuple(int(w) for w in widths), tuple(int(s) for s in strides)
        if not widths or len(widths) != len(strides):
            raise ValueError(f"widths {widths} and strides {strides} must be non-empty and the "
                             "same length")
        if any(w % groups for w in widths):
            raise ValueError(f"every width must be divisible by groups={groups}, got {widths}")
        self.widths, self.strides = widths, strides
        convs, norms, c = [], [], in_channels
        for w, s in zip(widths, strides):
            convs.append(nn.Conv2d(c, w, 3, stride=s, padding=1))
            norms.append(nn.GroupNorm(groups, w))
            c = w
        self.convs, self.norms = nn.ModuleList(convs), nn.ModuleList(norms)

    def features(self, x: torch.Tensor, modulation: Sequence[torch.Tensor] | None = None):
        if x.ndim != 4 or x.shape[1] != self.convs[0].in_channels:
            raise ValueError(f"expected images [B, {self.convs[0].in_channels}, H, W], got "
                             f"{tuple(x.shape)}")
        if modulation is not None and len(modulation) != len(self.convs):
            raise ValueError(f"modulation needs one tensor per stage ({len(self.convs)}), got "
                             f"{len(modulation)}")
        feats = []
        for l, (conv, norm) in enumerate(zip(self.convs, self.norms)):
            f = norm(conv(x))
            if modulation is not None:
                f = f * modulation[l]
            feats.append(f)
            x = F.relu(f)
        return feats, x


class SaliencyNet(nn.Module):
    """A :class:`StageNet` plus a multi-scale 1x1 decoder; ``forward`` gives the log-density over
    pixels ``[B, H, W]`` and the backbone's per-stage pre-ReLU features."""

    def __init__(self, widths: Sequence[int] = (16, 32, 64), strides: Sequence[int] = (1, 2, 2),
                 groups: int = 4):
        super().__init__()
        self.backbone = StageNet(1, widths, strides, groups)
        self.heads = nn.ModuleList(nn.Conv2d(w, 1, 1) for w in self.backbone.widths)

    def forward(self, x: torch.Tensor):
        feats, _ = self.backbone.features(x)
        size = x.shape[-2:]
        logit = sum(F.interpolate(h(F.relu(f)), size=size, mode="bilinear", align_corners=False)
                    for h, f in zip(self.heads, feats))[:, 0]
        return F.log_softmax(logit.flatten(1), dim=1).view_as(logit), feats

    def freeze(self) -> "SaliencyNet":
        """No parameter learns any more (used once trained); returns self in eval mode."""
        for p in self.parameters():
            p.requires_grad_(False)
        return self.eval()


def saliency_kl(log_pred: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Mean over the batch of KL(target || pred) for densities over pixels ``[B, H, W]``
    (``log_pred`` a log-density, ``target`` non-negative summing to 1; 0 log 0 = 0)."""
    if log_pred.shape != target.shape or log_pred.ndim != 3:
        raise ValueError(f"log_pred and target must both be [B, H, W], got {tuple(log_pred.shape)} "
                         f"and {tuple(target.shape)}")
    t = target.flatten(1)
    kl = torch.where(t > 0, t * (torch.log(t.clamp_min(1e-30)) - log_pred.flatten(1)),
                     torch.zeros_like(t))
    return kl.sum(1).mean()


def train_saliency(net: SaliencyNet, images: torch.Tensor, maps: torch.Tensor, *, epochs: int = 5,
                   batch: int = 32, lr: float = 3e-3, seed: int = 0) -> list[float]:
    """Train ``net`` (Adam) on ``images [N, 1, H, W]`` and their maps ``[N, H, W]``; returns the
    mean KL of every epoch (the first measured before any update, as a reference)."""
    if images.ndim != 4 or images.shape[1] != 1 or maps.shape != (images.shape[0], *images.shape[2:]):
        raise ValueError(f"need images [N, 1, H, W] and maps [N, H, W], got {tuple(images.shape)} "
                         f"and {tuple(maps.shape)}")
    gen = torch.Generator().manual_seed(int(seed))
    opt = torch.optim.Adam(net.parameters(), lr=lr)
    net.train()
    with torch.no_grad():
        history = [saliency_kl(net(images)[0], maps).item()]
    for _ in range(epochs):
        order = torch.randperm(len(images), generator=gen)
        total = 0.0
        for s in range(0, len(images), batch):
            idx = order[s:s + batch]
            loss = saliency_kl(net(images[idx])[0], maps[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += loss.item() * len(idx)
        history.append(total / len(images))
    return history


def stack_inputs(images, maps) -> torch.Tensor:
    """``[N, 2, H, W]`` learner inputs: channel 0 the image, channel 1 the saliency map scaled to
    maximum 1 per item (read only by the oracle control)."""
    images = torch.as_tensor(images, dtype=torch.float32)
    maps = torch.as_tensor(maps, dtype=torch.float32)
    if images.ndim != 3 or maps.shape != images.shape:
        raise ValueError(f"images and maps must both be [N, H, W], got {tuple(images.shape)} and "
                         f"{tuple(maps.shape)}")
    peak = maps.flatten(1).amax(1).clamp_min(1e-12)[:, None, None]
    return torch.stack([images, maps / peak], dim=1)


class ModulatedLearner(nn.Module):
    """A classifier whose stages are modulated by a separately trained saliency network (see the
    module docstring for ``mode``). Inputs: ``[B, C >= 1, H, W]``, channel 0 the image."""

    def __init__(self, n_classes: int, mode: str = "none", saliency: SaliencyNet | None = None,
                 widths: Sequence[int] = (16, 32, 64), strides: Sequence[int] = (1, 2, 2),
                 groups: int = 4):
        super().__init__()
        if mode not in MODES:
            raise ValueError(f"unknown modulation mode {mode!r}; choose from {MODES}")
        if (mode == "saliency") != (saliency is not None):
            raise ValueError("mode 'saliency' needs a saliency network, and only it takes one")
        self.mode = mode
        self.backbone = StageNet(1, widths, strides, groups)
        if saliency is not None:
            if saliency.backbone.widths != self.backbone.widths or \
                    saliency.backbone.strides != self.backbone.strides:
                raise ValueError("the saliency network must have the learner's stage architecture")
            saliency.freeze()
        self.saliency = saliency
        self.head = nn.Linear(self.backbone.widths[-1], n_classes)

    def train(self, mode: bool = True):
        super().train(mode)
        if self.saliency is not None:
            self.saliency.eval()       # frozen: always in inference mode
        return self

    def modulation(self, x: torch.Tensor, through_saliency: bool = False):
        """The per-stage modulation tensors for inputs ``x`` (None for ``mode='none'``)."""
        img = x[:, :1]
        if self.mode == "none":
            return None
        if self.mode == "saliency":
            with torch.set_grad_enabled(through_saliency and torch.is_grad_enabled()):
                feats = self.saliency(img)[1]
            return feats if through_saliency else [f.detach() for f in feats]
        shapes = self._stage_shapes(img)
        if self.mode == "constant":
            return [torch.ones(1, *s, device=x.device) for s in shapes]
        if x.shape[1] < 2:
            raise ValueError("the oracle reads the saliency map from channel 1: use stack_inputs")
        m = x[:, 1:2].detach()
        out = []
        for c, h, w in shapes:
            g = F.adaptive_avg_pool2d(m, (h, w))
            out.append(g / g.flatten(1).amax(1).clamp_min(1e-12)[:, None, None, None])
        return out

    def _stage_shapes(self, img):
        h, w = img.shape[-2:]
        shapes = []
        for c, s in zip(self.backbone.widths, self.backbone.strides):
            h, w = (h - 1) // s + 1, (w - 1) // s + 1
            shapes.append((c, h, w))
        return shapes

    def forward(self, x: torch.Tensor, through_saliency: bool = False) -> torch.Tensor:
        if x.ndim != 4 or x.shape[1] < 1:
            raise ValueError(f"expected inputs [B, C >= 1, H, W], got {tuple(x.shape)}")
        _, out = self.backbone.features(x[:, :1], self.modulation(x, through_saliency))
        return self.head(out.mean(dim=(2, 3)))


def fgsm(model: ModulatedLearner, x: torch.Tensor, y: torch.Tensor, eps: float) -> torch.Tensor:
    """FGSM inputs at L-infinity radius ``eps`` on channel 0 (the image), clipped to [0, 1];
    gradients flow through the saliency branch too. Other channels are left as they are."""
    if not eps >= 0:
        raise ValueError(f"eps must be >= 0, got {eps!r}")
    was = model.training
    model.eval()
    img = x[:, :1].clone().requires_grad_(True)
    with torch.enable_grad():
        loss = F.cross_entropy(model(torch.cat([img, x[:, 1:]], dim=1), through_saliency=True), y)
        (g,) = torch.autograd.grad(loss, img)
    model.train(was)
    adv = (img.detach() + eps * g.sign()).clamp(0.0, 1.0)
    return torch.cat([adv, x[:, 1:]], dim=1)


@torch.no_grad()
def accuracy(model: nn.Module, x: torch.Tensor, y: torch.Tensor,
             classes: Sequence[int] | None = None, batch: int = 512) -> float:
    """Share of ``x`` classified as ``y``; with ``classes`` the argmax is taken over those logits
    only (task-incremental evaluation: the task's classes are given)."""
    if len(x) != len(y) or len(x) == 0:
        raise ValueError(f"x and y must be non-empty and the same length, got {len(x)} and {len(y)}")
    was = model.training
    model.eval()
    hits = 0
    for i in range(0, len(x), batch):
        logits = model(x[i:i + batch])
        if classes is not None:
            keep = torch.as_tensor(list(classes))
            pred = keep[logits[:, keep].argmax(-1)]
        else:
            pred = logits.argmax(-1)
        hits += (pred == y[i:i + batch]).sum().item()
    model.train(was)
    return hits / len(x)
