r"""Generated 3-D semantic occupancy scenes with thin structures, and the noisy cues a camera gives.

A stand-in for a driving scene's occupancy ground truth (Occ3D-style: a flat box of voxels, every
voxel one class) at a size a CPU can train on. A scene is an integer volume ``labels[x, y, z]`` of
shape ``(X, Y, Z)`` with ``z`` pointing up, and classes (:data:`CLASSES`)

* ``0 empty``: free space;
* ``1 ground``: the layer ``z = 0``;
* ``2 building``: large boxes standing on the ground, a quarter to a half of the scene wide, most of
  its height tall;
* ``3 car``: small boxes, 2-4 by 3-5 voxels, two voxels tall, on the ground;
* ``4 pole``: columns **one voxel wide**, from the ground to a height in the upper half;
* ``5 wire``: horizontal lines **one voxel thick** strung between the tops of two poles.

Poles and wires (:data:`THIN`) are the small, thin classes: a cell of a coarse grid that contains
one is mostly something else, so a coarse query loses them. Thin structures are only written into
free voxels, so nothing thin hides inside a building.

What the model observes (both noisy, both deterministic given the generator):

* :func:`lifted_features`: per-voxel features standing in for image features lifted into 3-D,
  :math:`f_v = \mathbf e_{y_v} + \sigma\,\varepsilon_v` (the one-hot class plus Gaussian noise,
  :math:`\varepsilon_v \sim N(0, I)`); a single voxel is ambiguous once :math:`\sigma` is near 1, so a
  decoder must use context.
* :func:`bev_cue`: a top-down *segmentation cue*, the 2-D label map a segmenter looking straight
  down would output -- the class of the highest non-empty voxel of every column -- with a fraction
  ``flip`` of pixels replaced by a uniformly drawn class and a fraction ``miss`` of thin-class pixels
  replaced by what lies under them (segmenters miss thin things). Like an image segmentation it has
  no depth: it says *which columns* hold poles, wires and object edges, not at what height.
"""
from __future__ import annotations

import numpy as np

__all__ = ["CLASSES", "THIN", "N_CLASSES", "generate_scene", "generate_scenes", "lifted_features",
           "bev_cue", "check_labels"]

CLASSES = ("empty", "ground", "building", "car", "pole", "wire")
N_CLASSES = len(CLASSES)
EMPTY, GROUND, BUILDING, CAR, POLE, WIRE = range(N_CLASSES)
THIN = (POLE, WIRE)


def _check_shape(shape) -> tuple[int, int, int]:
    shape = tuple(int(s) for s in shape)
    if len(shape) != 3:
        raise ValueError(f"a scene shape is (X, Y, Z), got {shape}")
    X, Y, Z = shape
    if min(X, Y) < 8 or Z < 4:
        raise ValueError(f"scene shape {shape} is too small: need X, Y >= 8 and Z >= 4")
    return shape


def check_labels(labels) -> np.ndarray:
    """Return ``labels`` as an int64 array of shape ``(..., X, Y, Z)`` after checking its values."""
    a = np.asarray(labels)
    if a.ndim < 3:
        raise ValueError(f"labels must have shape (..., X, Y, Z), got {a.shape}")
    if not np.issubdtype(a.dtype, np.integer):
        raise ValueError(f"labels must be integers, got dtype {a.dtype}")
    if a.size and (a.min() < 0 or a.max() >= N_CLASSES):
        raise ValueError(f"labels must lie in [0, {N_CLASSES}), got [{a.min()}, {a.max()}]")
    return a.astype(np.int64)


