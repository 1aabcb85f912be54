r"""Real photo crops and paired "fake" families whose forgery traces are known by construction.

No face or DeepFake data ships offline, so a forgery-detection experiment is built from real
photographs (the grey-level photos of :mod:`reprobook.data.natural_images`: scikit-image's
``camera``, ``astronaut``, ``coffee``, ``chelsea`` and scikit-learn's ``china``, ``flower``).

**Real crops.** :func:`real_crops` cuts ``size`` x ``size`` crops at native resolution from a band
of rows of every photo (a fraction range), so a training and a test set come from disjoint parts
of the photos, with random horizontal flips. Grey levels are in [0, 1], shape ``(n, 1, size, size)``.

**Real faces.** :func:`face_crops` draws from scikit-image's 100 real LFW face crops (25 x 25,
``skimage.data.lfw_subset``, which ships offline): a ``size`` x ``size`` window (``size`` = 24, the
largest multiple of 8 that fits) at native resolution, at one of the four offsets, with random
horizontal flips. Training and test draws use disjoint ranges of the 100 faces (``faces``, a
fraction range), so no test face is seen in training; there are only 8 distinct crops of a face,
so a large ``n`` repeats crops.

**Fake families.** Each family maps a real crop ``R`` to its fake ``F = G(R)``, so the trace
``F - R`` is known exactly. They stand for the upsampling and compression traces that generators
leave (Odena et al. 2016 on checkerboards; Frank et al. 2020 on the spectra of GAN images):

* ``nearest``: 2x2 average pooling, then nearest-neighbour upsampling (a box transposed
  convolution): aliased copies of the low band appear at the high frequencies.
* ``bilinear-sharpen``: 2x area downsampling, bilinear upsampling, then an unsharp mask
  ``u + a (u - G_sigma * u)`` with ``a = 1``, ``sigma = 1``: the top band is lost and the middle
  band is boosted.
* ``jpeg``: 8x8 block DCT quantisation with the standard JPEG luminance table at ``quality``
  (default 30): block edges and quantised high frequencies.
* ``transposed-conv``: 2x area downsampling, zero insertion, then a fixed random 4x4 kernel (drawn
  once per family seed) whose four polyphase components have unequal sums: the checkerboard of an
  untrained transposed convolution.
* ``periodic``: a sinusoidal pattern ``a cos(2 pi (f_x x + f_y y) + phi)`` at a random high
  frequency (|f| in [0.3, 0.5] cycles per pixel) and amplitude ``a`` in [0.02, 0.04].

Every fake is clipped to [0, 1].
"""
from __future__ import annotations

import numpy as np
from scipy.fft import dctn, idctn
from scipy.ndimage import convolve, gaussian_filter, zoom

from reprobook.data.natural_images import PHOTOS, photo

FAMILIES = ("nearest", "bilinear-sharpen", "jpeg", "transposed-conv", "periodic")

# the standard JPEG luminance quantisation table (ITU-T T.81, Annex K)
_JPEG_LUMA = np.array([
    [16, 11, 10, 16, 24, 40, 51, 61], [12, 12, 14, 19, 26, 58, 60, 55],
    [14, 13, 16, 24, 40, 57, 69, 56], [14, 17, 22, 29, 51, 87, 80, 62],
    [18, 22, 37, 56, 68, 109, 103, 77], [24, 35, 55, 64, 81, 104, 113, 92],
    [49, 64, 78, 87, 103, 121, 120, 101], [72, 92, 95, 98, 112, 100, 103, 99]], dtype=np.float64)


