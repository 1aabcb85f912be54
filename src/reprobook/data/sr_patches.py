r"""×2 super-resolution patches cut from real photographs and real textures, with a complexity score.

Images (grey levels in [0, 1], nothing downloaded): the photographs of
:mod:`reprobook.data.natural_images` (scikit-image's ``camera``, ``astronaut``, ``coffee``,
``chelsea``; scikit-learn's ``china``, ``flower``) and scikit-image's three texture photographs
``brick``, ``grass`` and ``gravel``. Train and test sets are split **by image** (:data:`TRAIN_IMAGES`,
:data:`TEST_IMAGES`), each holding photos and a texture, so no test pixel was seen in training.

Degradation: the classical bicubic ×2 model. The HR image is cropped to even size and downsampled
once, whole, with antialiased bicubic interpolation (``torch.nn.functional.interpolate(...,
mode="bicubic", antialias=True)``, the analogue of MATLAB's ``imresize``); patches are then cut at
aligned positions, an HR patch of ``p x p`` at ``(2i, 2j)`` and its LR patch of ``p/2 x p/2`` at
``(i, j)``, so no patch carries an artificial border from degrading it alone.

Complexity score of a patch (the paper's "texture richness", measured by gradients): the mean Sobel
gradient magnitude

.. math:: s = \frac{1}{|P|}\sum_{u \in P} \sqrt{(\partial_x I)^2 + (\partial_y I)^2}

computed with :func:`kornia.filters.spatial_gradient` (normalised 3x3 Sobel kernels, replicated border) on the HR
patch (``score_hr``, what training categorises by) and on the LR patch (``score_lr``, the only one
available at inference).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from reprobook.data.natural_images import PHOTOS, photo

TEXTURES = ("brick", "grass", "gravel")
TRAIN_IMAGES = ("camera", "astronaut", "chelsea", "china", "brick", "grass")
TEST_IMAGES = ("coffee", "flower", "gravel")
IMAGES = PHOTOS + TEXTURES

__all__ = ["IMAGES", "TEXTURES", "TRAIN_IMAGES", "TEST_IMAGES", "SRPatches", "hr_image",
           "degrade_x2", "gradient_score", "make_patches"]


def hr_image(name: str) -> np.ndarray:
    """A photograph or texture as a float64 grey-level array in [0, 1]."""
    if name in PHOTOS:
        return np.asarray(photo(name))
    if name in TEXTURES:
        import skimage.data

        return np.asarray(getattr(skimage.data, name)(), dtype=np.float64) / 255.0
    raise ValueError(f"unknown image {name!r}; choose from {IMAGES}")


def degrade_x2(hr: torch.Tensor) -> torch.Tensor:
    """Bicubic ×2 downsampling (antialiased) of ``[B, C, H, W]`` with even H and W, clamped to [0, 1]."""
    if not isinstance(hr, torch.Tensor) or hr.dim() != 4:
        raise ValueError(f"expected a tensor [B, C, H, W], got {getattr(hr, 'shape', type(hr))}")
    H, W = hr.shape[-2:]
    if H % 2 or W % 2:
        raise ValueError(f"H and W must be even for ×2, got {H}x{W}")
    lr = F.interpolate(hr.float(), size=(H // 2, W // 2), mode="bicubic", antialias=True,
                       align_corners=False)
    return lr.clamp(0.0, 1.0)


def gradient_score(x: torch.Tensor) -> torch.Tensor:
    """Mean Sobel gradient magnitude of each image of ``[B, 1, h, w]`` -> ``[B]`` (module docstring)."""
    import kornia

    if not isinstance(x, torch.Tensor) or x.dim() != 4 or x.shape[1] != 1:
        raise ValueError(f"expected grey patches [B, 1, h, w], got {getattr(x, 'shape', type(x))}")
    g = kornia.filters.spatial_gradient(x.float(), mode="sobel", normalized=True)   # [B, 1, 2, h, w]
    # the magnitude by hand: kornia.filters.sobel adds an eps inside the root (flat patches != 0)
    return g.pow(2).sum(2).sqrt().flatten(1).mean(1)


@dataclass
class SRPatches:
    """Aligned LR/HR patch pairs. ``lr [N, 1, p/2, p/2]``, ``hr [N, 1, p, p]``, scores ``[N]``,
    ``image [N]`` (index into ``names``) and the HR top-left corner ``pos [N, 2]``."""
    lr: torch.Tensor
    hr: torch.Tensor
    score_hr: torch.Tensor
    score_lr: torch.Tensor
    image: torch.Tensor
    pos: torch.Tensor
    names: tuple

    def __len__(self) -> int:
        return self.hr.shape[0]

    def subset(self, idx) -> "SRPatches":
        idx = torch.as_tensor(idx, dtype=torch.long)
        return SRPatches(self.lr[idx], self.hr[idx], self.score_hr[idx], self.score_lr[idx],
                         self.image[idx], self.pos[idx], self.names)


def make_patches(names=TRAIN_IMAGES, patch: int = 32, stride: int | None = None,
                 max_side: int | None = None) -> SRPatches:
    """Cut every aligned ``patch x patch`` HR patch at HR stride ``stride`` (default: ``patch``,
    i.e. non-overlapping tiles) from each named image, with its ×2 LR patch and both scores.
    ``max_side`` (optional) first crops each image's centre to at most that many pixels a side, to
    keep small runs small."""
    names = tuple(names)
    if not names:
        raise ValueError("names is empty")
    if int(patch) != patch or patch < 4 or patch % 2:
        raise ValueError(f"patch must be an even integer >= 4, got {patch!r}")
    stride = patch if stride is None else stride
    if int(stride) != stride or stride < 2 or stride % 2:
        raise ValueError(f"stride must be an even integer >= 2, got {stride!r}")
    lrs, hrs, imgs, poss = [], [], [], []
    for k, name in enumerate(names):
        img = hr_image(name)
        if max_side is not None:
            H, W = img.shape
            h, w = min(H, max_side), min(W, max_side)
            img = img[(H - h) // 2:(H - h) // 2 + h, (W - w) // 2:(W - w) // 2 + w]
        H, W = (s - s % 2 for s in img.shape)
        hr = torch.tensor(np.array(img[:H, :W], dtype=np.float32))[None, None]
        lr = degrade_x2(hr)
        for i in range(0, H - patch + 1, stride):
            for j in range(0, W - patch + 1, stride):
                hrs.append(hr[0, :, i:i + patch, j:j + patch])
                lrs.append(lr[0, :, i // 2:(i + patch) // 2, j // 2:(j + patch) // 2])
                imgs.append(k)
                poss.append((i, j))
    if not hrs:
        raise ValueError(f"no {patch}x{patch} patch fits in the images {names}")
    hr_t, lr_t = torch.stack(hrs), torch.stack(lrs)
    return SRPatches(lr=lr_t, hr=hr_t, score_hr=gradient_score(hr_t), score_lr=gradient_score(lr_t),
                     image=torch.tensor(imgs), pos=torch.tensor(poss), names=names)
