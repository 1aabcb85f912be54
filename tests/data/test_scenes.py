"""Unit tests of reprobook.data.scenes: images show the scene's colours at the stated relation."""
import numpy as np
import pytest

from reprobook.data.caption_triplets import SHAPES_VOCAB, Scene, meaning, parse
from reprobook.data.scenes import COLOURS, caption_pairs, relation_holds, render, render_batch


def _centroid(img, colour):
    m = np.all(np.abs(img - np.asarray(colour, dtype=np.float32)[:, None, None]) < 0.2, axis=0)
    yy, xx = np.nonzero(m)
    assert yy.size > 5, "the object is missing from the image"
    return xx.mean(), yy.mean()


@pytest.mark.parametrize("rel", ["left of", "right of", "above", "below"])
def test_relation_is_drawn(rel):
    rng = np.random.default_rng(0)
    for shape1, shape2 in (("square", "circle"), ("triangle", "ring"), ("cross", "diamond")):
        img = render(Scene("red", shape1, rel, "blue", shape2), rng, noise=0.0)
        assert img.shape == (3, 24, 24) and img.dtype == np.float32
        (x1, y1), (x2, y2) = _centroid(img, COLOURS["red"]), _centroid(img, COLOURS["blue"])
        dx, dy = x2 - x1, y2 - y1
        # the pixel centroids (not only the centres) show the relation, well off the diagonal
        expect = {"left of": dx > 1.5 * abs(dy), "right of": -dx > 1.5 * abs(dy),
                  "above": dy > 1.5 * abs(dx), "below": -dy > 1.5 * abs(dx)}[rel]
        assert expect, (rel, dx, dy)


def test_relation_holds_and_errors():
    assert relation_holds("left of", (3, 10), (15, 11), 3.5)
    assert not relation_holds("left of", (3, 10), (8, 11), 3.5)       # too close: overlap
    assert not relation_holds("left of", (3, 3), (12, 20), 3.5)       # mostly vertical
    assert not relation_holds("left of", (3, 3), (14, 10), 3.5)       # too diagonal
    with pytest.raises(ValueError, match="cannot be drawn"):
        relation_holds("behind", (0, 0), (9, 0), 3.5)
    with pytest.raises(ValueError, match="cannot be drawn"):
        render(Scene("red", "square", "behind", "blue", "circle"), np.random.default_rng(0))
    with pytest.raises(ValueError, match="not a drawable colour"):
        render(Scene("wooden", "square", "above", "blue", "circle"), np.random.default_rng(0))
    with pytest.raises(ValueError, match="too small"):
        render(Scene("red", "square", "above", "blue", "circle"), np.random.default_rng(0), size=8)


def test_batch_is_reproducible_and_shapes_differ():
    s = [Scene("red", o, "above", "blue", "circle") for o in ("square", "ring", "cross")]
    a = render_batch(s, np.random.default_rng(1), noise=0.0)
    b = render_batch(s, np.random.default_rng(1), noise=0.0)
    assert np.array_equal(a, b) and a.shape == (3, 3, 24, 24)
    reds = [(x[0] > 0.8).sum() for x in a]
    assert len(set(reds)) == 3                       # the three shapes cover different areas


def test_caption_pairs_match_their_scenes():
    imgs, caps, negs, scenes = caption_pairs(40, np.random.default_rng(2))
    assert imgs.shape == (40, 3, 24, 24) and len(caps) == len(negs) == 40
    for c, n, s in zip(caps, negs, scenes):
        assert meaning(parse(c, SHAPES_VOCAB)) == meaning(s)
        assert meaning(parse(n, SHAPES_VOCAB)) != meaning(s)
    with pytest.raises(ValueError, match="positive int"):
        caption_pairs(0, np.random.default_rng(0))
