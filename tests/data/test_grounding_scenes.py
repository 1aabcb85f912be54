import numpy as np
import pytest

from reprobook.data.grounding_scenes import (KINDS, VOCAB, Obj, make_caption_set, make_grounding_set,
                                             referring_expression)


def _referents(objs, text):
    """Indices of the objects an expression names, read back independently of the generator."""
    w = text.split()
    if len(w) == 3:                                   # the <colour|size> <shape>
        a, s = w[1], w[2]
        return [i for i, o in enumerate(objs) if a in (o.colour, o.size) and o.shape == s]
    if len(w) == 4:                                   # the <size> <colour> shape
        return [i for i, o in enumerate(objs) if o.size == w[1] and o.colour == w[2]]
    shape, rel = w[1], " ".join(w[2:4]) if w[2] in ("left", "right") else w[2]
    col, ash = w[-2], w[-1]
    anchors = [o for o in objs if o.colour == col and o.shape == ash]
    assert len(anchors) == 1
    a = anchors[0]
    side = {"left of": lambda o: a.x - o.x, "right of": lambda o: o.x - a.x,
            "above": lambda o: a.y - o.y, "below": lambda o: o.y - a.y}[rel]
    return [i for i, o in enumerate(objs) if o is not a and o.shape == shape and side(o) > 0]


@pytest.mark.parametrize("grid", [0, 4])
def test_every_expression_names_exactly_its_referent(grid):
    kw = dict(grid=4, r_small=2.5, r_large=3.5) if grid else {}
    s = make_grounding_set(60, np.random.default_rng(1), **kw)
    assert np.bincount(s.kinds).tolist() == [20, 20, 20]
    for objs, text, box in zip(s.scenes, s.texts, s.boxes):
        assert all(w in VOCAB for w in text.split())
        hit = _referents(objs, text)
        assert len(hit) == 1, (text, objs)
        o = objs[hit[0]]
        cx, cy = (box[0] + box[2]) / 2 * 32, (box[1] + box[3]) / 2 * 32
        assert abs(cx - o.x) < 1.5 and abs(cy - o.y) < 1.5       # the box is the referent's
        # a distractor shares the referent's shape or colour: the words matter
        assert any(p is not o and (p.shape == o.shape or p.colour == o.colour) for p in objs)


def test_reproducible_and_in_range():
    a = make_grounding_set(9, np.random.default_rng(3))
    b = make_grounding_set(9, np.random.default_rng(3))
    assert a.texts == b.texts and np.array_equal(a.images, b.images)
    assert a.images.shape == (9, 3, 32, 32) and a.images.dtype == np.float32
    assert (a.boxes >= 0).all() and (a.boxes <= 1).all() and (a.boxes[:, 2:] > a.boxes[:, :2]).all()


def test_ambiguous_scene_has_no_expression():
    objs = [Obj("circle", "red", "small", 5, 5, 3), Obj("circle", "red", "small", 20, 20, 3)]
    g = np.random.default_rng(0)
    assert referring_expression(objs, 0, "simple", g) is None
    assert referring_expression(objs, 0, "attribute", g) is None


def test_captions_are_true():
    imgs, caps = make_caption_set(20, np.random.default_rng(2))
    assert imgs.shape == (20, 3, 32, 32) and len(caps) == 20
    assert all(c.startswith("a ") and all(w in VOCAB for w in c.split()) for c in caps)


def test_bad_input():
    g = np.random.default_rng(0)
    with pytest.raises(ValueError, match="kind"):
        referring_expression([Obj("circle", "red", "small", 5, 5, 3)] * 3, 0, "colour", g)
    with pytest.raises(ValueError, match="n must be"):
        make_grounding_set(0, g)
    with pytest.raises(ValueError, match="grid"):
        make_grounding_set(5, g, grid=2)
    with pytest.raises(ValueError, match="kinds"):
        make_grounding_set(5, g, kinds=("nope",))
