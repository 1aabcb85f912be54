r"""Segmented time-series classification on MVD series (multiple classes of varying duration).

A long recording is a sequence of class *segments* of varying duration. It is cut into
non-overlapping windows of ``w`` samples (the instances to classify), and ``n`` consecutive windows
form one *group* (one training sample of a context-aware classifier). This module makes such data
with known ground truth, corrupts its boundaries the way disagreeing annotators do, and scores
predictions.

**Generator** (:func:`mvd_series`). The class sequence is a Markov chain that never stays in the
same class (the next class is uniform over the others); segment durations are drawn from a
class-specific log-normal, clipped to ``duration_range`` samples. Class :math:`c` emits on channel
:math:`m`

.. math:: x_m(t) = \sum_{j=1}^{2} a_{c,m,j}\,\sin(2\pi f_{c,j} t + \varphi_{m,j}) + \sigma\,u_m(t),

with fresh phases :math:`\varphi` per segment and AR(1) noise :math:`u` of unit variance. Classes
1 and 2 share their frequencies and differ only by a factor ``confusion`` in amplitude, so one
short window of either is ambiguous and its neighbours carry the information. Consecutive segments
are cross-faded over ``crossfade`` samples (weights that ramp linearly and sum to one), so
boundaries are gradual, as in real recordings.

**Boundary noise** (:func:`shift_boundaries`). Each true boundary of a window-label sequence is
moved by an independent :math:`s \sim U\{-k,\dots,k\}` windows (kept in order, every segment keeps
at least one window): an annotator who places the change a little early or late.

**Groups** (:func:`make_groups`) and **scores** (:func:`scores`: accuracy, macro-F1 and accuracy on
windows within ``radius`` windows of a true boundary).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["MVDSeries", "mvd_series", "window_labels", "shift_boundaries", "Groups", "make_groups",
           "scramble_groups", "boundary_mask", "scores", "transitions_per_group", "macro_f1"]


def _int(name, v, lo=1):
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < lo:
        raise ValueError(f"{name} must be an int >= {lo}, got {v!r}")
    return int(v)


def _rng(rng):
    if not isinstance(rng, np.random.Generator):
        raise TypeError("rng must be a numpy Generator (use reprobook.rng(seed, stream))")
    return rng


@dataclass
class MVDSeries:
    """One generated recording: ``values [T, C]``, per-sample ``labels [T]`` and the segments."""
    values: np.ndarray       # [T, C] float64
    labels: np.ndarray       # [T] int64, the true class of every sample
    starts: np.ndarray       # [S] first sample of every segment
    classes: np.ndarray      # [S] class of every segment


def mvd_series(length: int, *, n_classes: int = 4, n_channels: int = 3,
               duration_range=(96, 960), duration_sigma: float = 0.5, crossfade: int = 20,
               noise: float = 0.6, ar_phi: float = 0.7, confusion: float = 0.15,
               rng: np.random.Generator) -> MVDSeries:
    """Draw an MVD recording of ``length`` samples (see the module docstring).

    Class medians of the duration are spread evenly over the geometric middle of
    ``duration_range``; frequencies (cycles per sample) lie in [0.04, 0.25]. The class parameters
    (frequencies, amplitudes, duration medians) are drawn from a fixed stream, so every call with
    the same ``n_classes`` and ``n_channels`` describes the same classes; ``rng`` draws the
    recording (segments, phases, noise)."""
    T = _int("length", length, 2)
    K = _int("n_classes", n_classes, 3)
    C = _int("n_channels", n_channels)
    lo, hi = duration_range
    if not 0 < lo <= hi:
        raise ValueError(f"duration_range must be (lo, hi) with 0 < lo <= hi, got {duration_range}")
    if not 0 <= ar_phi < 1:
        raise ValueError(f"ar_phi must be in [0, 1), got {ar_phi}")
    if crossfade < 0 or crossfade >= lo:
        raise ValueError(f"crossfade must be in [0, {lo}) (shorter than the shortest segment), "
                         f"got {crossfade}")
    rng = _rng(rng)
    # the classes themselves: a fixed stream, independent of the recording's rng
    cls = np.random.default_rng(np.random.SeedSequence([1717, K, C]))
    freqs = cls.uniform(0.04, 0.25, (K, 2))
    amps = cls.uniform(0.6, 1.4, (K, C, 2))
    freqs[2] = freqs[1]                                   # classes 1 and 2: same frequencies,
    amps[2] = amps[1] * (1 + confusion)                   # slightly larger amplitude
    medians = np.exp(np.linspace(np.log(lo) + 0.25 * np.log(hi / lo),
                                 np.log(hi) - 0.25 * np.log(hi / lo), K))
    medians = medians[cls.permutation(K)]

    starts, classes, t = [], [], 0
    c = int(rng.integers(K))
    while t < T:
        d = int(np.clip(np.round(medians[c] * np.exp(duration_sigma * rng.standard_normal())), lo, hi))
        starts.append(t)
        classes.append(c)
        t += d
        c = int((c + rng.integers(1, K)) % K)             # never the same class twice in a row
    starts, classes = np.array(starts), np.array(classes)
    ends = np.append(starts[1:], T)

    tt = np.arange(T)
    values = np.zeros((T, C))
    labels = np.empty(T, dtype=np.int64)
    half = crossfade / 2
    for s, e, k in zip(starts, ends, classes):
        labels[s:e] = k
        # trapezoid weight: ramps over [s - half, s + half] and [e - half, e + half]; adjacent
        # segments' ramps are mirror images, so the weights sum to one everywhere (the first and
        # last segments do not ramp at the ends of the recording)
        if crossfade:
            a = -np.inf if s == 0 else s - half
            b = np.inf if e == T else e + half
            w = np.clip((tt - a) / crossfade, 0, 1) * np.clip((b - tt) / crossfade, 0, 1)
        else:
            w = ((tt >= s) & (tt < e)).astype(float)
        on = w > 0
        phase = rng.uniform(0, 2 * np.pi, (C, 2))
        sig = (amps[k][None] * np.sin(2 * np.pi * freqs[k][None, None, :] * tt[on, None, None]
                                      + phase[None])).sum(-1)
        values[on] += w[on, None] * sig
    from scipy.signal import lfilter

    # AR(1) noise of unit marginal variance: u(t) = phi u(t-1) + sqrt(1 - phi^2) e(t), u(0) = e(0)
    eps = rng.standard_normal((T, C))
    u = lfilter([np.sqrt(1 - ar_phi ** 2)], [1.0, -ar_phi], eps, axis=0, zi=ar_phi * eps[:1])[0]
    u[0] = eps[0]
    return MVDSeries(values + noise * u, labels, starts, classes)


def window_labels(labels: np.ndarray, window: int) -> np.ndarray:
    """The majority label of every complete non-overlapping window of ``labels [T]``: ``[T // w]``
    (ties go to the smaller class index)."""
    y = np.asarray(labels)
    w = _int("window", window)
    if y.ndim != 1 or not np.issubdtype(y.dtype, np.integer):
        raise ValueError(f"labels must be a 1-d integer array, got shape {y.shape}, dtype {y.dtype}")
    n = len(y) // w
    if n == 0:
        raise ValueError(f"{len(y)} samples make no window of {w}")
    blocks = y[:n * w].reshape(n, w)
    counts = np.stack([(blocks == k).sum(1) for k in range(int(y.max()) + 1)], 1)
    return counts.argmax(1).astype(np.int64)


def shift_boundaries(labels: np.ndarray, k: int, *, rng: np.random.Generator) -> np.ndarray:
    """Move every boundary of the window labels ``labels [N]`` by ``U{-k..k}`` windows (see the
    module docstring). ``k = 0`` returns a copy."""
    y = np.asarray(labels)
    if y.ndim != 1 or not np.issubdtype(y.dtype, np.integer):
        raise ValueError(f"labels must be a 1-d integer array, got shape {y.shape}, dtype {y.dtype}")
    k = _int("k", k, 0)
    rng = _rng(rng)
    b = np.flatnonzero(y[1:] != y[:-1]) + 1                # first index of every new segment
    if k == 0 or len(b) == 0:
        return y.copy()
    cls = np.append(y[0], y[b])                          # class of every segment
    shift = rng.integers(-k, k + 1, len(b))
    edges = np.concatenate([[0], b, [len(y)]])
    new = edges.copy()
    for j in range(1, len(edges) - 1):                   # in order: never cross a neighbour
        new[j] = int(np.clip(edges[j] + shift[j - 1], new[j - 1] + 1, edges[j + 1] - 1))
    out = np.empty_like(y)
    for j in range(len(cls)):
        out[new[j]:new[j + 1]] = cls[j]
    return out


def boundary_mask(labels: np.ndarray, radius: int) -> np.ndarray:
    """True for windows within ``radius`` windows of a boundary of ``labels [N]``: a boundary
    between windows ``i-1`` and ``i`` marks windows ``i-r .. i+r-1`` (both neighbours of the
    boundary are at distance 1)."""
    y = np.asarray(labels)
    r = _int("radius", radius, 0)
    b = np.flatnonzero(y[1:] != y[:-1]) + 1
    m = np.zeros(len(y), dtype=bool)
    for i in b:
        m[max(i - r, 0):i + r] = True
    return m


@dataclass
class Groups:
    """``x [G, n, C, w]`` float32 windows, ``y [G, n]`` labels used for training (possibly noisy),
    ``clean [G, n]`` true labels and ``near [G, n]`` the boundary mask of the clean labels."""
    x: np.ndarray
    y: np.ndarray
    clean: np.ndarray
    near: np.ndarray

    def __len__(self):
        return len(self.x)


def make_groups(series: MVDSeries, window: int, group: int, *, k: int = 0, radius: int = 2,
                rng: np.random.Generator | None = None, mean=None, std=None) -> Groups:
    """Cut ``series`` into windows of ``window`` samples and groups of ``group`` consecutive windows
    (the tail that fills no group is dropped). ``k > 0`` shifts the boundaries of the training
    labels ``y`` (``clean`` keeps the truth). Values are z-scored per channel with ``mean, std``
    (the training set's; its own when not given)."""
    w, n = _int("window", window), _int("group", group)
    v = np.asarray(series.values, dtype=np.float64)
    yw = window_labels(series.labels, w)
    G = len(yw) // n
    if G == 0:
        raise ValueError(f"{len(yw)} windows make no group of {n}")
    noisy = shift_boundaries(yw, k, rng=rng) if k else yw.copy()
    near = boundary_mask(yw, radius)
    mean = v.mean(0) if mean is None else np.asarray(mean)
    std = v.std(0) if std is None else np.asarray(std)
    z = (v[:G * n * w] - mean) / std
    x = z.reshape(G, n, w, v.shape[1]).transpose(0, 1, 3, 2).astype(np.float32)
    cut = G * n
    return Groups(x, noisy[:cut].reshape(G, n), yw[:cut].reshape(G, n), near[:cut].reshape(G, n))


def scramble_groups(g: Groups, *, rng: np.random.Generator) -> Groups:
    """The same windows and labels, dealt into groups at random: every window keeps its own label
    but its group-mates are no longer its neighbours in time (context destroyed)."""
    G, n = g.y.shape
    p = _rng(rng).permutation(G * n)
    f = lambda a: a.reshape(G * n, *a.shape[2:])[p].reshape(a.shape)  # noqa: E731
    return Groups(f(g.x), f(g.y), f(g.clean), f(g.near))


def transitions_per_group(y: np.ndarray) -> np.ndarray:
    """Number of label changes inside every group of ``y [G, n]``."""
    y = np.asarray(y)
    return (y[:, 1:] != y[:, :-1]).sum(1)


def macro_f1(pred: np.ndarray, target: np.ndarray, n_classes: int) -> float:
    """Unweighted mean over classes of F1 = 2 TP / (2 TP + FP + FN); a class absent from both
    prediction and target is left out."""
    p, t = np.ravel(pred), np.ravel(target)
    if p.shape != t.shape:
        raise ValueError(f"pred and target shapes differ: {np.shape(pred)} vs {np.shape(target)}")
    f = []
    for c in range(n_classes):
        tp = np.sum((p == c) & (t == c))
        den = np.sum(p == c) + np.sum(t == c)
        if den:
            f.append(2 * tp / den)
    return float(np.mean(f))


def scores(pred: np.ndarray, g: Groups, n_classes: int) -> dict[str, float]:
    """Accuracy, macro-F1 (in %) and accuracy on windows near a boundary, against ``g.clean``."""
    p = np.asarray(pred)
    if p.shape != g.clean.shape:
        raise ValueError(f"predictions {p.shape} do not match the groups' labels {g.clean.shape}")
    ok = p == g.clean
    return {"acc": 100 * float(ok.mean()), "f1": 100 * macro_f1(p, g.clean, n_classes),
            "boundary_acc": 100 * float(ok[g.near].mean()) if g.near.any() else float("nan")}