def generate_scene(shape, rng: np.random.Generator, *, n_buildings=(1, 2), n_cars=(2, 4),
                   n_poles=(2, 4), n_wires=(1, 2)) -> np.ndarray:
    """One scene: an int64 volume of shape ``(X, Y, Z)``. Counts are drawn uniformly from the
    inclusive ranges given; a wire comes with its two poles (in addition to ``n_poles``)."""
    X, Y, Z = _check_shape(shape)
    lab = np.zeros((X, Y, Z), np.int64)
    lab[:, :, :2] = GROUND
    for _ in range(rng.integers(n_buildings[0], n_buildings[1] + 1)):
        w, d = rng.integers(X // 4, X // 2 + 1), rng.integers(Y // 4, Y // 2 + 1)
        h = rng.integers(Z // 2, Z)
        x0, y0 = rng.integers(0, X - w + 1), rng.integers(0, Y - d + 1)
        lab[x0:x0 + w, y0:y0 + d, 2:2 + h] = BUILDING
    for _ in range(rng.integers(n_cars[0], n_cars[1] + 1)):
        w, d = (rng.integers(2, 5), rng.integers(3, 6))[:: 1 if rng.random() < 0.5 else -1]
        x0, y0 = rng.integers(0, X - w + 1), rng.integers(0, Y - d + 1)
        box = lab[x0:x0 + w, y0:y0 + d, 2:4]
        box[box == EMPTY] = CAR

    def free_column(x, y, top):
        return bool(np.all(lab[x, y, 2:top + 1] == EMPTY))

    def pole(x, y, top):
        lab[x, y, 2:top + 1][lab[x, y, 2:top + 1] == EMPTY] = POLE

    for _ in range(rng.integers(n_wires[0], n_wires[1] + 1)):
        for _try in range(20):          # find two free columns a wire can join
            top = int(rng.integers(Z // 2, Z - 1))
            along_x = rng.random() < 0.5
            span = int(rng.integers((X if along_x else Y) // 3, (X if along_x else Y) // 2 + 1))
            if along_x:
                x0, y0 = int(rng.integers(0, X - span)), int(rng.integers(0, Y))
                ends = [(x0, y0), (x0 + span, y0)]
            else:
                x0, y0 = int(rng.integers(0, X)), int(rng.integers(0, Y - span))
                ends = [(x0, y0), (x0, y0 + span)]
            if all(free_column(x, y, top) for x, y in ends):
                for x, y in ends:
                    pole(x, y, top)
                line = lab[x0:x0 + span + 1, y0, top] if along_x else lab[x0, y0:y0 + span + 1, top]
                line[line == EMPTY] = WIRE
                break
    for _ in range(rng.integers(n_poles[0], n_poles[1] + 1)):
        for _try in range(20):
            x, y, top = int(rng.integers(0, X)), int(rng.integers(0, Y)), int(rng.integers(Z // 2, Z))
            if free_column(x, y, top):
                pole(x, y, top)
                break
    return lab


def generate_scenes(n: int, shape, seed: int, stream: int = 0, **counts) -> np.ndarray:
    """``n`` scenes as an int64 array ``(n, X, Y, Z)``; scene ``i`` depends only on
    ``(seed, stream, i)``, so a data set is reproducible and its prefixes are nested."""
    if int(n) < 1:
        raise ValueError(f"n must be a positive number of scenes, got {n}")
    return np.stack([generate_scene(shape, np.random.default_rng([int(seed), int(stream), i]), **counts)
                     for i in range(int(n))])


def lifted_features(labels, sigma: float, rng: np.random.Generator) -> np.ndarray:
    """Noisy per-voxel features ``(..., C, X, Y, Z)`` float32 with ``C = N_CLASSES``: the one-hot
    class plus :math:`N(0, \\sigma^2)` noise on every channel."""
    lab = check_labels(labels)
    if not sigma >= 0:
        raise ValueError(f"sigma must be >= 0, got {sigma}")
    onehot = np.moveaxis(np.eye(N_CLASSES, dtype=np.float32)[lab], -1, -4)
    return (onehot + sigma * rng.standard_normal(onehot.shape).astype(np.float32)).astype(np.float32)


def bev_cue(labels, rng: np.random.Generator, *, flip: float = 0.1, miss: float = 0.0) -> np.ndarray:
    """Top-down segmentation cue ``(..., X, Y)``: the class of the highest non-empty voxel in each
    column, with a share ``miss`` of thin-class pixels replaced by the class of the next non-thin
    voxel below, then a share ``flip`` of all pixels replaced by a uniformly drawn class."""
    lab = check_labels(labels)
    for name, p in (("flip", flip), ("miss", miss)):
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"{name} must be a probability in [0, 1], got {p}")
    Z = lab.shape[-1]
    occupied = lab != EMPTY
    # index of the highest occupied voxel (ground guarantees one per column)
    top = Z - 1 - np.argmax(occupied[..., ::-1], axis=-1)
    cue = np.take_along_axis(lab, top[..., None], axis=-1)[..., 0]
    if miss > 0:
        solid = occupied & ~np.isin(lab, THIN)
        under = np.take_along_axis(lab, (Z - 1 - np.argmax(solid[..., ::-1], axis=-1))[..., None],
                                   axis=-1)[..., 0]
        drop = np.isin(cue, THIN) & (rng.random(cue.shape) < miss)
        cue = np.where(drop, under, cue)
    if flip > 0:
        noise = rng.integers(0, N_CLASSES, size=cue.shape)
        cue = np.where(rng.random(cue.shape) < flip, noise, cue)
    return cue.astype(np.int64)
