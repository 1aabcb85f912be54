r"""scikit-learn's digits rendered in several *style domains*: same content, different appearance.

A stand-in for the domain-generalisation benchmarks (PACS, OfficeHome, ...) that cannot be had
offline.  Every domain draws its own, disjoint share of the 1 797 digits (so no image appears in
two domains) and renders it on a ``size x size`` grid.  With ``m \in [0, 1]`` the digit's stroke
intensity (the 8x8 grey levels divided by 16, upsampled bilinearly), a domain paints

.. math:: \text{img} = (1 - m)\,\text{background} + m\,\text{ink},

so the label lives only in the shape of ``m`` and the domain only in ``background`` and ``ink``:

* ``clean``: black background, white ink (the digits as scikit-learn ships them);
* ``inverted``: light grey background (0.8), dark ink (0.2): reversed polarity, 0.6 contrast;
* ``grating``: a sinusoidal grating background of random frequency (0.15-0.35 cycles/pixel),
  orientation and phase, amplitude 0.25 around 0.4, white ink;
* ``texture``: a random crop of a **real photographed texture** (scikit-image's ``brick``,
  ``grass`` and ``gravel``, files inside the wheel), downsampled by 4 and rescaled to [0.25, 0.85],
  black ink;
* ``noise``: mid-grey background (0.5) with Gaussian noise (sigma 0.15) and a blur of the whole
  image (sigma 0.8), ink 0.95.

:meth:`DigitDomains.lodo` gives the leave-one-domain-out split: train on the other domains' train
parts, test on the held-out domain; each source domain keeps a held-out part (``source_val``) for
measuring source-domain statistics on images the model did not train on.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from .digits import digits_arrays

__all__ = ["DOMAINS", "TEXTURES", "DigitDomains", "render_domains", "texture"]

DOMAINS = ("clean", "inverted", "grating", "texture", "noise")
TEXTURES = ("brick", "grass", "gravel")


@lru_cache(maxsize=None)
def texture(name: str) -> np.ndarray:
    """A real texture photograph from scikit-image, grey, downsampled by 4 (block mean), in [0, 1]."""
    if name not in TEXTURES:
        raise ValueError(f"unknown texture {name!r}; choose from {TEXTURES}")
    import skimage.data

    img = np.asarray(getattr(skimage.data, name)(), dtype=np.float64)
    if img.ndim == 3:
        img = img[..., :3].mean(-1)
    h, w = (img.shape[0] // 4) * 4, (img.shape[1] // 4) * 4
    img = img[:h, :w].reshape(h // 4, 4, w // 4, 4).mean((1, 3))
    img = (img - img.min()) / max(img.max() - img.min(), 1e-12)
    img.setflags(write=False)
    return img


def _upsample(pixels: np.ndarray, size: int) -> np.ndarray:
    """(n, 64) grey levels in [0, 16] -> (n, size, size) stroke intensities in [0, 1] (bilinear)."""
    from scipy.ndimage import zoom

    imgs = np.clip(pixels.reshape(-1, 8, 8) / 16.0, 0.0, 1.0)
    return np.clip(zoom(imgs, (1, size / 8, size / 8), order=1), 0.0, 1.0)


def _background(domain: str, n: int, size: int, rng: np.random.Generator) -> tuple[np.ndarray, float]:
    """(backgrounds (n, size, size), ink level) of one domain."""
    if domain == "clean":
        return np.zeros((n, size, size)), 1.0
    if domain == "inverted":
        return np.full((n, size, size), 0.8), 0.2
    if domain == "grating":
        yy, xx = np.mgrid[0:size, 0:size].astype(np.float64)
        f = rng.uniform(0.15, 0.35, n)[:, None, None]
        th = rng.uniform(0, np.pi, n)[:, None, None]
        ph = rng.uniform(0, 2 * np.pi, n)[:, None, None]
        return 0.4 + 0.25 * np.sin(2 * np.pi * f * (xx * np.cos(th) + yy * np.sin(th)) + ph), 1.0
    if domain == "texture":
        out = np.empty((n, size, size))
        which = rng.integers(0, len(TEXTURES), n)
        for i in range(n):
            tex = texture(TEXTURES[which[i]])
            r = rng.integers(0, tex.shape[0] - size + 1)
            c = rng.integers(0, tex.shape[1] - size + 1)
            out[i] = 0.25 + 0.6 * tex[r:r + size, c:c + size]
        return out, 0.0
    if domain == "noise":
        return 0.5 + 0.15 * rng.standard_normal((n, size, size)), 0.95
    raise ValueError(f"unknown domain {domain!r}; choose from {DOMAINS}")


@dataclass(frozen=True)
class DigitDomains:
    """Rendered images ``x`` (n, 1, size, size) float32 in [0, 1], labels ``y`` (n,), the domain
    index of each image ``domain`` (n,), and ``is_train`` (n,) (False: the domain's held-out part)."""

    x: np.ndarray
    y: np.ndarray
    domain: np.ndarray
    is_train: np.ndarray
    names: tuple[str, ...]

    def lodo(self, held_out: str | int) -> dict[str, np.ndarray]:
        """Leave-one-domain-out index arrays: ``train`` (the other domains' train parts),
        ``source_val`` (their held-out parts) and ``test`` (the whole held-out domain)."""
        k = self.names.index(held_out) if held_out in self.names else held_out
        if isinstance(k, str) or not 0 <= int(k) < len(self.names):
            raise ValueError(f"held_out must be one of {self.names} or an index below "
                             f"{len(self.names)}, got {held_out!r}")
        src = self.domain != k
        return {"train": np.flatnonzero(src & self.is_train),
                "source_val": np.flatnonzero(src & ~self.is_train),
                "test": np.flatnonzero(self.domain == k)}


def render_domains(rng: np.random.Generator, domains: tuple[str, ...] = DOMAINS, size: int = 16,
                   n_per_domain: int | None = None, train_fraction: float = 0.8,
                   pixels: np.ndarray | None = None, labels: np.ndarray | None = None) -> DigitDomains:
    """Render disjoint shares of the digits in each of ``domains`` (module docstring).

    ``n_per_domain`` (default: an equal share of all digits) images per domain, of which
    ``train_fraction`` are marked as training images. ``pixels``/``labels`` default to
    scikit-learn's copy (the tests pass a small array)."""
    pixels, labels = digits_arrays(rng, pixels, labels)
    if pixels.shape[1] != 64:
        raise ValueError(f"pixels must be 8x8 digits (n, 64), got {pixels.shape}")
    domains = tuple(domains)
    if len(domains) < 2 or len(set(domains)) != len(domains):
        raise ValueError(f"need at least two distinct domains, got {domains}")
    for d in domains:
        if d not in DOMAINS:
            raise ValueError(f"unknown domain {d!r}; choose from {DOMAINS}")
    if isinstance(size, bool) or not isinstance(size, int) or size < 8:
        raise ValueError(f"size must be an int >= 8, got {size!r}")
    if not 0.0 < train_fraction < 1.0:
        raise ValueError(f"train_fraction must lie in (0, 1), got {train_fraction!r}")
    share = len(pixels) // len(domains)
    n = share if n_per_domain is None else int(n_per_domain)
    if not 2 <= n <= share:
        raise ValueError(f"n_per_domain must lie in [2, {share}] ({len(pixels)} digits over "
                         f"{len(domains)} domains), got {n_per_domain!r}")
    order = rng.permutation(len(pixels))
    xs, ys, ds, tr = [], [], [], []
    for k, name in enumerate(domains):
        idx = order[k * share:k * share + n]
        m = _upsample(pixels[idx], size)
        bg, ink = _background(name, n, size, rng)
        img = (1.0 - m) * bg + m * ink
        if name == "noise":
            from scipy.ndimage import gaussian_filter

            img = gaussian_filter(img, sigma=(0, 0.8, 0.8))
        xs.append(np.clip(img, 0.0, 1.0))
        ys.append(labels[idx])
        ds.append(np.full(n, k))
        n_train = int(round(train_fraction * n))
        tr.append(np.arange(n) < n_train)
    return DigitDomains(x=np.concatenate(xs)[:, None].astype(np.float32),
                        y=np.concatenate(ys).astype(np.int64), domain=np.concatenate(ds),
                        is_train=np.concatenate(tr), names=domains)
