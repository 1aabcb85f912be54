r"""Data helpers of the LLM-unlearning chapter: memorised passages and answer well-formedness.

**Memorised passages** (the copyright case). :func:`passage_set` takes real English prose, the
paragraphs of Python's own help topics (:func:`reprobook.data.pydoc_paragraphs.pydoc_paragraphs`),
draws ``n`` of them with ``rng``, keeps each one's first ``prompt_words + answer_words``
whitespace-separated words, and turns it into a (prompt, answer) pair of word ids: the first
``prompt_words`` words are the prompt, the rest the continuation a model that memorised the
passage reproduces. The vocabulary is the words of the drawn passages (plus ``PAD`` and ``EOS``),
so a tiny model can memorise them verbatim, as a pretrained LLM memorises a book it saw many times.

:func:`continuation_match` scores a generated continuation against the original: the share of the
original's positions where the generated word is the same word (0 for a missing position).

**Well-formed answers** of the toy instruction language (:mod:`reprobook.data.instruction_lang`):
:func:`well_formed` says whether a generated answer is a sentence of the language at all (a
refusal, a digit string no longer than a prompt's, or a topic token followed by such digits),
whatever its correctness. It is the fluency proxy: a model whose outputs degenerate (an empty
answer, an answer that never ends, stray task or separator tokens) fails it.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .instruction_lang import _DIGIT0, REFUSE, TASKS, InstructionLanguage
from .pydoc_paragraphs import pydoc_paragraphs

__all__ = ["PassageSet", "passage_set", "continuation_match", "well_formed"]

PAD, EOS = 0, 1


@dataclass(frozen=True)
class PassageSet:
    """Word-level (prompt, continuation) pairs of real passages: ``prompts[i]``, ``answers[i]``
    (word ids), the ``vocab`` (id -> word; ids 0 and 1 are ``PAD`` and ``EOS``) and the source
    paragraph indices."""

    prompts: list[list[int]]
    answers: list[list[int]]
    vocab: list[str]
    sources: np.ndarray
    pad: int = PAD
    eos: int = EOS

    def __len__(self) -> int:
        return len(self.prompts)

    @property
    def vocab_size(self) -> int:
        return len(self.vocab)

    @property
    def max_len(self) -> int:
        return max(len(p) + len(a) + 1 for p, a in zip(self.prompts, self.answers))

    def subset(self, idx) -> PassageSet:
        idx = [int(i) for i in idx]
        return PassageSet([self.prompts[i] for i in idx], [self.answers[i] for i in idx],
                          self.vocab, self.sources[idx], self.pad, self.eos)

    def decode(self, ids: Sequence[int]) -> str:
        return " ".join(self.vocab[int(t)] for t in ids)


def passage_set(n: int, prompt_words: int, answer_words: int, rng: np.random.Generator,
                min_words: int = 40) -> PassageSet:
    """``n`` distinct pydoc paragraphs as word-level (prompt, continuation) pairs (see the module
    docstring). Paragraphs that start with the same ``prompt_words`` words as one already drawn
    are skipped, so every prompt determines its continuation."""
    for name, v in (("n", n), ("prompt_words", prompt_words), ("answer_words", answer_words)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
            raise ValueError(f"{name} must be a positive int, got {v!r}")
    if prompt_words + answer_words > min_words:
        raise ValueError(f"prompt_words + answer_words = {prompt_words + answer_words} exceeds the "
                         f"paragraphs' minimum length min_words={min_words}")
    paras = pydoc_paragraphs(min_words=min_words)
    order = rng.permutation(len(paras))
    chosen, seen = [], set()
    for i in order:
        words = paras[i].split()[:prompt_words + answer_words]
        key = tuple(words[:prompt_words])
        if key in seen:
            continue
        seen.add(key)
        chosen.append((int(i), words))
        if len(chosen) == n:
            break
    if len(chosen) < n:
        raise ValueError(f"only {len(chosen)} distinct paragraphs available, asked for {n}")
    vocab = ["PAD", "EOS"] + sorted({w for _, ws in chosen for w in ws})
    ids = {w: k for k, w in enumerate(vocab)}
    prompts = [[ids[w] for w in ws[:prompt_words]] for _, ws in chosen]
    answers = [[ids[w] for w in ws[prompt_words:]] for _, ws in chosen]
    return PassageSet(prompts, answers, vocab, np.array([i for i, _ in chosen]))


def continuation_match(generated: Sequence[int], original: Sequence[int]) -> float:
    """Share of the original continuation's positions where ``generated`` has the same token."""
    if not len(original):
        raise ValueError("the original continuation is empty")
    g = list(map(int, generated))
    return sum(1 for t, o in enumerate(original) if t < len(g) and g[t] == int(o)) / len(original)


def well_formed(lang: InstructionLanguage, answer: Sequence[int]) -> bool:
    """Whether a generated answer (EOS stripped; an answer that never produced EOS is longer than
    any sentence) is a sentence of the language: ``[REFUSE]``, 1..``max_digits`` digits, or a
    topic token followed by 1..``max_digits`` digits."""
    a = [int(t) for t in answer]
    if a == [REFUSE]:
        return True
    topic0 = _DIGIT0 + 10 + len(TASKS)
    if a and topic0 <= a[0] < topic0 + lang.n_topics:
        a = a[1:]
    return 1 <= len(a) <= lang.max_digits and all(_DIGIT0 <= t < _DIGIT0 + 10 for t in a)
