"""An OOD benchmark built from scikit-learn's digits, with near-OOD classes and far-OOD images.

:func:`digits_ood_split` holds some digit classes out of training: the classifier sees only the
in-distribution (ID) classes, split into train / validation / test; a first group of held-out
classes is the validation OOD set (for choosing hyperparameters), a second group the test
near-OOD set, so that the test OOD classes are never tuned on. Pixels are scaled to [0, 1]
(the digits' grey levels 0-16 divided by 16).

Far-OOD images, on the same 8x8 grid and scale:

* :func:`photo_crops`: random square crops of real photographs that ship inside scikit-image
  (``skimage.data``: camera man, astronaut, coffee, cat, coins, moon, rocket, clock), averaged
  down to 8x8 grey and min-max scaled to [0, 1], like a digit's strokes on its background;
* :func:`matched_noise`: Gaussian noise with the ID training pixels' mean and standard deviation
  (one number each, over all pixels), clipped to [0, 1].
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from .digits import digits_arrays

__all__ = ["DigitsOOD", "digits_ood_split", "photo_crops", "matched_noise", "PHOTOS"]

PHOTOS = ("camera", "astronaut", "coffee", "chelsea", "coins", "moon", "rocket", "clock")


@dataclass(frozen=True)
class DigitsOOD:
    """ID images with labels ``0..len(id_classes)-1`` and OOD images, all (n, 64) in [0, 1]."""

    id_classes: tuple[int, ...]
    val_ood_classes: tuple[int, ...]
    test_ood_classes: tuple[int, ...]
    x_train: np.ndarray
    y_train: np.ndarray
    x_val: np.ndarray
    y_val: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    x_val_ood: np.ndarray
    x_test_ood: np.ndarray


def _classes(name, c):
    c = tuple(int(v) for v in c)
    if not c:
        raise ValueError(f"{name} must name at least one class")
    return c


def digits_ood_split(rng: np.random.Generator, id_classes, val_ood_classes, test_ood_classes, *,
                     val_frac: float = 0.2, test_frac: float = 0.2,
                     pixels: np.ndarray | None = None,
                     labels: np.ndarray | None = None) -> DigitsOOD:
    """ID classes split train / val / test (stratified shuffle); held-out classes as OOD sets.

    ``pixels``/``labels`` replace scikit-learn's copy (the tests pass a small array). The ID
    labels are re-indexed to ``0..len(id_classes)-1`` in the order given.
    """
    pixels, labels = digits_arrays(rng, pixels, labels)
    ids, vo, to = (_classes("id_classes", id_classes), _classes("val_ood_classes", val_ood_classes),
                   _classes("test_ood_classes", test_ood_classes))
    if len(ids) < 2:
        raise ValueError("a classifier needs at least 2 ID classes")
    every = ids + vo + to
    if len(set(every)) != len(every):
        raise ValueError(f"the ID, validation-OOD and test-OOD classes must be disjoint, got "
                         f"{ids}, {vo}, {to}")
    missing = sorted(set(every) - set(np.unique(labels).tolist()))
    if missing:
        raise ValueError(f"classes {missing} have no images")
    if not (0 < val_frac < 1 and 0 < test_frac < 1 and val_frac + test_frac < 1):
        raise ValueError(f"val_frac and test_frac must be in (0, 1) with a sum below 1, got "
                         f"{val_frac}, {test_frac}")
    x = pixels / 16.0
    parts = {"train": [], "val": [], "test": []}
    for new, c in enumerate(ids):
        idx = rng.permutation(np.flatnonzero(labels == c))
        n_val, n_test = int(round(val_frac * idx.size)), int(round(test_frac * idx.size))
        if idx.size - n_val - n_test < 1 or n_val < 1 or n_test < 1:
            raise ValueError(f"class {c} has too few images ({idx.size}) for the split")
        for key, sl in (("val", idx[:n_val]), ("test", idx[n_val:n_val + n_test]),
                        ("train", idx[n_val + n_test:])):
            parts[key].append((sl, np.full(sl.size, new)))

    def stack(key):
        i = np.concatenate([p[0] for p in parts[key]])
        y = np.concatenate([p[1] for p in parts[key]])
        order = rng.permutation(i.size)
        return x[i[order]].astype(np.float32), y[order].astype(np.int64)

    (xtr, ytr), (xva, yva), (xte, yte) = stack("train"), stack("val"), stack("test")
    pick = lambda cs: x[np.isin(labels, cs)].astype(np.float32)   # noqa: E731
    return DigitsOOD(ids, vo, to, xtr, ytr, xva, yva, xte, yte, pick(vo), pick(to))


def _load_photos(names) -> list[np.ndarray]:
    return [_load_photo(name) for name in names]


@lru_cache(maxsize=None)
def _load_photo(name: str) -> np.ndarray:
    """One photograph as float64 grey levels in [0, 1] (cached: decoding takes a while)."""
    import skimage.data
    from skimage.color import rgb2gray

    if name not in PHOTOS:
        raise ValueError(f"unknown photo {name!r}; choose from {PHOTOS}")
    img = np.asarray(getattr(skimage.data, name)(), dtype=np.float64)
    img = rgb2gray(img / 255.0) if img.ndim == 3 else img / 255.0
    img.setflags(write=False)
    return img


def photo_crops(n: int, rng: np.random.Generator, *, side: int = 8, min_crop: int = 24,
                max_crop: int = 128, photos=PHOTOS) -> np.ndarray:
    """``n`` random square crops of real photographs, as (n, side*side) float32 in [0, 1].

    Each crop picks a photo uniformly, a side length in [min_crop, max_crop] (a multiple of
    ``side``), and a position; it is averaged down to ``side`` x ``side`` blocks and min-max
    scaled (a flat crop becomes all zeros).
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"n must be a positive int, got {n!r}")
    if not isinstance(rng, np.random.Generator):
        raise TypeError("rng must be a numpy Generator")
    if not side <= min_crop <= max_crop:
        raise ValueError(f"need side <= min_crop <= max_crop, got {side}, {min_crop}, {max_crop}")
    images = _load_photos(photos)
    out = np.empty((n, side * side))
    for i in range(n):
        img = images[rng.integers(len(images))]
        top = min(max_crop, *img.shape) // side
        k = int(rng.integers(max(1, min_crop // side), top + 1))   # block size
        s = k * side
        r0, c0 = rng.integers(img.shape[0] - s + 1), rng.integers(img.shape[1] - s + 1)
        crop = img[r0:r0 + s, c0:c0 + s].reshape(side, k, side, k).mean(axis=(1, 3)).ravel()
        span = crop.max() - crop.min()
        out[i] = (crop - crop.min()) / span if span > 1e-12 else 0.0
    return out.astype(np.float32)


def matched_noise(n: int, reference: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """``n`` Gaussian-noise images with the reference pixels' overall mean and std, clipped to
    [0, 1], shape (n, reference.shape[1]) float32."""
    reference = np.asarray(reference, dtype=np.float64)
    if reference.ndim != 2 or reference.size == 0:
        raise ValueError(f"reference must be a non-empty (n, d) array, got {reference.shape}")
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"n must be a positive int, got {n!r}")
    x = rng.normal(reference.mean(), reference.std(), size=(n, reference.shape[1]))
    return np.clip(x, 0.0, 1.0).astype(np.float32)
