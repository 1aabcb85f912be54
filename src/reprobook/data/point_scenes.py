r"""Point clouds for the point-network chapter: generated indoor rooms and a real 2.5-D cloud.

**Generated rooms** (:func:`indoor_scene`), a stand-in for S3DIS: a floor of
:math:`L \times W` metres (:math:`L, W \sim U(3, 5)`), 2 to 4 of its walls (height 2.5 m), and 3 to
8 objects standing on the floor, each a box, a sphere, a vertical cylinder or a lying torus with
sizes drawn in :math:`[0.3, 0.8]` m. Points are drawn uniformly on the surfaces (by area within each
part) with isotropic Gaussian noise :math:`\sigma`; a quarter of them on the floor, a quarter on the
walls and half on the objects, so the small classes are not drowned. Labels are the six semantic
classes of :data:`CLASSES`. Objects may intersect each other: the labels stay exact (each point is
labelled by the surface it was drawn on).

**The motorcycle cloud** (:func:`motorcycle_cloud`): the Middlebury 2014 motorcycle pair as shipped
with scikit-image (down-sampled 4x), turned from its ground-truth disparity :math:`d` into 3-D
points with the calibration skimage documents for that resolution (focal length
:math:`f = 994.978` px, principal point :math:`(311.193, 254.877)`, :math:`d_{\rm offs} = 31.086`
px, baseline :math:`B = 0.193` m): :math:`Z = fB/(d + d_{\rm offs})`,
:math:`X = (u - c_x)Z/f`, :math:`Y = (v - c_y)Z/f`. Pixels without ground truth are dropped. It is
a real 2.5-D cloud (one surface seen from one side, dense and uneven), without semantic labels.
"""
from __future__ import annotations

import numpy as np

__all__ = ["CLASSES", "indoor_scene", "indoor_scenes", "motorcycle_cloud", "subsample"]

CLASSES = ("floor", "wall", "box", "sphere", "cylinder", "torus")
WALL_HEIGHT = 2.5

# calibration of skimage's down-sampled motorcycle pair (skimage.data.stereo_motorcycle docstring)
_F, _CX, _CY, _DOFFS, _BASELINE = 994.978, 311.193, 254.877, 31.086, 0.193001


def _box(rng, n, centre, size):
    """n points on the surface of an axis-aligned box (faces chosen by area)."""
    sx, sy, sz = size
    areas = np.array([sy * sz, sy * sz, sx * sz, sx * sz, sx * sy, sx * sy])
    face = rng.choice(6, size=n, p=areas / areas.sum())
    u = rng.random((n, 3)) - 0.5
    axis = face // 2
    u[np.arange(n), axis] = np.where(face % 2 == 0, -0.5, 0.5)
    return centre + u * np.array(size)


def _sphere(rng, n, centre, r):
    d = rng.normal(size=(n, 3))
    return centre + r * d / np.linalg.norm(d, axis=1, keepdims=True)


def _cylinder(rng, n, centre, r, h):
    """Vertical cylinder with both caps; ``centre`` is the middle of its axis."""
    side, cap = 2 * np.pi * r * h, np.pi * r * r
    part = rng.choice(3, size=n, p=np.array([side, cap, cap]) / (side + 2 * cap))
    phi = rng.random(n) * 2 * np.pi
    rad = np.where(part == 0, r, r * np.sqrt(rng.random(n)))
    z = np.where(part == 0, (rng.random(n) - 0.5) * h, np.where(part == 1, -h / 2, h / 2))
    return centre + np.stack([rad * np.cos(phi), rad * np.sin(phi), z], 1)


def _torus(rng, n, centre, big, small):
    """Torus lying flat (axis z), sampled uniformly by area (rejection on the tube angle)."""
    out = np.empty((0, 3))
    while len(out) < n:
        m = 2 * (n - len(out)) + 8
        th, ph = rng.random(m) * 2 * np.pi, rng.random(m) * 2 * np.pi
        keep = rng.random(m) < (big + small * np.cos(th)) / (big + small)
        th, ph = th[keep], ph[keep]
        ring = big + small * np.cos(th)
        pts = np.stack([ring * np.cos(ph), ring * np.sin(ph), small * np.sin(th)], 1)
        out = np.concatenate([out, pts])
    return centre + out[:n]


