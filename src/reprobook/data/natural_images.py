"""Natural photographs that ship inside installed packages, band-pass filtered, as samples of
the joint statistics of neighbouring filter responses.

Photographs: scikit-image's ``camera``, ``astronaut``, ``coffee`` and ``chelsea`` and
scikit-learn's ``china`` and ``flower`` (both are files inside the wheels, so nothing is
downloaded). Colour photos are converted to luminance with :func:`skimage.color.rgb2gray`; grey
levels are in [0, 1].

Band-pass filter: the first derivative of a Gaussian along a direction
``u = (cos phi, sin phi)`` (x to the right, y down the rows),

    h(x, y) = -(u . (x, y)) / sigma^2 * exp(-(x^2 + y^2) / (2 sigma^2)),

sampled on a ``size`` x ``size`` grid and made zero-mean (so a constant image gives exactly zero)
and unit-L2-norm. Its responses to natural images are the textbook example of heavy-tailed,
sparse coefficients whose neighbours are uncorrelated-ish but strongly dependent through their
variance (the "bow-tie" of Schwartz & Simoncelli 2001): whitening removes the correlation but
not the dependence.

:func:`neighbour_pairs` samples the responses at pixel ``(i, j)`` and ``(i + di, j + dj)``;
``rows`` restricts the anchor pixels to a band of rows (a fraction range), so that a training
and a held-out set can come from disjoint parts of the same photograph.
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np

SKIMAGE_PHOTOS = ("camera", "astronaut", "coffee", "chelsea")
SKLEARN_PHOTOS = ("china", "flower")
PHOTOS = SKIMAGE_PHOTOS + SKLEARN_PHOTOS


@lru_cache(maxsize=None)
def photo(name: str) -> np.ndarray:
    """A photograph as a read-only float64 grey-level array in [0, 1] (decoded once, cached)."""
    from skimage.color import rgb2gray

    if name in SKIMAGE_PHOTOS:
        import skimage.data

        img = np.asarray(getattr(skimage.data, name)(), dtype=np.float64)
    elif name in SKLEARN_PHOTOS:
        from sklearn.datasets import load_sample_image

        img = np.asarray(load_sample_image(f"{name}.jpg"), dtype=np.float64)
    else:
        raise ValueError(f"unknown photo {name!r}; choose from {PHOTOS}")
    img = rgb2gray(img / 255.0) if img.ndim == 3 else img / 255.0
    img.setflags(write=False)
    return img


def derivative_of_gaussian(size: int = 7, sigma: float = 1.5, orientation: float = 0.0) -> np.ndarray:
    """The ``size`` x ``size`` first-derivative-of-Gaussian filter along angle ``orientation``
    (radians; 0 differentiates along the columns' index x, i.e. responds to vertical edges),
    zero-mean and unit L2 norm."""
    if int(size) != size or size < 3 or size % 2 == 0:
        raise ValueError(f"size must be an odd integer >= 3, got {size!r}")
    if not sigma > 0:
        raise ValueError(f"sigma must be positive, got {sigma!r}")
    half = size // 2
    y, x = np.mgrid[-half:half + 1, -half:half + 1].astype(np.float64)
    along = np.cos(orientation) * x + np.sin(orientation) * y
    h = -along / sigma**2 * np.exp(-(x**2 + y**2) / (2 * sigma**2))
    h -= h.mean()   # odd filters are zero-mean already; keep it exact after sampling anyway
    return h / np.linalg.norm(h)


def band_pass(image: np.ndarray, size: int = 7, sigma: float = 1.5, orientation: float = 0.0) -> np.ndarray:
    """Filter responses of a 2-D grey image with :func:`derivative_of_gaussian` ('valid' part only:
    no response is made up at the border)."""
    from scipy.signal import correlate2d

    image = np.asarray(image, dtype=np.float64)
    if image.ndim != 2:
        raise ValueError(f"image must be a 2-D grey-level array, got shape {image.shape}")
    if min(image.shape) < size:
        raise ValueError(f"image {image.shape} is smaller than the {size}x{size} filter")
    return correlate2d(image, derivative_of_gaussian(size, sigma, orientation), mode="valid")


def neighbour_pairs(response: np.ndarray, n: int, rng: np.random.Generator, *,
                    offset: tuple[int, int] = (0, 3), rows: tuple[float, float] = (0.0, 1.0)) -> np.ndarray:
    """``n`` pairs ``(response[i, j], response[i + di, j + dj])`` as an (n, 2) array, with anchor
    pixels drawn uniformly (with replacement) among those whose row lies in the fraction range
    ``rows`` of the valid anchor rows and whose partner lies inside the map."""
    response = np.asarray(response, dtype=np.float64)
    if response.ndim != 2:
        raise ValueError(f"response must be a 2-D map, got shape {response.shape}")
    di, dj = (int(o) for o in offset)
    if di < 0 or dj < 0:
        raise ValueError(f"offset must be non-negative, got {offset}")
    lo, hi = rows
    if not 0.0 <= lo < hi <= 1.0:
        raise ValueError(f"rows must be a fraction range 0 <= lo < hi <= 1, got {rows}")
    n_rows, n_cols = response.shape[0] - di, response.shape[1] - dj
    if n_rows <= 0 or n_cols <= 0:
        raise ValueError(f"offset {offset} does not fit in a map of shape {response.shape}")
    r0, r1 = int(np.floor(lo * n_rows)), int(np.ceil(hi * n_rows))
    if int(n) != n or n < 1:
        raise ValueError(f"n must be a positive integer, got {n!r}")
    i = rng.integers(r0, r1, size=int(n))
    j = rng.integers(0, n_cols, size=int(n))
    return np.stack([response[i, j], response[i + di, j + dj]], axis=1)
