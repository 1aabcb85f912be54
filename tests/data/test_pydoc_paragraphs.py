"""Prose paragraphs of pydoc_data.topics."""
import numpy as np
import pytest

from reprobook.data.pydoc_paragraphs import draw_disjoint, pydoc_paragraphs, split_halves


def test_paragraphs_are_prose_and_deterministic():
    p = pydoc_paragraphs(min_words=40)
    assert len(p) > 100 and p == pydoc_paragraphs(min_words=40)
    assert all(len(x.split()) >= 40 and "\n" not in x for x in p)
    assert len(set(p)) == len(p)


def test_halves_and_draws():
    a, b = split_halves("one two three four five")
    assert (a, b) == ("one two", "three four five")
    d = draw_disjoint(10, {"x": 3, "y": 4}, np.random.default_rng(0))
    assert len(set(d["x"]) | set(d["y"])) == 7
    with pytest.raises(ValueError, match="only 10"):
        draw_disjoint(10, {"x": 11}, np.random.default_rng(0))
    with pytest.raises(ValueError, match="two words"):
        split_halves("single")
