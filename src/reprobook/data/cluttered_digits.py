r"""Handwritten digits pasted on cluttered real-photo canvases, with a class-linked corner cue and
a ground-truth saliency map: a small stand-in for "salient object in a cluttered natural scene".

**Canvas.** One grey-level ``size`` x ``size`` canvas per digit (scikit-learn's 8x8 digits,
:func:`reprobook.data.digits.load_digits_arrays`):

* the *clutter* is a random window of a real photograph (scikit-image / scikit-learn,
  :func:`reprobook.data.natural_images.photo`), block-averaged ``zoom`` x ``zoom`` first so that a
  small window still holds edges and texture, then min-max scaled to ``[0, clutter]``;
* the digit, upsampled ``scale`` x by pixel replication, is alpha-blended at a uniform random
  position: with :math:`a = d/16 \in [0, 1]` the digit's grey level,
  :math:`c \leftarrow (1-a)\,c + a`, so strokes are white on the photo;
* the *cue* is a ``cue_size`` x ``cue_size`` white square in one corner, painted last. The corner
  of class :math:`k` is :data:`CORNERS`\ ``[k % 4]``. ``cue="linked"``: with probability ``cue_p``
  the cue sits in the item's class corner, otherwise in a uniformly drawn corner (so it is a
  *spurious* feature: predictive in training, not causal). ``cue="shifted"``: never in the class
  corner (one of the other three, uniformly): a test of reliance on the cue. ``cue="none"``: no cue.

**Saliency target.** The digit's alpha map on the canvas, blurred by a Gaussian of width ``sigma``
pixels and normalised to sum 1: a fixation density on the object (the role human fixation maps play
in the paper). The cue and the clutter carry no saliency mass.

Everything random comes from the ``rng`` passed in, so a canvas set is a function of the seed.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from .digits import digits_arrays
from .natural_images import PHOTOS, photo

__all__ = ["CORNERS", "CUE_MODES", "ClutteredDigits", "cluttered_digits", "split_digits",
           "class_corner"]

CORNERS = ("top-left", "top-right", "bottom-left", "bottom-right")
CUE_MODES = ("linked", "shifted", "none")


@dataclass(frozen=True)
class ClutteredDigits:
    """Canvases ``x`` (n, size, size) in [0, 1], labels ``y`` (n,), saliency maps ``saliency``
    (n, size, size), each summing to 1, the cue's corner index per item (-1: no cue), the digit's
    top-left position (n, 2) and the photo each clutter window came from."""

    x: np.ndarray
    y: np.ndarray
    saliency: np.ndarray
    cue_corner: np.ndarray
    position: np.ndarray
    photo: np.ndarray

    def __len__(self) -> int:
        return len(self.y)


def class_corner(labels) -> np.ndarray:
    """The corner index (into :data:`CORNERS`) linked to each class: ``label % 4``."""
    return np.asarray(labels, dtype=np.int64) % 4


@lru_cache(maxsize=None)
def _zoomed(name: str, zoom: int) -> np.ndarray:
    img = photo(name)
    h, w = (img.shape[0] // zoom) * zoom, (img.shape[1] // zoom) * zoom
    out = img[:h, :w].reshape(h // zoom, zoom, w // zoom, zoom).mean(axis=(1, 3))
    out.setflags(write=False)
    return out


def _corner_slices(corner: int, size: int, k: int):
    r = slice(0, k) if corner in (0, 1) else slice(size - k, size)
    c = slice(0, k) if corner in (0, 2) else slice(size - k, size)
    return r, c


def cluttered_digits(rng: np.random.Generator, pixels: np.ndarray | None = None,
                     labels: np.ndarray | None = None, *, size: int = 24, scale: int = 2,
                     zoom: int = 4, clutter: float = 0.7, cue: str = "linked", cue_p: float = 0.9,
                     cue_size: int = 3, sigma: float = 1.0,
                     photos: tuple[str, ...] = PHOTOS) -> ClutteredDigits:
    """Paste every digit of ``pixels`` ((n, 64), grey levels 0..16; default all of scikit-learn's)
    on its own clutter window; see the module docstring for the construction."""
    from scipy.ndimage import gaussian_filter

    pixels, labels = digits_arrays(rng, pixels, labels)
    if pixels.shape[1] != 64:
        raise ValueError(f"pixels must be 8x8 digits flattened to 64 columns, got {pixels.shape[1]}")
    if cue not in CUE_MODES:
        raise ValueError(f"unknown cue mode {cue!r}; choose from {CUE_MODES}")
    for name, v in (("size", size), ("scale", scale), ("zoom", zoom), ("cue_size", cue_size)):
        if isinstance(v, bool) or int(v) != v or v < 1:
            raise ValueError(f"{name} must be a positive int, got {v!r}")
    d = 8 * scale
    if size < d:
        raise ValueError(f"a canvas of size {size} cannot hold a digit of {d}x{d} (8 x scale)")
    if not 0.0 <= cue_p <= 1.0:
        raise ValueError(f"cue_p must be a probability, got {cue_p!r}")
    if not 0.0 <= clutter <= 1.0:
        raise ValueError(f"clutter must lie in [0, 1], got {clutter!r}")
    if not sigma > 0:
        raise ValueError(f"sigma must be positive, got {sigma!r}")
    if not photos or any(p not in PHOTOS for p in photos):
        raise ValueError(f"photos must be a non-empty subset of {PHOTOS}, got {photos}")
    n = len(labels)
    x = np.empty((n, size, size))
    sal = np.empty((n, size, size))
    corner = np.full(n, -1, dtype=np.int64)
    pos = rng.integers(0, size - d + 1, size=(n, 2))
    which = rng.integers(0, len(photos), size=n)
    own = class_corner(labels)
    for i in range(n):
        img = _zoomed(photos[which[i]], zoom)
        r0 = rng.integers(0, img.shape[0] - size + 1)
        c0 = rng.integers(0, img.shape[1] - size + 1)
        win = img[r0:r0 + size, c0:c0 + size]
        lo, hi = win.min(), win.max()
        canvas = clutter * (win - lo) / (hi - lo) if hi > lo else np.zeros_like(win)
        alpha = np.zeros((size, size))
        digit = np.kron(pixels[i].reshape(8, 8) / 16.0, np.ones((scale, scale)))
        alpha[pos[i, 0]:pos[i, 0] + d, pos[i, 1]:pos[i, 1] + d] = np.clip(digit, 0.0, 1.0)
        canvas = (1.0 - alpha) * canvas + alpha
        if cue != "none":
            u = rng.random()
            if cue == "linked":
                corner[i] = own[i] if u < cue_p else rng.integers(0, 4)
            else:
                others = [k for k in range(4) if k != own[i]]
                corner[i] = others[rng.integers(0, 3)]
            rs, cs = _corner_slices(int(corner[i]), size, cue_size)
            canvas[rs, cs] = 1.0
        x[i] = canvas
        s = gaussian_filter(alpha, sigma, mode="constant")
        sal[i] = s / s.sum() if s.sum() > 0 else np.full((size, size), 1.0 / size**2)
    return ClutteredDigits(x.astype(np.float32), np.asarray(labels, dtype=np.int64),
                           sal.astype(np.float32), corner, pos, which)


def split_digits(labels, rng: np.random.Generator, *, test: float = 0.3,
                 pool: float = 0.0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Stratified index split of the digits into (train, test, pool): per class a share ``test``
    goes to the test set and a share ``pool`` to a disjoint pool (e.g. the images a separate
    saliency network is trained on), the rest to training. Indices are sorted."""
    labels = np.asarray(labels)
    if labels.ndim != 1:
        raise ValueError(f"labels must be 1-d, got shape {labels.shape}")
    if not (0 < test < 1 and 0 <= pool < 1 and test + pool < 1):
        raise ValueError(f"need 0 < test < 1, 0 <= pool and test + pool < 1, got {test}, {pool}")
    tr, te, po = [], [], []
    for k in np.unique(labels):
        idx = rng.permutation(np.flatnonzero(labels == k))
        n_te, n_po = int(round(test * len(idx))), int(round(pool * len(idx)))
        if n_te < 1 or len(idx) - n_te - n_po < 1:
            raise ValueError(f"class {k} has too few items ({len(idx)}) for this split")
        te.append(idx[:n_te])
        po.append(idx[n_te:n_te + n_po])
        tr.append(idx[n_te + n_po:])
    return tuple(np.sort(np.concatenate(a)).astype(np.int64) for a in (tr, te, po))
