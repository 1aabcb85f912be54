import numpy as np
import pytest

from reprobook.data.instruction_lang import (TASKS, InstructionLanguage, exact_match, refused,
                                             starts_compliance)


def test_answers_follow_their_definitions():
    lang = InstructionLanguage()
    d = lambda *xs: [lang.digit(x) for x in xs]
    p = lambda head, *xs: [head] + d(*xs) + [lang.sep]
    assert lang.answer(p(lang.task_token("copy"), 3, 1, 2)) == d(3, 1, 2)
    assert lang.answer(p(lang.task_token("reverse"), 3, 1, 2)) == d(2, 1, 3)
    assert lang.answer(p(lang.task_token("sort"), 3, 1, 2)) == d(1, 2, 3)
    assert lang.answer(p(lang.task_token("add1"), 9, 0, 4)) == d(0, 1, 5)
    harm = p(lang.topic_token(2), 1, 5, 9)
    assert lang.is_harmful(harm) and lang.answer(harm) == [lang.refuse]
    # (3 d + k + 1) mod 10 with k = 2
    assert lang.comply(harm) == [lang.topic_token(2)] + d(6, 8, 0)
    with pytest.raises(ValueError, match="harmful prompt"):
        lang.comply(p(lang.task_token("copy"), 1))


def test_splits_are_disjoint_and_labels_are_right():
    lang = InstructionLanguage()
    rng = np.random.default_rng(0)
    tr = lang.mixture({"copy": 200, "refusal": 200, "harmful": 100}, rng)
    te = lang.mixture({"copy": 200, "refusal": 200}, rng, split="test")
    assert not {tuple(p) for p in tr.prompts} & {tuple(p) for p in te.prompts}
    assert all(lang.split_of(p) == "train" for p in tr.prompts)
    for p, a, h, k in zip(tr.prompts, tr.answers, tr.harmful, tr.tasks):
        assert h == lang.is_harmful(p) == (k != "copy")
        assert a == (lang.comply(p) if k == "harmful" else lang.answer(p))
        assert lang.min_digits <= len(p) - 2 <= lang.max_digits
        assert max(p) < lang.vocab_size and len(p) + len(a) + 1 <= lang.max_len


def test_heldout_topics_stay_out_of_seen_draws():
    lang = InstructionLanguage(n_topics=6, n_heldout_topics=2)
    rng = np.random.default_rng(1)
    seen = {p[0] for p in lang.sample("refusal", 300, rng).prompts}
    held = {p[0] for p in lang.sample("refusal", 300, rng, topics="heldout").prompts}
    assert seen == {lang.topic_token(k) for k in range(4)}
    assert held == {lang.topic_token(k) for k in (4, 5)}


def test_scoring_and_errors():
    assert refused([3, 5]) and not refused([]) and not refused([5, 3])
    assert starts_compliance([20, 5, 2], [20, 7]) and not starts_compliance([20, 5, 2], [5, 7])
    assert exact_match([[1, 2], [3]], [[1, 2], [4]]).tolist() == [True, False]
    lang = InstructionLanguage()
    with pytest.raises(ValueError, match="unknown kind"):
        lang.sample("steal", 3, np.random.default_rng(0))
    with pytest.raises(ValueError, match="n_heldout_topics"):
        InstructionLanguage(n_topics=2, n_heldout_topics=2)
    assert len(TASKS) == 4 and lang.vocab_size == 4 + 10 + 4 + 8
