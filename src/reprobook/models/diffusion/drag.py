r"""Drag editing by energy-guided DDIM: the editing (point-correspondence) energy, LucidDrag's
semantic and quality guidance terms, a stand-in for its intention reasoner, and handle tracking.

A drag asks that the content at a **handle** point :math:`h` of a source image :math:`x^{\rm src}`
move to a **target** point :math:`g`, changing nothing outside an editable **mask** :math:`M`. The
source is DDIM-inverted part way (:mod:`.ddim`) and re-sampled with guidance energies on
:math:`\hat x_0` or :math:`x_t`:

* **editing guidance** (DragonDiffusion-style feature correspondence, the baseline's whole signal):

  .. math:: E_{\rm edit}=\tfrac1{|P|}\big\|\phi(\hat x_0)[P(g)]-\phi(x^{\rm src})[P(h)]\big\|^2
            +\lambda\,\tfrac1{|\Omega|}\big\|(\hat x_0-x^{\rm src})\odot(1-M)\big\|^2,

  :math:`\phi` a fixed random convolutional feature map, :math:`P(p)` a :math:`(2r+1)^2` patch around
  point :math:`p` read by bilinear interpolation;
* **semantic guidance**: an intention says *what* moves and *how*: where the object's other parts
  (its centre :math:`c` and tail :math:`\tau`) must end up, :math:`c^\star,\tau^\star`. The guidance
  asks the features at those parts to follow:
  :math:`E_{\rm sem}=\sum_{p\in\{c,\tau\}}\tfrac1{|P|}\|\phi(\hat x_0)[P(p^\star)]-\phi(x^{\rm src})[P(p)]\|^2`.
  It plays the part of the paper's semantic editing direction (a text direction from the reasoned
  intention): without it the drag of one point leaves the rest of the object to chance. (A first
  version read the keypoints with a small CNN recogniser and guided by its gradient; that gradient
  was adversarial -- it raised the error to every valid outcome -- so the chapter does not use it.)
* **quality guidance**: classifier guidance by a time-conditioned fidelity discriminator
  :math:`D_\psi(x_t,t)` (logit of "a clean sprite"), :math:`E_{\rm qual}=-\log\mathrm{sigmoid}\,D_\psi`.

:func:`reason_intentions` replaces the paper's LVLM+LLM intention reasoner. It does not read the
image: it is given the sprite's true parts (as the LVLM would localise them) and returns every valid
interpretation of the drag (:data:`~reprobook.data.sprite_images.INTENTIONS`) with its target
keypoints. It is an oracle for "what the valid intentions are", which the paper's reasoner has to
guess; it is not an oracle for the output image.

:func:`locate` tracks the handle in an output by normalised cross-correlation with the source's
handle patch (the drag-accuracy metric, independent of the guidance's feature map).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from ...data.sprite_images import INTENTIONS, SpriteParams, intention_outcome, is_valid, keypoints, silhouette
from .ddim import Energy, ddim_invert, ddim_sample

__all__ = ["RandomFeatures", "patch_at", "editing_energy", "semantic_energy", "quality_energy",
           "Intention", "reason_intentions", "edit_mask", "locate", "drag_edit"]


class RandomFeatures(nn.Module):
    """A fixed random feature map :math:`\\phi`: 3x3 conv to ``channels`` maps, then tanh."""

    def __init__(self, in_channels: int = 3, channels: int = 16, seed: int = 0):
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        self.conv = nn.Conv2d(in_channels, channels, 3, padding=1)
        with torch.no_grad():
            self.conv.weight.copy_(torch.randn(self.conv.weight.shape, generator=g) / (3 * in_channels ** 0.5))
            self.conv.bias.zero_()
        self.requires_grad_(False)

    def forward(self, x):
        return torch.tanh(self.conv(x))


def patch_at(feat: torch.Tensor, centres: torch.Tensor, radius: int = 1) -> torch.Tensor:
    """Bilinear ``(2r+1)^2`` patches of ``feat`` (n, C, H, W) around ``centres`` (n, 2) = (x, y) px;
    returns (n, C, 2r+1, 2r+1)."""
    if feat.ndim != 4 or centres.shape != (feat.shape[0], 2):
        raise ValueError(f"need feat (n, C, H, W) and centres (n, 2); got {tuple(feat.shape)}, "
                         f"{tuple(centres.shape)}")
    h, w = feat.shape[-2:]
    off = torch.arange(-radius, radius + 1, dtype=feat.dtype, device=feat.device)
    oy, ox = torch.meshgrid(off, off, indexing="ij")
    px = centres[:, 0, None, None].to(feat.dtype) + ox
    py = centres[:, 1, None, None].to(feat.dtype) + oy
    grid = torch.stack([2 * px / (w - 1) - 1, 2 * py / (h - 1) - 1], -1)
    return F.grid_sample(feat, grid, mode="bilinear", padding_mode="border", align_corners=True)


def editing_energy(phi: nn.Module, src: torch.Tensor, handle: torch.Tensor, target: torch.Tensor,
                   mask: torch.Tensor, keep: float = 1.0, radius: int = 1) -> Energy:
    """:math:`E_{\\rm edit}` (module docstring) as an energy of ``(x_t, x0_hat, t)``."""
    if src.ndim != 4 or mask.shape != (src.shape[0], *src.shape[-2:]):
        raise ValueError(f"need src (n, C, H, W) and mask (n, H, W); got {tuple(src.shape)}, {tuple(mask.shape)}")
    with torch.no_grad():
        ref = patch_at(phi(src), handle, radius)
    outside = (1 - mask)[:, None]

    def energy(x_t, x0, t):
        corr = ((patch_at(phi(x0), target, radius) - ref) ** 2).mean((1, 2, 3))
        return corr + keep * (((x0 - src) * outside) ** 2).mean((1, 2, 3))
    return energy


def semantic_energy(phi: nn.Module, src: torch.Tensor, src_kp: torch.Tensor, target_kp: torch.Tensor,
                    radius: int = 1) -> Energy:
    """:math:`E_{\\rm sem}`: the source's centre and tail features (keypoints 1, 2 of ``src_kp``, (n, 3, 2))
    asked at the intention's centre and tail (``target_kp``)."""
    if src_kp.shape != target_kp.shape or src_kp.ndim != 3 or src_kp.shape[1:] != (3, 2):
        raise ValueError(f"src_kp and target_kp must both have shape (n, 3, 2), got {tuple(src_kp.shape)}, "
                         f"{tuple(target_kp.shape)}")
    with torch.no_grad():
        f = phi(src)
        refs = [patch_at(f, src_kp[:, j], radius) for j in (1, 2)]

    def energy(x_t, x0, t):
        g = phi(x0)
        return sum(((patch_at(g, target_kp[:, j], radius) - r) ** 2).mean((1, 2, 3))
                   for j, r in zip((1, 2), refs))
    return energy