def _check_images(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    if x.ndim != 4 or x.shape[1] != 1:
        raise ValueError(f"images must have shape (n, 1, H, W), got {x.shape}")
    if x.shape[2] % 8 or x.shape[3] % 8:
        raise ValueError(f"image sides must be multiples of 8 (for 2x pooling and 8x8 blocks), got {x.shape[2:]}")
    return x


def real_crops(n: int, rng: np.random.Generator, *, size: int = 32, rows: tuple[float, float] = (0.0, 1.0),
               photos: tuple[str, ...] = PHOTOS) -> np.ndarray:
    """``n`` random ``size`` x ``size`` crops (float32, shape ``(n, 1, size, size)``) whose top-left
    corner lies in the fraction range ``rows`` of each photo's valid rows, photos drawn uniformly."""
    if int(n) != n or n < 1:
        raise ValueError(f"n must be a positive integer, got {n!r}")
    if int(size) != size or size < 8 or size % 8:
        raise ValueError(f"size must be a positive multiple of 8, got {size!r}")
    lo, hi = rows
    if not 0.0 <= lo < hi <= 1.0:
        raise ValueError(f"rows must be a fraction range 0 <= lo < hi <= 1, got {rows}")
    unknown = [p for p in photos if p not in PHOTOS]
    if unknown or not photos:
        raise ValueError(f"unknown photos {unknown}; choose from {PHOTOS}")
    out = np.empty((int(n), 1, size, size), dtype=np.float32)
    which = rng.integers(0, len(photos), size=int(n))
    for k in range(int(n)):
        img = photo(photos[which[k]])
        n_rows, n_cols = img.shape[0] - size, img.shape[1] - size
        r0, r1 = int(np.floor(lo * n_rows)), max(int(np.floor(lo * n_rows)) + 1, int(np.ceil(hi * n_rows)))
        i, j = rng.integers(r0, r1), rng.integers(0, n_cols + 1)
        crop = img[i:i + size, j:j + size]
        out[k, 0] = crop[:, ::-1] if rng.random() < 0.5 else crop
    return out


def face_crops(n: int, rng: np.random.Generator, *, size: int = 24,
               faces: tuple[float, float] = (0.0, 1.0)) -> np.ndarray:
    """``n`` crops (float32, ``(n, 1, size, size)``) of the real LFW faces whose index lies in the
    fraction range ``faces`` of the 100 (module docstring), faces drawn uniformly with replacement."""
    if int(n) != n or n < 1:
        raise ValueError(f"n must be a positive integer, got {n!r}")
    if size not in (8, 16, 24):
        raise ValueError(f"size must be a multiple of 8 that fits the 25x25 faces (8, 16 or 24), got {size!r}")
    lo, hi = faces
    if not 0.0 <= lo < hi <= 1.0:
        raise ValueError(f"faces must be a fraction range 0 <= lo < hi <= 1, got {faces}")
    from skimage.data import lfw_subset   # lazy: only chapters on faces pay for it

    real = lfw_subset()[:100]                                  # the first 100 are faces
    i0, i1 = int(np.floor(lo * 100)), max(int(np.floor(lo * 100)) + 1, int(np.ceil(hi * 100)))
    which = rng.integers(i0, i1, size=int(n))
    off = rng.integers(0, 25 - size + 1, size=(int(n), 2))
    flip = rng.random(int(n)) < 0.5
    out = np.empty((int(n), 1, size, size), dtype=np.float32)
    for k in range(int(n)):
        crop = real[which[k], off[k, 0]:off[k, 0] + size, off[k, 1]:off[k, 1] + size]
        out[k, 0] = crop[:, ::-1] if flip[k] else crop
    return out


def _pool2(x):
    n, c, h, w = x.shape
    return x.reshape(n, c, h // 2, 2, w // 2, 2).mean(axis=(3, 5))


def _nearest(x, rng):
    return np.repeat(np.repeat(_pool2(x), 2, axis=2), 2, axis=3)


def _bilinear_sharpen(x, rng, amount=1.0, sigma=1.0):
    up = zoom(_pool2(x), (1, 1, 2, 2), order=1, mode="nearest", grid_mode=True)
    blur = gaussian_filter(up, sigma=(0, 0, sigma, sigma), mode="reflect")
    return up + amount * (up - blur)


def jpeg_table(quality: int) -> np.ndarray:
    """The JPEG luminance quantisation table scaled to ``quality`` (1..100) as libjpeg does."""
    if not 1 <= quality <= 100:
        raise ValueError(f"quality must be in 1..100, got {quality}")
    s = 5000 / quality if quality < 50 else 200 - 2 * quality
    return np.clip(np.floor((_JPEG_LUMA * s + 50) / 100), 1, 255)


def _jpeg(x, rng, quality=30):
    n, c, h, w = x.shape
    blocks = (x * 255.0 - 128.0).reshape(n, c, h // 8, 8, w // 8, 8)
    coef = dctn(blocks, type=2, norm="ortho", axes=(3, 5))
    q = jpeg_table(quality)[None, None, None, :, None, :]
    rec = idctn(np.round(coef / q) * q, type=2, norm="ortho", axes=(3, 5))
    return (rec.reshape(n, c, h, w) + 128.0) / 255.0


def transposed_conv_kernel(rng: np.random.Generator) -> np.ndarray:
    """A random 4x4 upsampling kernel: each of its four polyphase 2x2 parts sums to a different
    gain around 1 (mean gain exactly 1), which is what makes an untrained transposed convolution
    print a checkerboard."""
    k = rng.uniform(0.5, 1.5, size=(4, 4))
    gains = 1.0 + rng.uniform(-0.25, 0.25, size=(2, 2))
    gains += 1.0 - gains.mean()
    for a in range(2):
        for b in range(2):
            k[a::2, b::2] *= gains[a, b] / k[a::2, b::2].sum()
    return k


def _transposed_conv(x, rng):
    k = transposed_conv_kernel(rng)
    low = _pool2(x)
    n, c, h, w = low.shape
    up = np.zeros((n, c, 2 * h, 2 * w))
    up[:, :, ::2, ::2] = low
    # zero insertion then the 4x4 kernel is the transposed convolution with stride 2
    return convolve(up, k[None, None], mode="mirror")


def _periodic(x, rng):
    n, c, h, w = x.shape
    f = rng.uniform(0.3, 0.5, size=n)
    th = rng.uniform(0, 2 * np.pi, size=n)
    a = rng.uniform(0.02, 0.04, size=n)
    ph = rng.uniform(0, 2 * np.pi, size=n)
    yy, xx = np.mgrid[0:h, 0:w]
    arg = 2 * np.pi * f[:, None, None] * (np.cos(th)[:, None, None] * xx + np.sin(th)[:, None, None] * yy)
    return x + (a[:, None, None] * np.cos(arg + ph[:, None, None]))[:, None]


_FNS = {"nearest": _nearest, "bilinear-sharpen": _bilinear_sharpen, "jpeg": _jpeg,
        "transposed-conv": _transposed_conv, "periodic": _periodic}


def make_fakes(real: np.ndarray, family: str, rng: np.random.Generator) -> np.ndarray:
    """The fakes ``G(R)`` of family ``family`` for real images ``real`` (n, 1, H, W), float32 in [0, 1].

    ``rng`` draws the family's random parts (the transposed-conv kernel, the periodic patterns);
    the other families are deterministic."""
    if family not in _FNS:
        raise ValueError(f"unknown family {family!r}; choose from {FAMILIES}")
    x = _check_images(real)
    return np.clip(_FNS[family](x, rng), 0.0, 1.0).astype(np.float32)
