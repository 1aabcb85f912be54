"""Unit tests of reprobook.models.text_baselines."""
import numpy as np
import pytest

from reprobook.data.caption_triplets import meaning, parse
from reprobook.models.text_baselines import cosines, oracle_embed, random_embed, tfidf_embed


def test_tfidf_unigram_is_order_blind_and_bigram_is_not():
    t = ["a red cube is above a blue ball", "a blue cube is above a red ball", "a cat"]
    X1, X2 = tfidf_embed(t, 1), tfidf_embed(t, 2)
    assert cosines(X1[:1], X1[1:2])[0] == pytest.approx(1.0)
    assert cosines(X2[:1], X2[1:2])[0] < 0.9
    assert np.allclose(np.linalg.norm(X1, axis=1), 1.0)
    assert X1[2].nonzero()[0].size == 2          # "a" is a token too
    with pytest.raises(ValueError, match="ngrams"):
        tfidf_embed(t, 0)
    with pytest.raises(TypeError, match="not one string"):
        tfidf_embed("a cube", 1)


def test_random_is_fixed_per_text_and_near_orthogonal():
    t = ["x y", "x z", "x y"]
    R = random_embed(t, dim=384, seed=1)
    assert np.allclose(R[0], R[2]) and abs(R[0] @ R[1]) < 0.3
    assert not np.allclose(random_embed(t, seed=2)[0], R[0])
    with pytest.raises(ValueError, match="dim"):
        random_embed(t, dim=1)


def test_oracle_groups_equivalent_captions():
    t = ["a red cube is to the left of a blue sphere", "a blue sphere is to the right of a red cube",
         "a blue cube is to the left of a red sphere"]
    O = oracle_embed(t, lambda c: meaning(parse(c)))
    assert cosines(O[:1], O[1:2])[0] == 1.0 and cosines(O[:1], O[2:3])[0] == 0.0


def test_cosines_checks_shapes_and_zero_rows():
    assert cosines(np.zeros((1, 3)), np.ones((1, 3)))[0] == 0.0
    with pytest.raises(ValueError, match="one shape"):
        cosines(np.ones((2, 3)), np.ones((3, 3)))