def quality_energy(disc: nn.Module, alphas_cumprod: torch.Tensor) -> Energy:
    """:math:`E_{\\rm qual}=-\\log\\mathrm{sigmoid}\\,D_\\psi`; the discriminator sees the VE state
    :math:`x_t/\\sqrt{\\bar\\alpha_t}` at level :math:`\\sqrt{(1-\\bar\\alpha_t)/\\bar\\alpha_t}`."""
    def energy(x_t, x0, t):
        ab = float(alphas_cumprod[t])
        return F.softplus(-disc(x_t / ab ** 0.5, ((1 - ab) / ab) ** 0.5)).reshape(-1)
    return energy


@dataclass
class Intention:
    """One interpretation of a drag: its name, the resulting sprite, its keypoints (n, 3, 2), validity."""

    name: str
    outcome: SpriteParams
    keypoints: np.ndarray
    valid: np.ndarray


def reason_intentions(src: SpriteParams, target: np.ndarray, size: int,
                      intentions: tuple[str, ...] = INTENTIONS) -> list[Intention]:
    """The stand-in intention reasoner: every valid interpretation of dragging the head to ``target``
    (see the module docstring for what it replaces)."""
    out = []
    for name in intentions:
        o = intention_outcome(src, target, name)
        out.append(Intention(name, o, keypoints(o), is_valid(o, size)))
    return out


def edit_mask(src: SpriteParams, intentions: list[Intention], size: int, dilate: int = 1) -> torch.Tensor:
    """The editable region ``(n, size, size)``: the source object and every valid outcome, dilated
    by ``dilate`` px (one mask for every method, like the user's mask in DragBench)."""
    m = silhouette(src, size)
    for it in intentions:
        m = torch.maximum(m, silhouette(it.outcome, size))
    m = (m > 0.1).float()
    if dilate > 0:
        m = F.max_pool2d(m[:, None], 2 * dilate + 1, stride=1, padding=dilate)[:, 0]
    return m


def locate(images: torch.Tensor, template: torch.Tensor) -> torch.Tensor:
    """Best normalised-cross-correlation position (x, y) (n, 2) of each ``template`` (n, C, k, k),
    k odd, in each image (n, C, H, W); the template's centre, integer pixels."""
    if images.ndim != 4 or template.ndim != 4 or template.shape[:2] != images.shape[:2]:
        raise ValueError(f"need images (n, C, H, W) and templates (n, C, k, k) with the same n, C; got "
                         f"{tuple(images.shape)}, {tuple(template.shape)}")
    k = template.shape[-1]
    if k % 2 == 0 or template.shape[-2] != k:
        raise ValueError(f"templates must be square with an odd side, got {tuple(template.shape[-2:])}")
    n, c, h, w = images.shape
    cols = F.unfold(F.pad(images, [k // 2] * 4, mode="replicate"), k).transpose(1, 2)  # (n, HW, Ck^2)
    cols = cols - cols.mean(2, keepdim=True)
    tpl = template.reshape(n, 1, -1)
    tpl = tpl - tpl.mean(2, keepdim=True)
    ncc = (cols * tpl).sum(2) / (cols.norm(dim=2) * tpl.norm(dim=2) + 1e-8)
    best = ncc.argmax(1)
    return torch.stack([best % w, best // w], 1).to(images.dtype)


def drag_edit(eps_fn: Callable, alphas_cumprod: torch.Tensor, src: torch.Tensor, timesteps: list[int],
              energies: list[tuple[Energy, float]], *, eta: float = 0.0,
              generator: torch.Generator | None = None, guide_steps: int | None = None,
              latent: torch.Tensor | None = None) -> torch.Tensor:
    """Invert ``src`` to ``timesteps[0]`` (or start from a given ``latent``) and re-sample it with the
    guidance ``energies``; returns the edited images."""
    x = ddim_invert(eps_fn, src, timesteps, alphas_cumprod) if latent is None else latent
    return ddim_sample(eps_fn, x, timesteps, alphas_cumprod, eta=eta, generator=generator,
                       energies=energies, guide_steps=guide_steps)
