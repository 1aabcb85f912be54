r"""Low-light / normal-light image pairs made from real colour photographs with a known degradation.

Clean images are colour photographs that ship inside installed wheels (scikit-image's
``astronaut``, ``chelsea``, ``coffee``, ``rocket`` and ``motorcycle`` (the left view of its stereo
pair), scikit-learn's ``china`` and ``flower``), RGB in ``[0, 1]``.  Nothing is downloaded.

Degradation of a clean patch :math:`I \in [0, 1]^{3 \times h \times w}` (one draw per patch):

.. math::

    \mu(x) = k\, L(x)\, I(x)^{\gamma}, \qquad
    I_{\text{low}}(x) = \operatorname{clip}_{[0,1]}\Big(\mu(x) + \sqrt{\sigma_s^2\, \mu(x) + \sigma_r^2}\;\varepsilon(x)\Big),
    \quad \varepsilon \sim \mathcal N(0, 1)

* :math:`\gamma \sim U[\gamma_0, \gamma_1]`: a global tone curve (the camera's response pushed down);
* :math:`k \sim U[k_0, k_1]`: the global exposure (the Retinex "illumination" scale);
* :math:`L(x) \in [l_0, 1]`: a smooth illumination field, bilinear interpolation of a coarse
  ``grid x grid`` lattice of uniform draws (the local, spatially varying part of the illumination);
* the Gaussian approximation of Poisson-Gaussian sensor noise: shot noise whose variance grows
  linearly with the signal (:math:`\sigma_s^2 \mu`) plus signal-independent read noise
  (:math:`\sigma_r^2`), as in Foi et al. (2008).

Every parameter is returned, so a test can invert the noiseless part exactly.  Patches for training
and testing are cut from *different photographs* (:func:`make_pairs`), so a test patch never shares
pixels with a training patch.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

__all__ = ["COLOUR_PHOTOS", "DarkeningRange", "colour_photo", "illumination_field", "darken",
           "random_patches", "make_pairs"]

SKIMAGE_COLOUR = ("astronaut", "chelsea", "coffee", "rocket", "motorcycle")
SKLEARN_COLOUR = ("china", "flower")
COLOUR_PHOTOS = SKIMAGE_COLOUR + SKLEARN_COLOUR


@lru_cache(maxsize=None)
def colour_photo(name: str) -> np.ndarray:
    """A colour photograph as a read-only float32 ``[3, H, W]`` array in [0, 1] (cached)."""
    if name in SKIMAGE_COLOUR:
        import skimage.data

        img = skimage.data.stereo_motorcycle()[0] if name == "motorcycle" else getattr(skimage.data, name)()
    elif name in SKLEARN_COLOUR:
        from sklearn.datasets import load_sample_image

        img = load_sample_image(f"{name}.jpg")
    else:
        raise ValueError(f"unknown colour photo {name!r}; choose from {COLOUR_PHOTOS}")
    img = np.ascontiguousarray(np.asarray(img, dtype=np.float32)[..., :3].transpose(2, 0, 1) / 255.0)
    img.setflags(write=False)
    return img


@dataclass(frozen=True)
class DarkeningRange:
    """Ranges of the degradation parameters (module docstring); each is drawn uniformly per patch."""
    gamma: tuple[float, float] = (1.4, 2.2)
    gain: tuple[float, float] = (0.08, 0.25)
    field_min: float = 0.6          # L(x) in [field_min, 1]
    field_grid: int = 3             # coarse lattice of the illumination field
    shot: tuple[float, float] = (0.01, 0.03)
    read: tuple[float, float] = (0.005, 0.02)

    def __post_init__(self):
        for name in ("gamma", "gain", "shot", "read"):
            lo, hi = getattr(self, name)
            if not 0 <= lo <= hi:
                raise ValueError(f"{name} must be a range 0 <= lo <= hi, got {(lo, hi)}")
        if not 0 < self.gain[1] <= 1:
            raise ValueError(f"gain must lie in (0, 1], got {self.gain}")
        if not 0 < self.field_min <= 1:
            raise ValueError(f"field_min must lie in (0, 1], got {self.field_min}")
        if int(self.field_grid) != self.field_grid or self.field_grid < 2:
            raise ValueError(f"field_grid must be an integer >= 2, got {self.field_grid!r}")


def illumination_field(h: int, w: int, rng: np.random.Generator, low: float = 0.6,
                       grid: int = 3) -> np.ndarray:
    """A smooth field ``[h, w]`` in ``[low, 1]``: a ``grid x grid`` lattice of U[low, 1] draws,
    bilinearly interpolated (so it stays inside the lattice's range)."""
    if h < 1 or w < 1:
        raise ValueError(f"field size must be positive, got {(h, w)}")
    lattice = rng.uniform(low, 1.0, size=(grid, grid))
    ys, xs = np.linspace(0, grid - 1, h), np.linspace(0, grid - 1, w)
    y0 = np.minimum(np.floor(ys).astype(int), grid - 2)
    x0 = np.minimum(np.floor(xs).astype(int), grid - 2)
    ty, tx = (ys - y0)[:, None], (xs - x0)[None, :]
    a = lattice[y0][:, x0]
    b = lattice[y0][:, x0 + 1]
    c = lattice[y0 + 1][:, x0]
    d = lattice[y0 + 1][:, x0 + 1]
    return (a * (1 - ty) * (1 - tx) + b * (1 - ty) * tx + c * ty * (1 - tx) + d * ty * tx)


def darken(clean: np.ndarray, rng: np.random.Generator, spec: DarkeningRange = DarkeningRange(),
           noise: bool = True) -> tuple[np.ndarray, dict]:
    """Degrade one clean ``[3, h, w]`` patch in [0, 1] (module docstring).

    Returns ``(low, params)`` with ``params = {gamma, gain, field [h, w], shot, read}``; with
    ``noise=False`` the noiseless mean :math:`\\mu` is returned (for tests)."""
    clean = np.asarray(clean)
    if clean.ndim != 3 or clean.shape[0] != 3:
        raise ValueError(f"clean must be an RGB patch [3, h, w], got shape {clean.shape}")
    if clean.min() < 0 or clean.max() > 1:
        raise ValueError("clean must lie in [0, 1]")
    _, h, w = clean.shape
    gamma = rng.uniform(*spec.gamma)
    gain = rng.uniform(*spec.gain)
    field = illumination_field(h, w, rng, spec.field_min, spec.field_grid)
    shot, read = rng.uniform(*spec.shot), rng.uniform(*spec.read)
    mu = gain * field[None] * np.power(clean.astype(np.float64), gamma)
    low = mu
    if noise:
        low = mu + np.sqrt(shot ** 2 * mu + read ** 2) * rng.standard_normal(mu.shape)
    low = np.clip(low, 0.0, 1.0).astype(np.float32)
    return low, {"gamma": gamma, "gain": gain, "field": field, "shot": shot, "read": read}


def random_patches(names, n: int, size: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` clean ``[3, size, size]`` crops at uniform positions, the photograph drawn uniformly
    from ``names`` for each crop, as float32 ``[n, 3, size, size]``."""
    names = list(names)
    if not names:
        raise ValueError("names must list at least one photograph")
    if int(n) != n or n < 1 or int(size) != size or size < 4:
        raise ValueError(f"n must be >= 1 and size >= 4, got n={n!r}, size={size!r}")
    photos = [colour_photo(m) for m in names]
    out = np.empty((int(n), 3, int(size), int(size)), dtype=np.float32)
    which = rng.integers(0, len(photos), size=int(n))
    for i, p in enumerate(which):
        img = photos[p]
        if min(img.shape[1:]) < size:
            raise ValueError(f"photo {names[p]!r} {img.shape[1:]} is smaller than the patch size {size}")
        y = rng.integers(0, img.shape[1] - size + 1)
        x = rng.integers(0, img.shape[2] - size + 1)
        out[i] = img[:, y:y + size, x:x + size]
    return out


def make_pairs(names, n: int, size: int, rng: np.random.Generator,
               spec: DarkeningRange = DarkeningRange()) -> tuple[np.ndarray, np.ndarray]:
    """``(low, clean)``, each float32 ``[n, 3, size, size]``: random crops of the photographs in
    ``names``, each darkened with its own draw of the degradation (module docstring)."""
    clean = random_patches(names, n, size, rng)
    low = np.stack([darken(c, rng, spec)[0] for c in clean])
    return low, clean
