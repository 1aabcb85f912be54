r"""Random 3-D ellipsoid phantoms (Shepp–Logan-like volumes) for sparse-view CT.

A volume is a sum of indicator functions of ellipsoids with intensities,

.. math:: f(x,y,z)=\sum_k a_k\,\mathbf 1\Big[\Big(\tfrac{x'_k}{r_{x,k}}\Big)^2+
          \Big(\tfrac{y'_k}{r_{y,k}}\Big)^2+\Big(\tfrac{z-z_k}{r_{z,k}}\Big)^2\le1\Big],

clipped to :math:`[0,1]`, on the grid :math:`x,y,z\in[-1,1]` (``Z`` axial slices of ``n x n``),
where :math:`(x'_k,y'_k)` are the in-plane coordinates relative to a centre that drifts linearly
with :math:`z` (a tilted structure) and rotated by an angle :math:`\phi_k` about the z-axis. Each
volume has

* a **body**: an ellipsoid centred at the origin, in-plane semi-axes in [0.62, 0.85], z semi-axis in
  [1.1, 1.5] so the body tapers towards the ends of the volume (slice statistics depend on z, which a
  position-aware prior can use), intensity 0.3;
* 4 to 8 **structures** inside it, elongated along z (z semi-axes 0.25-0.9 against in-plane 0.06-0.3),
  with random centres, drifts, rotations and intensities :math:`\pm`[0.15, 0.5] (denser or lighter
  than the body).

Neighbouring slices are therefore strongly but not perfectly correlated: structures begin, end and
drift along z. Everything outside the inscribed circle of each slice is zero, as
``skimage.transform.radon(circle=True)`` requires.
"""
from __future__ import annotations

import numpy as np

__all__ = ["ellipsoid_volumes", "random_ellipsoids"]


def random_ellipsoids(rng: np.random.Generator) -> np.ndarray:
    """Parameters of one random volume, one row per ellipsoid:
    (intensity, x0, y0, z0, rx, ry, rz, phi, drift_x, drift_y); the body first."""
    rows = [[0.3, 0.0, 0.0, 0.0, rng.uniform(0.7, 0.85), rng.uniform(0.62, 0.8), rng.uniform(1.1, 1.5),
             rng.uniform(-0.3, 0.3), 0.0, 0.0]]
    for _ in range(int(rng.integers(4, 9))):
        sign = 1.0 if rng.random() < 0.6 else -1.0
        rows.append([sign * rng.uniform(0.15, 0.5), *rng.uniform(-0.4, 0.4, 2), rng.uniform(-0.6, 0.6),
                     *rng.uniform(0.06, 0.3, 2), rng.uniform(0.25, 0.9), rng.uniform(0, np.pi),
                     *rng.uniform(-0.25, 0.25, 2)])
    return np.asarray(rows, dtype=np.float64)


def _render(params: np.ndarray, n: int, z: int) -> np.ndarray:
    c = n // 2
    g = (np.arange(n) - c) / c                                     # in-plane: the circle is radius 1
    zz = np.linspace(-1, 1, z)[:, None, None]
    yy, xx = g[None, :, None], g[None, None, :]
    vol = np.zeros((z, n, n))
    for a, x0, y0, z0, rx, ry, rz, phi, dx, dy in params:
        cx, cy = x0 + dx * (zz - z0), y0 + dy * (zz - z0)
        u, v = xx - cx, yy - cy
        xr = np.cos(phi) * u + np.sin(phi) * v
        yr = -np.sin(phi) * u + np.cos(phi) * v
        vol += a * (((xr / rx) ** 2 + (yr / ry) ** 2 + ((zz - z0) / rz) ** 2) <= 1)
    vol = np.clip(vol, 0.0, 1.0)
    inside = (np.arange(n) - c)[:, None] ** 2 + (np.arange(n) - c)[None, :] ** 2 <= c ** 2
    return vol * inside


def ellipsoid_volumes(count: int, n: int, z: int, rng: np.random.Generator) -> np.ndarray:
    """``count`` random volumes of shape (z, n, n), float64 in [0, 1]: array (count, z, n, n)."""
    for name, v, lo in (("count", count, 1), ("n", n, 4), ("z", z, 1)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < lo:
            raise ValueError(f"{name} must be an int >= {lo}, got {v!r}")
    return np.stack([_render(random_ellipsoids(rng), n, z) for _ in range(count)])
