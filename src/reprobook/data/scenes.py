r"""Rendered two-object scenes with known objects, colours and spatial relation.

The images behind the tiny CLIP of the SugarCrepe++ chapter. A scene of
:data:`reprobook.data.caption_triplets.SHAPES_VOCAB` -- ``(a1, o1, rel, a2, o2)``, e.g. "a red
square is to the left of a blue circle" -- is drawn on a black ``size`` x ``size`` RGB canvas:

* **shapes** (filled masks on the pixel grid, radius :math:`\rho` in pixels, centre :math:`c`):
  square :math:`\lVert x - c\rVert_\infty \le \rho`, circle :math:`\lVert x - c\rVert_2 \le \rho`,
  diamond :math:`\lVert x - c\rVert_1 \le \rho`, ring :math:`0.55\rho \le \lVert x-c\rVert_2 \le
  \rho`, cross (two bars of half-width :math:`\rho/3`), triangle (apex up, base at the bottom);
* **colours**: fixed RGB values (:data:`COLOURS`), plus a little pixel noise;
* **relation**: the centres :math:`c_1, c_2` are drawn uniformly until the relation holds
  *unambiguously*: for "left of", :math:`c_{2,x} - c_{1,x} \ge 2\rho + g` (object 1 lies left of
  object 2 by at least one object width and a gap :math:`g`) and :math:`|c_{2,y} - c_{1,y}| \le
  \tfrac12 |c_{2,x} - c_{1,x}|` (the direction is within about 27 degrees of horizontal, so
  "above"/"below" would be plainly wrong); the other three relations likewise. The two shapes
  never overlap.

Every image is a pure function of the scene and the generator, so a data set is reproducible from
its seed, and the ground truth of every caption is known.
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np

from .caption_triplets import SHAPES_VOCAB, Scene

__all__ = ["COLOURS", "SHAPES", "render", "render_batch", "relation_holds", "caption_pairs"]

COLOURS = {"red": (1.0, 0.1, 0.1), "green": (0.1, 0.9, 0.1), "blue": (0.15, 0.3, 1.0),
           "yellow": (1.0, 0.95, 0.1), "purple": (0.65, 0.1, 0.9), "white": (1.0, 1.0, 1.0)}
SHAPES = SHAPES_VOCAB.objects
_DIRS = {"left of": (1, 0), "right of": (-1, 0), "above": (0, 1), "below": (0, -1)}


def _mask(shape: str, cx: float, cy: float, r: float, yy: np.ndarray, xx: np.ndarray) -> np.ndarray:
    dx, dy = xx - cx, yy - cy
    if shape == "square":
        return np.maximum(np.abs(dx), np.abs(dy)) <= r * 0.85
    if shape == "circle":
        return dx * dx + dy * dy <= r * r
    if shape == "diamond":
        return np.abs(dx) + np.abs(dy) <= r * 1.15
    if shape == "ring":
        d2 = dx * dx + dy * dy
        return (d2 <= r * r) & (d2 >= (0.55 * r) ** 2)
    if shape == "cross":
        w = max(r / 3, 0.75)
        return ((np.abs(dx) <= w) & (np.abs(dy) <= r)) | ((np.abs(dy) <= w) & (np.abs(dx) <= r))
    if shape == "triangle":
        # apex at the top (smaller y), base at cy + r; half-width grows linearly downwards
        t = (dy + r) / (2 * r)
        return (t >= 0) & (t <= 1) & (np.abs(dx) <= t * r * 1.1)
    raise ValueError(f"unknown shape {shape!r}; one of {SHAPES}")


@lru_cache(maxsize=8)
def _grid(size: int):
    yy, xx = np.mgrid[0:size, 0:size].astype(np.float64)
    yy.flags.writeable = False
    xx.flags.writeable = False
    return yy, xx


def relation_holds(rel: str, c1, c2, radius: float, gap: float = 1.0) -> bool:
    """Whether centres ``c1`` (object 1) and ``c2`` (object 2), given as (x, y) with y growing
    downwards, make "object 1 is ``rel`` object 2" unambiguous."""
    if rel not in _DIRS:
        raise ValueError(f"relation {rel!r} cannot be drawn; one of {tuple(_DIRS)}")
    # (render() applies the same test to a block of candidates at once)
    ux, uy = _DIRS[rel]
    dx, dy = c2[0] - c1[0], c2[1] - c1[1]
    along = dx * ux + dy * uy                   # object 2 lies this far in the direction away
    across = abs(dy) if ux else abs(dx)
    return along >= 2 * radius + gap and across <= 0.5 * along


def render(scene: Scene, rng: np.random.Generator, size: int = 24, radius: float = 3.5,
           noise: float = 0.03) -> np.ndarray:
    """The scene as a float32 image ``[3, size, size]`` in [0, 1]."""
    if not isinstance(scene, Scene):
        raise TypeError(f"render() needs a Scene, got {type(scene).__name__}")
    if scene.rel not in _DIRS:
        raise ValueError(f"relation {scene.rel!r} cannot be drawn; one of {tuple(_DIRS)}")
    for a in (scene.a1, scene.a2):
        if a not in COLOURS:
            raise ValueError(f"attribute {a!r} is not a drawable colour; one of {tuple(COLOURS)}")
    if isinstance(size, bool) or not isinstance(size, (int, np.integer)) or size < 4 * radius + 4:
        raise ValueError(f"size {size!r} is too small for two objects of radius {radius}")
    lo, hi = radius + 0.5, size - 1.5 - radius
    ux, uy = _DIRS[scene.rel]
    while True:     # rejection sampling, 32 candidate pairs at a time (about 1 in 10 is accepted)
        c = rng.uniform(lo, hi, size=(32, 4))
        dx, dy = c[:, 2] - c[:, 0], c[:, 3] - c[:, 1]
        along = dx * ux + dy * uy
        across = np.abs(dy) if ux else np.abs(dx)
        ok = np.flatnonzero((along >= 2 * radius + 1.0) & (across <= 0.5 * along))
        if ok.size:
            c1, c2 = c[ok[0], :2], c[ok[0], 2:]
            break
    yy, xx = _grid(size)
    img = np.zeros((3, size, size), dtype=np.float64)
    for a, o, (cx, cy) in ((scene.a1, scene.o1, c1), (scene.a2, scene.o2, c2)):
        m = _mask(o, cx, cy, radius, yy, xx)
        img[:, m] = np.asarray(COLOURS[a])[:, None]
    img += noise * rng.standard_normal(img.shape)
    return np.clip(img, 0.0, 1.0).astype(np.float32)


def render_batch(scenes, rng: np.random.Generator, size: int = 24, radius: float = 3.5,
                 noise: float = 0.03) -> np.ndarray:
    """Images ``[len(scenes), 3, size, size]``, one :func:`render` per scene, in order."""
    scenes = list(scenes)
    if not scenes:
        raise ValueError("render_batch() needs at least one scene")
    return np.stack([render(s, rng, size, radius, noise) for s in scenes])


def caption_pairs(n: int, rng: np.random.Generator, size: int = 24, radius: float = 3.5,
                  noise: float = 0.03):
    """A training set for a tiny CLIP: ``n`` random scenes of
    :data:`~reprobook.data.caption_triplets.SHAPES_VOCAB`, their images, one caption each (the
    canonical P1 form or any P2 rewrite, uniformly, so every phrasing the benchmark uses is seen in
    training) and one hard-negative caption each (the canonical caption of the scene after a
    random one of the five SugarCrepe++ edits; used only by NegCLIP-style training).

    Returns ``(images [n, 3, size, size] float32, captions, hard_negatives, scenes)``."""
    from .caption_triplets import (P2_TEMPLATES, SUBSETS, canonical, edit, random_scene,
                                   rewrite)

    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"n must be a positive int, got {n!r}")
    scenes = [random_scene(rng, SHAPES_VOCAB) for _ in range(n)]
    images = render_batch(scenes, rng, size, radius, noise)
    captions, negatives = [], []
    for s in scenes:
        k = int(rng.integers(len(P2_TEMPLATES) + 1))
        captions.append(canonical(s) if k == len(P2_TEMPLATES) else rewrite(s, k, SHAPES_VOCAB))
        while (neg := edit(s, SUBSETS[int(rng.integers(len(SUBSETS)))], rng, SHAPES_VOCAB)) is None:
            pass
        negatives.append(canonical(neg))
    return images, captions, negatives, scenes
