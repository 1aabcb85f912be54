"""Unit tests of reprobook.data.caption_triplets: templates keep the meaning, negatives change it."""
import numpy as np
import pytest

from reprobook.data.caption_triplets import (P2_TEMPLATES, SHAPES_VOCAB, SUBSETS, TEXT_VOCAB, Scene,
                                             Vocabulary, canonical, close_caption, edit,
                                             itt_correct, make_triplets, meaning, parse,
                                             random_scene, rewrite, tot_correct)
from reprobook.models.text_baselines import cosines, tfidf_embed


def test_meaning_reads_converse_relations():
    s = Scene("red", "cube", "left of", "blue", "sphere")
    assert meaning(s) == meaning(Scene("blue", "sphere", "right of", "red", "cube"))
    assert meaning(s) != meaning(Scene("red", "cube", "right of", "blue", "sphere"))
    assert meaning(s) != meaning(Scene("blue", "cube", "left of", "red", "sphere"))
    with pytest.raises(ValueError, match="must differ"):
        Scene("red", "cube", "left of", "blue", "cube")
    with pytest.raises(ValueError, match="unknown relation"):
        Scene("red", "cube", "near", "blue", "sphere")


@pytest.mark.parametrize("vocab", [TEXT_VOCAB, SHAPES_VOCAB])
def test_every_rewrite_means_p1_and_every_negative_does_not(vocab):
    rng = np.random.default_rng(1)
    for subset in SUBSETS:
        for t in make_triplets(subset, 120, rng, vocab):
            m = meaning(t.scene)
            assert meaning(parse(t.p1, vocab)) == m
            assert meaning(parse(t.p2, vocab)) == m
            assert meaning(parse(t.p1_close, vocab)) == m
            assert meaning(parse(t.n, vocab)) != m
            assert t.n == canonical(t.negative) and t.p1 != t.p2


def test_each_template_is_lexically_different_and_parsed():
    s = Scene("large", "cube", "above", "green", "cup")
    outs = {rewrite(s, k) for k in range(len(P2_TEMPLATES))}
    assert len(outs) == len(P2_TEMPLATES) and canonical(s) not in outs
    assert rewrite(s, 0) == "a green cup is below a large cube"
    assert rewrite(s, 2) == "a big block is over a green mug"
    assert close_caption(s) == "the large cube is above the green cup"
    with pytest.raises(ValueError, match="template must be"):
        rewrite(s, len(P2_TEMPLATES))
    with pytest.raises(ValueError, match="no template makes"):
        parse("a cube sits near a sphere")


def test_edits_follow_their_subset():
    rng = np.random.default_rng(2)
    s = Scene("red", "cube", "left of", "blue", "sphere")
    assert edit(s, "swap-obj", rng) == Scene("red", "sphere", "left of", "blue", "cube")
    assert edit(s, "swap-att", rng) == Scene("blue", "cube", "left of", "red", "sphere")
    assert edit(Scene("red", "cube", "left of", "red", "sphere"), "swap-att", rng) is None
    for _ in range(50):
        o = edit(s, "replace-obj", rng)
        assert {o.o1, o.o2} & {"cube", "sphere"} and {o.o1, o.o2} != {"cube", "sphere"}
        a = edit(s, "replace-att", rng)
        assert (a.a1 != "red") != (a.a2 != "blue")
        assert TEXT_VOCAB.kind_of(a.a1) == "colour" and TEXT_VOCAB.kind_of(a.a2) == "colour"
        r = edit(s, "replace-rel", rng)
        assert r.rel != "left of" and (r.o1, r.o2) == ("cube", "sphere")
    with pytest.raises(ValueError, match="unknown subset"):
        edit(s, "swap-rel", rng)
    with pytest.raises(ValueError, match="unknown subset"):
        make_triplets("swap-rel", 3, rng)
    with pytest.raises(ValueError, match="positive int"):
        make_triplets("swap-obj", 0, rng)


def test_generator_is_deterministic_and_covers_templates():
    a = make_triplets("replace-rel", 200, np.random.default_rng(5))
    b = make_triplets("replace-rel", 200, np.random.default_rng(5))
    assert a == b
    assert {t.template for t in a} == set(range(len(P2_TEMPLATES)))
    assert all(t.scene.a1 != t.scene.a2 for t in make_triplets("swap-att", 50,
                                                                np.random.default_rng(6)))


def test_bag_of_words_fails_every_swap_exactly():
    # the benchmark's construction: a swap's negative has P1's words, so a unigram TF-IDF model
    # gives cos(P1, N) = 1 >= cos(P1, P2) and never gets a swap triplet right
    rng = np.random.default_rng(3)
    for subset in ("swap-obj", "swap-att"):
        ts = make_triplets(subset, 60, rng)
        texts = [x for t in ts for x in (t.p1, t.p2, t.n)]
        X = tfidf_embed(texts, 1).reshape(len(ts), 3, -1)
        s12, s1n, s2n = (cosines(X[:, i], X[:, j]) for i, j in ((0, 1), (0, 2), (1, 2)))
        assert np.allclose(s1n, 1.0)
        assert not tot_correct(s12, s1n, s2n).any()


def test_decision_rules():
    assert tot_correct([0.9, 0.9, 0.5], [0.5, 0.9, 0.4], [0.4, 0.1, 0.6]).tolist() == \
        [True, False, False]
    assert itt_correct([0.3, 0.3], [0.3, 0.1], [0.2, 0.2]).tolist() == [True, False]
    with pytest.raises(ValueError, match="one value per triplet"):
        tot_correct([1.0, 2.0], [1.0], [1.0])
    with pytest.raises(ValueError, match="1-D"):
        itt_correct([[1.0]], [[1.0]], [[1.0]])


def test_vocabulary_validation():
    with pytest.raises(ValueError, match="at least 3 distinct nouns"):
        Vocabulary(("a", "b"), {"c": ("x", "y")}, ("left of", "above"))
    with pytest.raises(ValueError, match="unknown relations"):
        Vocabulary(("a", "b", "c"), {"c": ("x", "y")}, ("near",))
    with pytest.raises(ValueError, match="themselves vocabulary words"):
        Vocabulary(("a", "b", "c"), {"c": ("x", "y")}, ("left of", "above"), {"a": "b"})
    s = random_scene(np.random.default_rng(0), SHAPES_VOCAB, distinct_attributes=True)
    assert s.o1 in SHAPES_VOCAB.objects and s.a1 != s.a2
