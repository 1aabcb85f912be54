r"""Small RGB sprites with known parts, the drags one can apply to them, every valid outcome of a
drag, and planted artefacts (for an independent judge of edit quality).

A sprite is one object on a flat dark background: an ellipse **body** (centre :math:`c`, angle
:math:`\theta`, half-length :math:`a`, half-width :math:`b`, a colour) with a **head** disc of radius
:math:`r` at the body's tip. With :math:`u=(\cos\theta,\sin\theta)` its three keypoints are

.. math:: h=c+a\,u\ \text{(head)},\qquad c\ \text{(centre)},\qquad \tau=c-a\,u\ \text{(tail)}.

Coordinates are in pixels, ``(x, y)`` = (column, row), pixel centres at integers. Rendering is
anti-aliased: every part is a soft mask :math:`\mathrm{sigmoid}(-d/w)` of its signed distance
:math:`d` (``w`` = ``edge`` px), painted body then head over the background.

**A drag** moves the head (the handle, :math:`h`) to a target point :math:`g`. It is ill-posed: three
different edits put the head on :math:`g` and leave a valid sprite (:func:`intention_outcome`):

* ``translate`` -- move the whole object by :math:`g-h`;
* ``pivot`` -- keep the tail fixed, turn and stretch the body so that its tip is at :math:`g`
  (:math:`c'=(\tau+g)/2`, :math:`a'=|g-\tau|/2`);
* ``spin`` -- keep the centre fixed, turn and stretch about it (:math:`a'=|g-c|`).

:func:`sample_drags` draws source sprites and targets for which all three outcomes are valid sprites
(half-length inside the training range, the whole object inside the frame), so each drag has
exactly three known ground-truth results.

:func:`plant_artefacts` corrupts clean sprites with the failure modes of drag editing (a ghost
second head, a torn body, a smeared patch, a double exposure of two poses, a colour blotch). It is
used only to train the *judge* of artefacts, never by the editing method.

Images are float32 tensors of shape ``(n, 3, size, size)`` in ``[-1, 1]`` (background -0.8).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

__all__ = ["INTENTIONS", "SpriteParams", "random_sprites", "render", "keypoints", "intention_outcome",
           "is_valid", "sample_drags", "plant_artefacts", "ARTEFACTS", "silhouette"]

INTENTIONS = ("translate", "pivot", "spin")
ARTEFACTS = ("ghost-head", "torn-body", "smear", "double-exposure", "blotch")
_BG = -0.8
_HEAD_RGB = (1.0, 0.85, -0.2)          # a fixed yellow head: no body colour is close to it
_BODY_HUES = np.array([[-0.4, 0.2, 1.0], [1.0, -0.3, -0.3], [-0.3, 0.9, -0.1], [0.8, -0.4, 0.9]])


@dataclass
class SpriteParams:
    """Float64 arrays of length n: ``cx, cy`` (px), ``theta`` (rad), ``a, b`` (px), ``colour`` (n, 3)."""

    cx: np.ndarray
    cy: np.ndarray
    theta: np.ndarray
    a: np.ndarray
    b: np.ndarray
    colour: np.ndarray

    def __post_init__(self):
        n = len(self.cx)
        for k in ("cy", "theta", "a", "b"):
            if len(getattr(self, k)) != n:
                raise ValueError(f"all sprite parameters need {n} entries, {k} has {len(getattr(self, k))}")
        if np.shape(self.colour) != (n, 3):
            raise ValueError(f"colour must have shape ({n}, 3), got {np.shape(self.colour)}")

    def __len__(self):
        return len(self.cx)

    def take(self, idx) -> "SpriteParams":
        idx = np.asarray(idx)
        return SpriteParams(*(np.asarray(getattr(self, k))[idx] for k in
                              ("cx", "cy", "theta", "a", "b", "colour")))


def _check_size(size: int):
    if isinstance(size, bool) or not isinstance(size, (int, np.integer)) or size < 8:
        raise ValueError(f"size must be an int >= 8, got {size!r}")


def _ranges(size: int):
    """Half-length range, half-width, head radius and frame margin, scaled with the image side."""
    s = size / 16
    return (2.2 * s, 4.6 * s), 1.25 * s, 1.5 * s, 1.0 * s


def random_sprites(n: int, size: int, rng: np.random.Generator) -> SpriteParams:
    """``n`` random sprites that fit inside a ``size`` x ``size`` frame."""
    _check_size(size)
    (amin, amax), b, _, _ = _ranges(size)
    out = []
    while sum(len(p) for p in out) < n:
        m = 2 * n
        p = SpriteParams(rng.uniform(0, size - 1, m), rng.uniform(0, size - 1, m),
                         rng.uniform(-math.pi, math.pi, m), rng.uniform(amin, amax, m),
                         np.full(m, b), _BODY_HUES[rng.integers(len(_BODY_HUES), size=m)]
                         + rng.uniform(-0.15, 0.15, (m, 3)))
        out.append(p.take(np.flatnonzero(is_valid(p, size))))
    return SpriteParams(*(np.concatenate([getattr(p, k) for p in out])[:n] for k in
                          ("cx", "cy", "theta", "a", "b", "colour")))


def keypoints(p: SpriteParams) -> np.ndarray:
    """(n, 3, 2) array of the head, centre and tail points ``(x, y)``."""
    u = np.stack([np.cos(p.theta), np.sin(p.theta)], 1)
    c = np.stack([p.cx, p.cy], 1)
    a = np.asarray(p.a)[:, None]
    return np.stack([c + a * u, c, c - a * u], 1)


def is_valid(p: SpriteParams, size: int) -> np.ndarray:
    """Boolean (n,): half-length in the training range and the whole object inside the frame."""
    (amin, amax), b, r, margin = _ranges(size)
    kp = keypoints(p)
    lo, hi = margin - 0.5, size - 0.5 - margin
    head_ok = np.all((kp[:, 0] - r >= lo) & (kp[:, 0] + r <= hi), 1)
    tail_ok = np.all((kp[:, 2] - b >= lo) & (kp[:, 2] + b <= hi), 1)
    return (p.a >= amin - 1e-9) & (p.a <= amax + 1e-9) & head_ok & tail_ok


def render(p: SpriteParams, size: int, edge: float = 0.4, dtype=torch.float32) -> torch.Tensor:
    """Anti-aliased images ``(n, 3, size, size)`` in [-1, 1] (see the module docstring)."""
    _check_size(size)
    if edge <= 0:
        raise ValueError(f"edge must be positive, got {edge}")
    _, _, r, _ = _ranges(size)
    yy, xx = np.meshgrid(np.arange(size, dtype=float), np.arange(size, dtype=float), indexing="ij")
    dx, dy = xx[None] - p.cx[:, None, None], yy[None] - p.cy[:, None, None]
    ct, st = np.cos(p.theta)[:, None, None], np.sin(p.theta)[:, None, None]
    along, across = dx * ct + dy * st, -dx * st + dy * ct
    a, b = p.a[:, None, None], p.b[:, None, None]
    # signed distance of an ellipse, first-order: (radius in normalised units - 1) x the local scale
    q = np.sqrt((along / a) ** 2 + (across / b) ** 2)
    grad = np.sqrt((along / a ** 2) ** 2 + (across / b ** 2) ** 2) / np.maximum(q, 1e-9)
    d_body = (q - 1) / np.maximum(grad, 1e-9)
    hx, hy = (p.cx + p.a * np.cos(p.theta))[:, None, None], (p.cy + p.a * np.sin(p.theta))[:, None, None]
    d_head = np.sqrt((xx[None] - hx) ** 2 + (yy[None] - hy) ** 2) - r
    m_body = 1 / (1 + np.exp(np.clip(d_body / edge, -50, 50)))
    m_head = 1 / (1 + np.exp(np.clip(d_head / edge, -50, 50)))
    img = np.full((len(p), 3, size, size), _BG)
    img = img * (1 - m_body[:, None]) + np.asarray(p.colour)[:, :, None, None] * m_body[:, None]
    img = img * (1 - m_head[:, None]) + np.asarray(_HEAD_RGB)[None, :, None, None] * m_head[:, None]
    return torch.as_tensor(np.clip(img, -1, 1), dtype=dtype)


def intention_outcome(p: SpriteParams, target: np.ndarray, intention: str) -> SpriteParams:
    """The sprite after dragging the head to ``target`` (n, 2) under one ``intention``."""
    if intention not in INTENTIONS:
        raise ValueError(f"unknown intention {intention!r}; use one of {INTENTIONS}")
    g = np.asarray(target, dtype=float)
    if g.shape != (len(p), 2):
        raise ValueError(f"target must have shape ({len(p)}, 2), got {g.shape}")
    kp = keypoints(p)
    head, centre, tail = kp[:, 0], kp[:, 1], kp[:, 2]
    if intention == "translate":
        c, theta, a = centre + (g - head), p.theta.copy(), p.a.copy()
    else:
        anchor = tail if intention == "pivot" else centre
        v = g - anchor
        length = np.linalg.norm(v, axis=1)
        a = length / 2 if intention == "pivot" else length
        theta = np.arctan2(v[:, 1], v[:, 0])
        c = (anchor + g) / 2 if intention == "pivot" else centre.copy()
    return SpriteParams(c[:, 0], c[:, 1], theta, a, p.b.copy(), np.array(p.colour, copy=True))


def sample_drags(n: int, size: int, rng: np.random.Generator, min_dist: float | None = None,
                 max_dist: float | None = None) -> tuple[SpriteParams, np.ndarray]:
    """``n`` (source sprite, target point) pairs whose drag distance lies in ``[min_dist, max_dist]``
    (default 0.15 and 0.3 of ``size``) and whose three intention outcomes are all valid sprites."""
    _check_size(size)
    lo = 0.15 * size if min_dist is None else float(min_dist)
    hi = 0.3 * size if max_dist is None else float(max_dist)
    if not 0 < lo <= hi:
        raise ValueError(f"need 0 < min_dist <= max_dist, got {lo}, {hi}")
    srcs, tgts, total, tries = [], [], 0, 0
    while total < n:
        tries += 1
        if tries > 200:
            raise RuntimeError(f"could not draw {n} valid drags at size {size}, distance [{lo}, {hi}]")
        m = 4 * n
        p = random_sprites(m, size, rng)
        ang, dist = rng.uniform(-math.pi, math.pi, m), rng.uniform(lo, hi, m)
        g = keypoints(p)[:, 0] + dist[:, None] * np.stack([np.cos(ang), np.sin(ang)], 1)
        ok = np.ones(m, bool)
        for it in INTENTIONS:
            ok &= is_valid(intention_outcome(p, g, it), size)
        # a drag whose outcomes differ visibly: the pivot/spin turn at least 15 degrees
        turn = np.abs(np.angle(np.exp(1j * (intention_outcome(p, g, "spin").theta - p.theta))))
        ok &= turn > math.radians(15)
        idx = np.flatnonzero(ok)
        srcs.append(p.take(idx))
        tgts.append(g[idx])
        total += len(idx)
    src = SpriteParams(*(np.concatenate([getattr(s, k) for s in srcs])[:n] for k in
                         ("cx", "cy", "theta", "a", "b", "colour")))
    return src, np.concatenate(tgts)[:n]


def plant_artefacts(images: torch.Tensor, params: SpriteParams, rng: np.random.Generator,
                    kinds: tuple[str, ...] = ARTEFACTS) -> tuple[torch.Tensor, np.ndarray]:
    """Each image gets one artefact drawn from ``kinds``; returns the corrupted images and the kind
    index of each (into ``kinds``)."""
    if images.ndim != 4 or images.shape[1] != 3 or images.shape[0] != len(params):
        raise ValueError(f"images must have shape ({len(params)}, 3, H, W), got {tuple(images.shape)}")
    bad = [k for k in kinds if k not in ARTEFACTS]
    if bad or not kinds:
        raise ValueError(f"unknown artefact kinds {bad}; use a non-empty subset of {ARTEFACTS}")
    n, size = images.shape[0], images.shape[-1]
    out = images.clone()
    which = rng.integers(len(kinds), size=n)
    yy, xx = torch.meshgrid(torch.arange(size, dtype=images.dtype), torch.arange(size, dtype=images.dtype),
                            indexing="ij")
    kp = keypoints(params)
    _, _, r, _ = _ranges(size)
    for i in range(n):
        kind = kinds[which[i]]
        if kind in ("ghost-head", "blotch", "smear"):
            # a spot near the object (so the judge cannot just look at empty corners)
            cx, cy = kp[i, rng.integers(3)] + rng.normal(0, size / 6, 2)
            cx, cy = np.clip([cx, cy], 1, size - 2)
            rad = r * rng.uniform(0.8, 1.4)
            m = torch.sigmoid(-(torch.sqrt((xx - cx) ** 2 + (yy - cy) ** 2) - rad) / 0.4)
            if kind == "ghost-head":
                col, alpha = torch.tensor(_HEAD_RGB, dtype=images.dtype), rng.uniform(0.5, 0.9)
            elif kind == "blotch":
                col, alpha = torch.tensor(rng.uniform(-1, 1, 3), dtype=images.dtype), rng.uniform(0.6, 1.0)
            else:
                col = torch.tensor(rng.uniform(-1, 1, (3, size, size)), dtype=images.dtype)
                alpha = rng.uniform(0.5, 0.9)
            col = col.reshape(3, *(col.shape[1:] or (1, 1)))
            out[i] = out[i] * (1 - alpha * m) + col * alpha * m
        elif kind == "torn-body":
            # background across a band through the body, perpendicular to it
            t = rng.uniform(-0.4, 0.4) * params.a[i]
            ct, st = math.cos(params.theta[i]), math.sin(params.theta[i])
            px, py = params.cx[i] + t * ct, params.cy[i] + t * st
            along = (xx - px) * ct + (yy - py) * st
            m = torch.sigmoid(-(along.abs() - rng.uniform(0.6, 1.2)) / 0.3)
            out[i] = out[i] * (1 - m) + _BG * m
        else:   # double exposure: the average of this pose and a shifted/turned copy
            q = params.take([i])
            q = SpriteParams(q.cx + rng.normal(0, size / 8), q.cy + rng.normal(0, size / 8),
                             q.theta + rng.normal(0, 0.8), q.a, q.b, q.colour)
            w = rng.uniform(0.35, 0.65)
            out[i] = (1 - w) * out[i] + w * render(q, size, dtype=images.dtype)[0]
    return out.clamp(-1, 1), which


def silhouette(p: SpriteParams, size: int) -> torch.Tensor:
    """Soft masks ``(n, size, size)`` in [0, 1] of where each sprite (body or head) is."""
    white = SpriteParams(p.cx, p.cy, p.theta, p.a, p.b, np.ones((len(p), 3)))
    img = render(white, size)[:, 0]
    return ((img - _BG) / (1 - _BG)).clamp(0, 1)
