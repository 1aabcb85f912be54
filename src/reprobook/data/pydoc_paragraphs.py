r"""English prose paragraphs from Python's own help topics, for sentence encoders.

``pydoc_data.topics`` ships with every CPython (see :mod:`reprobook.data.char_corpus`). Its topics
mix prose with code listings and grammar rules; :func:`pydoc_paragraphs` keeps the prose: blocks
separated by blank lines that are not indented (indented blocks are code or grammar), have at least
``min_words`` words and consist mostly of letters. Whitespace is collapsed, so a paragraph is one
line. The list is deterministic (topics in sorted order, duplicates dropped) for one Python version.

:func:`split_halves` cuts a paragraph at its middle word, the pair used for a retrieval check: a
good encoder maps the first half of a paragraph closer to its own second half than to the second
half of any other paragraph.
"""
from __future__ import annotations

import re

import numpy as np

__all__ = ["pydoc_paragraphs", "split_halves", "draw_disjoint"]


def pydoc_paragraphs(min_words: int = 40, min_letter_share: float = 0.7) -> list[str]:
    """Prose paragraphs of ``pydoc_data.topics`` (see the module docstring)."""
    if isinstance(min_words, bool) or not isinstance(min_words, int) or min_words < 2:
        raise ValueError(f"min_words must be an int >= 2, got {min_words!r}")
    if not 0 <= min_letter_share <= 1:
        raise ValueError(f"min_letter_share must be in [0, 1], got {min_letter_share!r}")
    try:
        from pydoc_data.topics import topics
    except ImportError as e:  # pragma: no cover - every CPython ships it; some distros strip it
        raise RuntimeError("this Python has no pydoc_data.topics; install the full standard "
                           "library") from e
    out, seen = [], set()
    for key in sorted(topics):
        for block in re.split(r"\n\s*\n", topics[key]):
            if not block.strip() or block[:1].isspace():
                continue                                   # indented: code or grammar
            words = block.split()
            text = " ".join(words)
            if len(words) < min_words or text in seen:
                continue
            if sum(c.isalpha() for c in text) / len(text) < min_letter_share:
                continue
            seen.add(text)
            out.append(text)
    return out


def split_halves(paragraph: str) -> tuple[str, str]:
    """The first and second half of a paragraph, cut at the middle word."""
    words = str(paragraph).split()
    if len(words) < 2:
        raise ValueError("a paragraph needs at least two words to be split in halves")
    mid = len(words) // 2
    return " ".join(words[:mid]), " ".join(words[mid:])


def draw_disjoint(n_items: int, sizes: dict[str, int], rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Disjoint random index sets of the given sizes from ``range(n_items)`` (one permutation)."""
    total = sum(int(v) for v in sizes.values())
    if any(int(v) < 0 for v in sizes.values()):
        raise ValueError(f"sizes must be non-negative, got {sizes}")
    if total > n_items:
        raise ValueError(f"asked for {total} items in all but only {n_items} exist")
    perm = rng.permutation(n_items)
    out, start = {}, 0
    for name, size in sizes.items():
        out[name] = np.sort(perm[start:start + int(size)])
        start += int(size)
    return out
