r"""Synthetic single-trial fMRI of digit images: subject-specific voxel tuning in a 3-D grid.

A stand-in for NSD-style fMRI with a known ground truth. A *template brain* is an ellipsoid mask in
a :math:`G^3` grid (coordinates :math:`c\in[-1,1]^3`, axis 1 runs posterior to anterior). Its lower
part (:math:`c_2 < 0.3`) is "visual cortex", split along the posterior-anterior axis into three areas:

* **low-level** (:math:`c_1 < -0.25`): retinotopic voxels. A voxel at :math:`(c_0, c_2)` has a
  Gaussian receptive field on the :math:`4\times4` down-sampled image, centred at the cell that its
  position maps to, so neighbouring voxels see neighbouring pixels (a VAE-like, low-level target);
* **high-level** (:math:`c_1 \ge 0.2`): each voxel is tuned to the *high-level features* (the digit's
  one-hot class and the top principal components of the image: a CLIP-like target) with weights that
  are smooth random fields in space (Gaussian-filtered white noise), so category-selective patches
  extend over several voxels;
* **mixed** (between the two): half of each.

The rest of the mask carries no stimulus signal. Template voxel :math:`v` responds to stimulus
:math:`s` with :math:`r_v(s) = w_v^\top f(s)`, :math:`f = [f_{low}; f_{high}]` standardised.

**Subjects** differ by anatomy and tuning. Subject :math:`k` draws an affine map
:math:`A_k(c) = R\,\mathrm{diag}(\sigma)\,c + t` (rotation up to ``rot_deg`` degrees about a random
axis, per-axis scale in :math:`1\pm` ``scale``, shift up to ``shift`` voxels): its voxel at grid
position :math:`p` sees the template at :math:`A_k^{-1}(p)` (trilinear interpolation of the tuning
fields and of the masks). Its high-level weights are mixed with a fresh smooth field of its own,
:math:`w^{(k)} = \sqrt{1-j^2}\,w + j\,\tilde w^{(k)}` (``tuning_jitter`` :math:`j`), each voxel has
a gain :math:`g_v \sim \mathrm{LogNormal}(0, 0.3)`, and a single trial is

.. math:: x_v = \alpha\, g_v\, r^{(k)}_v(s) + \varepsilon_v, \qquad \varepsilon_v\sim N(0,1),

with :math:`\alpha` set so that the mean signal variance over the subject's visual voxels is ``snr``
times the noise variance. The ground truth kept for each subject: its warp, its area masks (for
concept localisation) and its noiseless responses.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

__all__ = ["FMRIConfig", "Subject", "make_cohort", "StimulusFeatures", "stimulus_features", "template_areas",
           "make_subject", "simulate_trials", "AREAS", "DIGIT_WORDS", "digit_captions"]

AREAS = ("low", "mixed", "high")


@dataclass(frozen=True)
class FMRIConfig:
    """Sizes of the synthetic scanner and of the subject differences."""

    grid: int = 16             # G: the volume is G x G x G voxels
    snr: float = 0.3           # signal variance / noise variance over visual voxels (single trial)
    rot_deg: float = 8.0       # largest rotation of a subject's anatomy, degrees
    scale: float = 0.10        # largest per-axis relative scaling
    shift: float = 1.5         # largest shift, voxels
    tuning_jitter: float = 0.2  # share (in amplitude) of a subject's own high-level tuning
    smooth: float = 1.5        # spatial scale (voxels) of the high-level tuning fields
    rf_width: float = 0.8      # receptive-field width of low-level voxels, in 4x4 image cells
    gain_sd: float = 0.3       # spread of log voxel gains

    def __post_init__(self):
        if isinstance(self.grid, bool) or not isinstance(self.grid, (int, np.integer)) or self.grid < 6:
            raise ValueError(f"grid must be an int >= 6, got {self.grid!r}")
        for name in ("snr", "smooth", "rf_width"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)!r}")
        for name in ("rot_deg", "scale", "shift", "gain_sd"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)!r}")
        if not 0 <= self.tuning_jitter <= 1:
            raise ValueError(f"tuning_jitter must lie in [0, 1], got {self.tuning_jitter!r}")


@dataclass(frozen=True)
class StimulusFeatures:
    """What the brain is tuned to, per image: ``low`` (n, 16) the 4x4 down-sampled pixels,
    ``high`` (n, 10 + n_pcs) one-hot class then principal components, both standardised
    column-wise (the one-hot columns too), and the labels."""

    low: np.ndarray
    high: np.ndarray
    labels: np.ndarray

    @property
    def all(self) -> np.ndarray:
        return np.concatenate([self.low, self.high], axis=1)


def _standardise(x: np.ndarray) -> np.ndarray:
    sd = x.std(axis=0)
    return (x - x.mean(axis=0)) / np.where(sd > 0, sd, 1.0)


def stimulus_features(pixels: np.ndarray, labels: np.ndarray, n_pcs: int = 10,
                      classes: int = 10) -> StimulusFeatures:
    """Low- and high-level features of 8x8 digit images ``pixels`` (n, 64) with ``labels`` (n,)."""
    pixels = np.asarray(pixels, dtype=np.float64)
    labels = np.asarray(labels)
    if pixels.ndim != 2 or pixels.shape[1] != 64:
        raise ValueError(f"pixels must be (n, 64) 8x8 images, got shape {pixels.shape}")
    if labels.shape != (len(pixels),):
        raise ValueError(f"labels must have shape ({len(pixels)},), got {labels.shape}")
    if not 1 <= n_pcs < min(pixels.shape):
        raise ValueError(f"n_pcs must lie in [1, {min(pixels.shape) - 1}], got {n_pcs}")
    low = pixels.reshape(-1, 4, 2, 4, 2).mean(axis=(2, 4)).reshape(-1, 16)
    centred = pixels - pixels.mean(axis=0)
    _, _, vt = np.linalg.svd(centred, full_matrices=False)
    pcs = centred @ vt[:n_pcs].T
    from .digits import one_hot
    high = np.concatenate([one_hot(labels.astype(np.int64), classes), pcs], axis=1)
    return StimulusFeatures(low=_standardise(low), high=_standardise(high),
                            labels=labels.astype(np.int64))


def _coords(G: int) -> np.ndarray:
    """Voxel centres in [-1, 1]^3, shape (3, G, G, G)."""
    lin = np.linspace(-1.0, 1.0, G)
    return np.stack(np.meshgrid(lin, lin, lin, indexing="ij"))


def _smooth_fields(rng: np.random.Generator, n: int, G: int, sigma: float) -> np.ndarray:
    """``n`` smooth random fields (n, G, G, G), each with unit standard deviation."""
    from scipy.ndimage import gaussian_filter

    f = np.stack([gaussian_filter(rng.standard_normal((G, G, G)), sigma, mode="wrap")
                  for _ in range(n)])
    return f / f.reshape(n, -1).std(axis=1)[:, None, None, None]


@dataclass(frozen=True)
class _Template:
    mask: np.ndarray           # (G,G,G) bool brain
    areas: dict                # name -> (G,G,G) bool
    w_low: np.ndarray          # (16, G,G,G) retinotopic weights (zero outside low/mixed)
    w_high: np.ndarray         # (d_high, G,G,G) smooth fields (zero outside high/mixed)


def template_areas(G: int) -> tuple[np.ndarray, dict]:
    """The template brain mask and its three visual areas, as boolean (G, G, G) arrays."""
    c = _coords(G)
    mask = (c[0] / 0.9) ** 2 + (c[1] / 0.95) ** 2 + (c[2] / 0.8) ** 2 <= 1.0
    visual = mask & (c[2] < 0.3)
    areas = {"low": visual & (c[1] < -0.25),
             "mixed": visual & (c[1] >= -0.25) & (c[1] < 0.2),
             "high": visual & (c[1] >= 0.2)}
    return mask, areas


def _template(cfg: FMRIConfig, d_high: int, rng: np.random.Generator) -> _Template:
    G = cfg.grid
    c = _coords(G)
    mask, areas = template_areas(G)
    # retinotopy: (c0, c2) in the visual slab -> a cell of the 4x4 image
    u = (c[0] + 0.9) / 1.8 * 3.0                       # column 0..3
    w = (c[2] + 0.8) / 1.1 * 3.0                       # row 0..3 over c2 in [-0.8, 0.3]
    cells = np.arange(4.0)
    rf = np.exp(-((w[None, None] - cells[:, None, None, None, None]) ** 2
                  + (u[None, None] - cells[None, :, None, None, None]) ** 2) / (2 * cfg.rf_width ** 2))
    rf = rf.reshape(16, G, G, G)
    rf = rf / np.sqrt((rf ** 2).sum(axis=0, keepdims=True))
    low_w = np.where(areas["low"], 1.0, np.where(areas["mixed"], np.sqrt(0.5), 0.0))
    high_w = np.where(areas["high"], 1.0, np.where(areas["mixed"], np.sqrt(0.5), 0.0))
    fields = _smooth_fields(rng, d_high, G, cfg.smooth) / np.sqrt(d_high)
    return _Template(mask=mask, areas=areas, w_low=rf * low_w, w_high=fields * high_w)


@dataclass
class Subject:
    """One synthetic subject: its tuning weights over the flattened grid and its ground truth."""

    index: int
    weights: np.ndarray        # (G^3, d_low + d_high) tuning of every voxel
    gains: np.ndarray          # (G^3,)
    amplitude: float           # alpha: signal scale that gives the configured SNR
    mask: np.ndarray           # (G,G,G) bool, the subject's brain
    areas: dict                # name -> (G,G,G) bool, the subject's visual areas (ground truth)
    affine: np.ndarray         # (4, 4) template -> subject voxel coordinates
    grid: int = field(default=16)

    def signal(self, features: np.ndarray) -> np.ndarray:
        """Noiseless responses (n, G^3) to standardised features (n, d_low + d_high)."""
        if features.ndim != 2 or features.shape[1] != self.weights.shape[1]:
            raise ValueError(f"features must be (n, {self.weights.shape[1]}), got {features.shape}")
        return self.amplitude * (features @ self.weights.T) * self.gains


def _random_affine(cfg: FMRIConfig, rng: np.random.Generator, G: int) -> np.ndarray:
    """A 4x4 map of voxel index coordinates: rotation about the grid centre, scaling, shift."""
    axis = rng.standard_normal(3)
    axis /= np.linalg.norm(axis)
    theta = np.deg2rad(rng.uniform(-cfg.rot_deg, cfg.rot_deg))
    K = np.array([[0, -axis[2], axis[1]], [axis[2], 0, -axis[0]], [-axis[1], axis[0], 0]])
    R = np.eye(3) + np.sin(theta) * K + (1 - np.cos(theta)) * K @ K
    S = np.diag(1 + rng.uniform(-cfg.scale, cfg.scale, 3))
    t = rng.uniform(-cfg.shift, cfg.shift, 3)
    centre = (G - 1) / 2 * np.ones(3)
    M = np.eye(4)
    M[:3, :3] = R @ S
    M[:3, 3] = centre - R @ S @ centre + t
    return M


def _warp(volumes: np.ndarray, inverse: np.ndarray, G: int, order: int = 1) -> np.ndarray:
    """Resample (k, G,G,G) template volumes at ``inverse`` applied to every subject voxel."""
    from scipy.ndimage import map_coordinates

    idx = np.stack(np.meshgrid(*(np.arange(G),) * 3, indexing="ij")).reshape(3, -1)
    src = inverse[:3, :3] @ idx + inverse[:3, 3:4]
    return np.stack([map_coordinates(v, src, order=order, mode="constant", cval=0.0).reshape(G, G, G)
                     for v in volumes])


def make_subject(cfg: FMRIConfig, features: StimulusFeatures, seed_rng: np.random.Generator,
                 index: int, template_rng: np.random.Generator | None = None,
                 template: _Template | None = None) -> Subject:
    """Subject ``index``: warp the template (made from ``template_rng`` or passed in), draw its own
    tuning jitter, gains and signal amplitude from ``seed_rng``."""
    if template is None:
        if template_rng is None:
            raise ValueError("pass template_rng (to build the template) or a template")
        template = _template(cfg, features.high.shape[1], template_rng)
    G = cfg.grid
    d_high = template.w_high.shape[0]
    if features.high.shape[1] != d_high:
        raise ValueError(f"the template is tuned to {d_high} high-level features, the stimuli have "
                         f"{features.high.shape[1]}")
    rng = seed_rng
    M = _random_affine(cfg, rng, G)
    inv = np.linalg.inv(M)
    own = _smooth_fields(rng, d_high, G, cfg.smooth) / np.sqrt(d_high)
    high_amp = np.where(template.areas["high"], 1.0, np.where(template.areas["mixed"], np.sqrt(0.5), 0.0))
    j = cfg.tuning_jitter
    w_high = np.sqrt(1 - j ** 2) * template.w_high + j * own * high_amp
    w = _warp(np.concatenate([template.w_low, w_high]), inv, G)
    masks = _warp(np.stack([template.mask, *(template.areas[a] for a in AREAS)]).astype(float), inv,
                  G, order=0) > 0.5
    weights = w.reshape(w.shape[0], -1).T * masks[0].reshape(-1, 1)
    gains = np.exp(cfg.gain_sd * rng.standard_normal(G ** 3))
    raw = features.all @ weights.T * gains
    visual = (masks[1] | masks[2] | masks[3]).reshape(-1)
    var = raw[:, visual].var(axis=0).mean() if visual.any() else 1.0
    return Subject(index=index, weights=weights, gains=gains, amplitude=float(np.sqrt(cfg.snr / var)),
                   mask=masks[0], areas={a: masks[i + 1] for i, a in enumerate(AREAS)}, affine=M,
                   grid=G)


def simulate_trials(subject: Subject, features: np.ndarray, rng: np.random.Generator,
                    dtype=np.float32) -> np.ndarray:
    """Single-trial volumes (n, G, G, G): the subject's signal plus unit Gaussian noise inside its
    brain mask (voxels outside the brain are 0, as after skull stripping)."""
    G = subject.grid
    x = subject.signal(features) + rng.standard_normal((len(features), G ** 3))
    x *= subject.mask.reshape(1, -1)
    return x.reshape(-1, G, G, G).astype(dtype)


def make_cohort(cfg: FMRIConfig, features: StimulusFeatures, n_subjects: int,
                rng: np.random.Generator) -> list[Subject]:
    """``n_subjects`` subjects that share one template (drawn first from ``rng``) and differ by
    anatomy (warp), tuning jitter and gains."""
    if isinstance(n_subjects, bool) or not isinstance(n_subjects, (int, np.integer)) or n_subjects < 1:
        raise ValueError(f"n_subjects must be a positive int, got {n_subjects!r}")
    template = _template(cfg, features.high.shape[1], rng)
    return [make_subject(cfg, features, rng, k, template=template) for k in range(n_subjects)]


DIGIT_WORDS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")


def digit_captions(pixels: np.ndarray, labels: np.ndarray) -> tuple[list[str], np.ndarray]:
    """Templated captions of digit images, "a handwritten seven with thick strokes": the class word
    and the stroke weight (total ink above or below the median of the image's class). Returns the
    distinct captions (class-major, thin before thick) and each image's caption index."""
    pixels = np.asarray(pixels, dtype=np.float64)
    labels = np.asarray(labels).astype(np.int64)
    if pixels.ndim != 2 or labels.shape != (len(pixels),):
        raise ValueError(f"pixels must be (n, d) and labels (n,), got {pixels.shape}, {labels.shape}")
    if labels.size and (labels.min() < 0 or labels.max() > 9):
        raise ValueError("labels must be digits 0-9")
    ink = pixels.sum(axis=1)
    thick = np.zeros(len(labels), dtype=np.int64)
    for c in np.unique(labels):
        sel = labels == c
        thick[sel] = ink[sel] > np.median(ink[sel])
    captions = [f"a handwritten {w} with {s} strokes" for w in DIGIT_WORDS for s in ("thin", "thick")]
    return captions, 2 * labels + thick