def indoor_scene(n: int, rng: np.random.Generator, noise: float = 0.005):
    """One generated room: ``(xyz (n, 3) float32, labels (n,) int64)``; see the module docstring."""
    if isinstance(n, bool) or int(n) != n or n < 64:
        raise ValueError(f"n must be an int >= 64, got {n!r}")
    if not noise >= 0:
        raise ValueError(f"noise must be >= 0, got {noise!r}")
    n = int(n)
    L, W = rng.uniform(3, 5, size=2)
    n_floor, n_wall = n // 4, n // 4
    n_obj = n - n_floor - n_wall
    pts, lab = [], []
    pts.append(np.stack([rng.random(n_floor) * L, rng.random(n_floor) * W, np.zeros(n_floor)], 1))
    lab.append(np.zeros(n_floor, dtype=np.int64))
    walls = rng.permutation(4)[: rng.integers(2, 5)]
    lens = np.array([L if w < 2 else W for w in walls])
    which = rng.choice(len(walls), size=n_wall, p=lens / lens.sum())
    t, h = rng.random(n_wall), rng.random(n_wall) * WALL_HEIGHT
    w = walls[which]
    x = np.where(w < 2, t * L, np.where(w == 2, 0.0, L))
    y = np.where(w < 2, np.where(w == 0, 0.0, W), t * W)
    pts.append(np.stack([x, y, h], 1))
    lab.append(np.ones(n_wall, dtype=np.int64))
    n_objects = int(rng.integers(3, 9))
    kinds = rng.integers(2, 6, size=n_objects)
    kinds[: min(4, n_objects)] = rng.permutation(np.arange(2, 6))[: min(4, n_objects)]
    sizes = rng.uniform(0.3, 0.8, size=(n_objects, 3))
    share = rng.multinomial(n_obj, np.ones(n_objects) / n_objects)
    for kind, s, m in zip(kinds, sizes, share):
        xy = rng.uniform([0.6, 0.6], [L - 0.6, W - 0.6])
        if kind == 2:
            p = _box(rng, m, np.array([*xy, s[2] / 2]), s)
        elif kind == 3:
            r = s[0] / 2
            p = _sphere(rng, m, np.array([*xy, r]), r)
        elif kind == 4:
            p = _cylinder(rng, m, np.array([*xy, s[2] / 2]), s[0] / 2, s[2])
        else:
            big, small = s[0] / 2, s[0] / 6
            p = _torus(rng, m, np.array([*xy, small]), big, small)
        pts.append(p)
        lab.append(np.full(m, kind, dtype=np.int64))
    xyz = np.concatenate(pts) + noise * rng.normal(size=(n, 3))
    labels = np.concatenate(lab)
    perm = rng.permutation(n)
    return xyz[perm].astype(np.float32), labels[perm]


def indoor_scenes(count: int, n: int, rng: np.random.Generator, noise: float = 0.005):
    """``count`` rooms of ``n`` points: ``(xyz (count, n, 3), labels (count, n))``."""
    if isinstance(count, bool) or int(count) != count or count < 1:
        raise ValueError(f"count must be a positive int, got {count!r}")
    scenes = [indoor_scene(n, rng, noise) for _ in range(int(count))]
    return np.stack([s[0] for s in scenes]), np.stack([s[1] for s in scenes])


def motorcycle_cloud() -> np.ndarray:
    """The real 2.5-D cloud (P, 3) in metres from skimage's motorcycle disparity (no network)."""
    from skimage.data import stereo_motorcycle

    _, _, disp = stereo_motorcycle()
    v, u = np.nonzero(np.isfinite(disp))
    d = disp[v, u].astype(np.float64)
    z = _F * _BASELINE / (d + _DOFFS)
    x = (u - _CX) * z / _F
    y = (v - _CY) * z / _F
    return np.stack([x, -y, -z], 1)          # y up, camera looking along -z


def subsample(points, n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` points drawn without replacement (a cloud of another size from the same surface)."""
    points = np.asarray(points)
    if points.ndim != 2 or points.shape[1] != 3:
        raise ValueError(f"points must have shape (P, 3), got {points.shape}")
    if isinstance(n, bool) or int(n) != n or not 1 <= n <= len(points):
        raise ValueError(f"n must be an int in [1, {len(points)}], got {n!r}")
    return points[rng.choice(len(points), size=int(n), replace=False)]
