r"""Reference sentence encoders for caption-triplet benchmarks: lexical, random and an oracle.

Each maps a list of texts to unit vectors, so every encoder is judged by the same cosine and the
same decision rule as a neural sentence encoder:

* :func:`tfidf_embed`: TF-IDF vectors (scikit-learn's ``TfidfVectorizer``, fitted on the texts
  given: the whole benchmark, as the reproduction notes ask), with unigrams or uni+bigrams. A pure
  bag-of-words (or bag-of-bigrams) model: the lexical extreme. With unigrams, two captions with
  the same words in another order have cosine exactly 1.
* :func:`random_embed`: an independent Gaussian vector per *distinct* text (the same text always
  gets the same vector), normalised: the chance level of any similarity rule (for the TOT rule, a
  triplet is right with probability 1/3: it needs the largest of three exchangeable cosines to
  be :math:`\cos(P_1, P_2)`).
* :func:`oracle_embed`: a one-hot vector of the *meaning* a caption expresses, read back by a
  parser (:func:`reprobook.data.caption_triplets.parse`): cosine 1 between equivalent captions,
  0 otherwise. A model with no room for improvement, for controls.
"""
from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence

import numpy as np

# the one check of a batch of strings, shared with the MiniLM encoder these baselines stand beside
from .minilm import _texts

__all__ = ["tfidf_embed", "random_embed", "oracle_embed", "cosines"]


def tfidf_embed(texts: Sequence[str], ngrams: int = 1) -> np.ndarray:
    """L2-normalised TF-IDF rows ``[len(texts), vocabulary]`` (dense float64), word n-grams of
    length 1..``ngrams``; every word counts (the default token pattern would drop "a")."""
    from sklearn.feature_extraction.text import TfidfVectorizer

    if ngrams not in (1, 2, 3):
        raise ValueError(f"ngrams must be 1, 2 or 3, got {ngrams!r}")
    vec = TfidfVectorizer(ngram_range=(1, ngrams), token_pattern=r"(?u)\b\w[\w-]*\b",
                          lowercase=True, norm="l2")
    return vec.fit_transform(_texts(texts)).toarray()


def random_embed(texts: Sequence[str], dim: int = 384, seed: int = 0) -> np.ndarray:
    """A fixed random unit vector per distinct text (seeded by the text and ``seed``)."""
    if isinstance(dim, bool) or not isinstance(dim, int) or dim < 2:
        raise ValueError(f"dim must be an int >= 2, got {dim!r}")
    out = np.empty((len(_texts(texts)), dim))
    for i, t in enumerate(texts):
        h = int.from_bytes(hashlib.sha256(t.encode()).digest()[:8], "little")
        x = np.random.default_rng(np.random.SeedSequence([int(seed), h])).standard_normal(dim)
        out[i] = x / np.linalg.norm(x)
    return out


def oracle_embed(texts: Sequence[str], read_meaning: Callable[[str], object]) -> np.ndarray:
    """One-hot rows over the distinct meanings ``read_meaning(text)`` of the texts."""
    keys = [read_meaning(t) for t in _texts(texts)]
    index = {k: i for i, k in enumerate(dict.fromkeys(keys))}
    out = np.zeros((len(keys), len(index)))
    out[np.arange(len(keys)), [index[k] for k in keys]] = 1.0
    return out


def cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise cosine of two ``[n, d]`` arrays (rows need not be normalised; a zero row gives 0)."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.shape != b.shape or a.ndim != 2:
        raise ValueError(f"cosines() needs two [n, d] arrays of one shape, got {a.shape}, {b.shape}")
    na, nb = np.linalg.norm(a, axis=1), np.linalg.norm(b, axis=1)
    den = na * nb
    return np.where(den > 0, (a * b).sum(1) / np.where(den > 0, den, 1.0), 0.0)
