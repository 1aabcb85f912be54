r"""Shape scenes with referring expressions and the box of the one object each expression names.

A visual-grounding proxy (the RefCOCO task in miniature). A scene is 3--5 non-overlapping filled
shapes on a dark ``size`` x ``size`` canvas, each a triple (shape, colour, size) with

* shape in {circle, square, triangle} (drawn by :func:`reprobook.data.scenes._mask`),
* colour in {red, green, blue, yellow} (RGB values of :data:`reprobook.data.scenes.COLOURS`),
* size in {small, large} (radius ``r_small`` or ``r_large`` pixels),

plus a little pixel noise. An **expression** names exactly one object, the *referent*, in one of
three kinds (ids of :data:`KINDS`):

* ``simple`` -- "the red circle": the only object of that colour and shape;
* ``attribute`` -- "the large blue shape" or "the small square": the only object with that size
  and colour (or size and shape);
* ``relational`` -- "the square left of the green triangle": among the objects of the referent's
  shape (the anchor excluded), the only one that lies on that side of the *anchor*, itself the
  only object of its colour and shape. "left of" means :math:`x_\text{ref} \le x_\text{anc} - m`
  (margin :math:`m`, centres); every other candidate must be plainly not on that side
  (:math:`x \ge x_\text{anc}`), so no expression is borderline. Likewise right of, above, below.

**Text matters by construction.** Every scene holds at least one *distractor* that shares the
referent's shape or colour (for ``relational``: its shape *and* colour), so a model that ignores the
expression, or reads only one word of it, cannot find the referent reliably.

The target is the tight pixel box of the referent's mask, ``(x1, y1, x2, y2)`` divided by ``size``
(so in [0, 1]; ``x2`` is one past the last column). Every scene is a pure function of the
generator, so a data set is reproducible from its seed.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .scenes import COLOURS as _ALL_COLOURS
from .scenes import _grid, _mask

__all__ = ["SHAPES", "COLOURS", "SIZES", "KINDS", "RELATIONS", "VOCAB", "Obj", "GroundingSet",
           "referring_expression", "describe", "make_grounding_set", "make_caption_set"]

SHAPES = ("circle", "square", "triangle")
COLOURS = ("red", "green", "blue", "yellow")
SIZES = ("small", "large")
KINDS = ("simple", "attribute", "relational")
RELATIONS = ("left of", "right of", "above", "below")
#: every word an expression or caption can contain
VOCAB = ("the", "a", "shape", "is", "left", "right", "of", "above", "below", *SHAPES, *COLOURS,
         *SIZES)


@dataclass(frozen=True)
class Obj:
    shape: str
    colour: str
    size: str
    x: float          # centre, pixels (y grows downwards)
    y: float
    r: float          # radius, pixels


@dataclass
class GroundingSet:
    """``images [n, 3, S, S]`` float32 in [0, 1]; ``texts`` (n strings); ``boxes [n, 4]`` xyxy in
    [0, 1]; ``kinds [n]`` index into :data:`KINDS`; ``scenes``: the objects of each image."""
    images: np.ndarray
    texts: list
    boxes: np.ndarray
    kinds: np.ndarray
    scenes: list

    def __len__(self) -> int:
        return len(self.texts)


def _side(o: Obj, anchor: Obj, rel: str) -> float:
    """How far ``o`` lies on side ``rel`` of ``anchor`` (pixels; negative: the other side)."""
    return {"left of": anchor.x - o.x, "right of": o.x - anchor.x,
            "above": anchor.y - o.y, "below": o.y - anchor.y}[rel]


def describe(o: Obj) -> str:
    return f"{o.colour} {o.shape}"


def referring_expression(objs, target: int, kind: str, rng: np.random.Generator,
                         margin: float = 3.0) -> str | None:
    """A random expression of ``kind`` that names ``objs[target]`` and no other object, or None
    if the scene admits none (see the module docstring for the rules)."""
    if kind not in KINDS:
        raise ValueError(f"unknown expression kind {kind!r}; one of {KINDS}")
    if not 0 <= target < len(objs):
        raise ValueError(f"target {target} out of range for {len(objs)} objects")
    t = objs[target]
    others = [o for i, o in enumerate(objs) if i != target]
    options = []
    if kind == "simple":
        if not any(o.shape == t.shape and o.colour == t.colour for o in others):
            options.append(f"the {t.colour} {t.shape}")
    elif kind == "attribute":
        if not any(o.size == t.size and o.colour == t.colour for o in others):
            options.append(f"the {t.size} {t.colour} shape")
        if not any(o.size == t.size and o.shape == t.shape for o in others):
            options.append(f"the {t.size} {t.shape}")
    else:
        for a, anc in enumerate(objs):
            if a == target or sum(o.shape == anc.shape and o.colour == anc.colour for o in objs) != 1:
                continue
            rivals = [o for i, o in enumerate(objs) if i not in (a, target) and o.shape == t.shape]
            for rel in RELATIONS:
                if _side(t, anc, rel) >= margin and all(_side(o, anc, rel) <= 0 for o in rivals):
                    options.append(f"the {t.shape} {rel} the {describe(anc)}")
    if not options:
        return None
    return options[int(rng.integers(len(options)))]


def _place(rng, specs, size, r_small, r_large, gap=2.0, tries=200, grid=0):
    """Centres for ``specs`` (shape, colour, size) with no two shapes closer than ``gap`` pixels;
    with ``grid = g > 0``, one object a cell of a g x g grid, at the cell's centre +- 0.5 px."""
    if grid:
        cell = size / grid
        cells = rng.choice(grid * grid, len(specs), replace=False)
        return [Obj(sh, c, sz, float((k % grid + 0.5) * cell + rng.uniform(-0.5, 0.5)),
                    float((k // grid + 0.5) * cell + rng.uniform(-0.5, 0.5)),
                    float(r_small if sz == "small" else r_large))
                for (sh, c, sz), k in zip(specs, cells)]
    objs = []
    for shape, colour, sz in specs:
        r = r_small if sz == "small" else r_large
        for _ in range(tries):
            x, y = rng.uniform(r + 0.5, size - 1.5 - r, size=2)
            if all((x - o.x) ** 2 + (y - o.y) ** 2 >= (r + o.r + gap) ** 2 for o in objs):
                objs.append(Obj(shape, colour, sz, float(x), float(y), float(r)))
                break
        else:
            return None
    return objs


def _random_spec(rng):
    return (SHAPES[rng.integers(3)], COLOURS[rng.integers(4)], SIZES[rng.integers(2)])


def _scene_with_distractor(rng, kind, n_objects, size, r_small, r_large, grid):
    """Objects: the referent (index 0), a distractor sharing its shape or colour (both for
    ``relational``), then random others."""
    t = _random_spec(rng)
    if kind == "relational":
        d = (t[0], t[1], SIZES[rng.integers(2)])
    elif rng.random() < 0.5:
        d = (t[0], COLOURS[(COLOURS.index(t[1]) + 1 + rng.integers(3)) % 4], SIZES[rng.integers(2)])
    else:
        d = (SHAPES[(SHAPES.index(t[0]) + 1 + rng.integers(2)) % 3], t[1], SIZES[rng.integers(2)])
    specs = [t, d] + [_random_spec(rng) for _ in range(n_objects - 2)]
    return _place(rng, specs, size, r_small, r_large, grid=grid)


def _render(objs, rng, size, noise):
    yy, xx = _grid(size)
    img = np.zeros((3, size, size), dtype=np.float64)
    boxes = []
    for o in objs:
        m = _mask(o.shape, o.x, o.y, o.r, yy, xx)
        img[:, m] = np.asarray(_ALL_COLOURS[o.colour])[:, None]
        rows, cols = np.nonzero(m)
        boxes.append([cols.min(), rows.min(), cols.max() + 1, rows.max() + 1])
    img += noise * rng.standard_normal(img.shape)
    return np.clip(img, 0.0, 1.0).astype(np.float32), np.asarray(boxes, dtype=np.float32) / size


def _check(n, size, r_small, r_large, min_objects, max_objects, grid):
    if isinstance(grid, bool) or not isinstance(grid, (int, np.integer)) or grid < 0:
        raise ValueError(f"grid must be an int >= 0 (0: free placement), got {grid!r}")
    if grid and (2 * r_large + 1 > size / grid or grid * grid < max_objects):
        raise ValueError(f"a {grid} x {grid} grid of {size / grid:.1f}-px cells cannot hold "
                         f"{max_objects} objects of radius {r_large}")
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"n must be a positive int, got {n!r}")
    if not 0 < r_small < r_large:
        raise ValueError(f"need 0 < r_small < r_large, got {r_small}, {r_large}")
    if not 3 <= min_objects <= max_objects:
        raise ValueError(f"need 3 <= min_objects <= max_objects, got {min_objects}, {max_objects}")
    if not grid and size < 4 * r_large + 4:
        raise ValueError(f"size {size} is too small for objects of radius {r_large}")


def make_grounding_set(n: int, rng: np.random.Generator, size: int = 32, r_small: float = 3.5,
                       r_large: float = 6.0, min_objects: int = 3, max_objects: int = 5,
                       noise: float = 0.03, kinds=KINDS, grid: int = 0) -> GroundingSet:
    """``n`` scenes, each with one expression and its referent's box; the kinds cycle through
    ``kinds`` in order (equal shares). Scenes that admit no expression of the wanted kind, or no
    placement, are redrawn. ``grid = g > 0`` puts the objects in distinct cells of a g x g grid
    (centres jittered by at most half a pixel), ``grid = 0`` anywhere without overlap."""
    _check(n, size, r_small, r_large, min_objects, max_objects, grid)
    bad = [k for k in kinds if k not in KINDS]
    if bad or not kinds:
        raise ValueError(f"unknown expression kinds {bad}; use some of {KINDS}")
    images, texts, boxes, kind_ids, scenes = [], [], [], [], []
    for i in range(n):
        kind = kinds[i % len(kinds)]
        while True:
            k = int(rng.integers(min_objects, max_objects + 1))
            objs = _scene_with_distractor(rng, kind, k, size, r_small, r_large, grid)
            if objs is None:
                continue
            text = referring_expression(objs, 0, kind, rng)
            if text is not None:
                break
        order = rng.permutation(len(objs))        # the referent is not always drawn first
        objs = [objs[j] for j in order]
        img, bx = _render(objs, rng, size, noise)
        images.append(img)
        texts.append(text)
        boxes.append(bx[int(np.flatnonzero(order == 0)[0])])
        kind_ids.append(KINDS.index(kind))
        scenes.append(objs)
    return GroundingSet(np.stack(images), texts, np.stack(boxes), np.asarray(kind_ids), scenes)


def make_caption_set(n: int, rng: np.random.Generator, size: int = 32, r_small: float = 3.5,
                     r_large: float = 6.0, min_objects: int = 3, max_objects: int = 5,
                     noise: float = 0.03, grid: int = 0):
    """Image-caption pairs for task-agnostic multimodal pretraining: random scenes and one *true*
    caption each, which need not single anything out and carries no box -- "a large red circle"
    (some object in the scene) or "a red circle is left of a blue square" (two objects whose
    centres differ by at least 3 pixels on that axis). ``grid`` as in :func:`make_grounding_set`.
    Returns ``(images, captions)``."""
    _check(n, size, r_small, r_large, min_objects, max_objects, grid)
    images, captions = [], []
    for _ in range(n):
        while (objs := _place(rng, [_random_spec(rng) for _ in range(
                int(rng.integers(min_objects, max_objects + 1)))], size, r_small, r_large,
                grid=grid)) is None:
            pass
        img, _ = _render(objs, rng, size, noise)
        a, b = rng.choice(len(objs), 2, replace=False)
        oa, ob = objs[a], objs[b]
        rels = [rel for rel in RELATIONS if _side(oa, ob, rel) >= 3.0]
        if rels and rng.random() < 0.5:
            rel = rels[int(rng.integers(len(rels)))]
            cap = f"a {describe(oa)} is {rel} a {describe(ob)}"
        else:
            cap = f"a {oa.size} {describe(oa)}"
        images.append(img)
        captions.append(cap)
    return np.stack(images), captions
