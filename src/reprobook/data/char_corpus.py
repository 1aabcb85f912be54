r"""A character-level language-modelling corpus, and Python's own documentation as one.

:func:`pydoc_topics_text` returns the text of ``pydoc_data.topics`` (the help topics that ship with
every CPython, about 465k characters of English technical prose with code), so a chapter can train
a small language model with no download. Its exact content depends on the Python version;
:func:`pydoc_topics_text` also returns that version, and a chapter should say which one it ran on.

:class:`CharCorpus` turns a text into token ids over a character vocabulary and splits it for
training and evaluation:

* **vocabulary**: the distinct characters, sorted; characters seen fewer than ``min_count`` times
  map to one extra ``UNK`` id (the last id), so the vocabulary does not depend on rare symbols;
* **split by contiguous blocks**: the id sequence is cut into blocks of ``block_chars`` characters,
  and a seeded permutation assigns whole blocks to the splits (``{"train": 0.8, "val": 0.1, ...}``).
  Text is strongly autocorrelated, so splitting by single windows would leak near-copies of the
  training text into evaluation; whole blocks keep the splits apart, and shuffling the blocks
  spreads every split over all topics. The tail that does not fill a block is dropped;
* **batches** (:meth:`CorpusSplit.sample`): windows of ``seq_len + 1`` characters at uniformly random
  block and offset, never crossing a block edge (a neighbouring block may belong to another split),
  drawn from a ``torch.Generator``, so a seed fixes the whole data order;
* **evaluation** (:meth:`CorpusSplit.windows`): the split's blocks tiled by non-overlapping windows,
  deterministic, so every model is scored on exactly the same characters.

Example::

    text, version = pydoc_topics_text()
    corpus = CharCorpus.from_text(text)
    splits = corpus.split({"train": 0.8, "val": 0.1, "test": 0.1}, block_chars=2048, seed=0)
    x, y = splits["train"].sample(32, 128, torch.Generator().manual_seed(0))   # [32, 128] each
"""
from __future__ import annotations

import math
import sys
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import torch

__all__ = ["pydoc_topics_text", "CharCorpus", "CorpusSplit"]


def pydoc_topics_text() -> tuple[str, str]:
    """The concatenated help topics of ``pydoc_data.topics`` (sorted by topic name, separated by a
    blank line) and the Python version they came from (``"3.11.7"``)."""
    try:
        from pydoc_data.topics import topics
    except ImportError as e:  # pragma: no cover - every CPython ships it; some distros strip it
        raise RuntimeError("this Python has no pydoc_data.topics (some distributions remove "
                           "it); install the full standard library") from e
    text = "\n\n".join(topics[k] for k in sorted(topics))
    return text, ".".join(map(str, sys.version_info[:3]))


def _positive_int(name: str, x) -> int:
    if isinstance(x, bool) or not isinstance(x, (int, np.integer)) or x < 1:
        raise ValueError(f"{name} must be a positive int, got {x!r}")
    return int(x)


@dataclass(frozen=True)
class CorpusSplit:
    """One split of a corpus: ``blocks`` is a ``[n_blocks, block_chars]`` int64 tensor of ids,
    each row a contiguous stretch of the text."""

    name: str
    blocks: torch.Tensor

    @property
    def num_chars(self) -> int:
        return int(self.blocks.numel())

    def _check_len(self, seq_len: int) -> int:
        seq_len = _positive_int("seq_len", seq_len)
        if seq_len + 1 > self.blocks.shape[1]:
            raise ValueError(f"seq_len={seq_len} needs windows of {seq_len + 1} characters, longer "
                             f"than the blocks ({self.blocks.shape[1]}); use larger blocks")
        return seq_len

    def sample(self, batch_size: int, seq_len: int, generator: torch.Generator):
        """``(inputs, targets)``, each ``[batch_size, seq_len]`` int64: random windows inside
        random blocks, targets shifted by one character. All randomness comes from ``generator``."""
        batch_size = _positive_int("batch_size", batch_size)
        seq_len = self._check_len(seq_len)
        if not isinstance(generator, torch.Generator):
            raise TypeError("generator must be a torch.Generator (seed it for a fixed data order)")
        n_blocks, width = self.blocks.shape
        rows = torch.randint(n_blocks, (batch_size,), generator=generator)
        starts = torch.randint(width - seq_len, (batch_size,), generator=generator)
        idx = starts[:, None] + torch.arange(seq_len + 1)
        windows = self.blocks[rows[:, None], idx]
        return windows[:, :-1].contiguous(), windows[:, 1:].contiguous()

    def windows(self, seq_len: int, max_windows: int | None = None):
        """``(inputs, targets)`` tiling every block with non-overlapping windows of ``seq_len``
        (targets shifted by one), in block order; the first ``max_windows`` if given.
        Deterministic: the evaluation set every model of a chapter is scored on."""
        seq_len = self._check_len(seq_len)
        n_blocks, width = self.blocks.shape
        per_block = (width - 1) // seq_len
        starts = torch.arange(per_block) * seq_len
        idx = starts[:, None] + torch.arange(seq_len + 1)                  # [per_block, L+1]
        windows = self.blocks[:, idx].reshape(-1, seq_len + 1)             # block-major order
        if max_windows is not None:
            windows = windows[:_positive_int("max_windows", max_windows)]
        return windows[:, :-1].contiguous(), windows[:, 1:].contiguous()


@dataclass(frozen=True)
class CharCorpus:
    """A text as character ids (see the module docstring).

    ``vocab`` lists the characters by id; with ``unk`` set, the last id stands for every character
    rarer than ``min_count``. ``ids`` is the whole text as an int64 tensor.
    """

    vocab: tuple[str, ...]
    ids: torch.Tensor
    unk: bool = False

    @classmethod
    def from_text(cls, text: str, min_count: int = 1) -> "CharCorpus":
        if not isinstance(text, str) or len(text) < 2:
            raise ValueError("text must be a string of at least two characters")
        min_count = _positive_int("min_count", min_count)
        codes = np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)   # one code point each
        uniq, inverse, counts = np.unique(codes, return_inverse=True, return_counts=True)
        keep = counts >= min_count
        chars = [chr(int(c)) for c in uniq[keep]]                          # sorted by code point
        unk = not bool(keep.all())
        new_id = np.where(keep, np.cumsum(keep) - 1, len(chars))          # rare -> UNK = last id
        ids = torch.from_numpy(new_id[inverse].astype(np.int64))
        return cls(vocab=tuple(chars), ids=ids, unk=unk)

    @property
    def vocab_size(self) -> int:
        return len(self.vocab) + int(self.unk)

    def __len__(self) -> int:
        return int(self.ids.numel())

    def encode(self, s: str) -> torch.Tensor:
        """Ids of ``s``; an unknown character is an error unless the corpus has an ``UNK`` id."""
        lookup = {c: i for i, c in enumerate(self.vocab)}
        out = []
        for c in s:
            if c in lookup:
                out.append(lookup[c])
            elif self.unk:
                out.append(len(self.vocab))
            else:
                raise ValueError(f"character {c!r} is not in the vocabulary (build the corpus "
                                 "with min_count > 1 to map rare characters to UNK)")
        return torch.tensor(out, dtype=torch.int64)

    def decode(self, ids) -> str:
        """The text of a 1-D sequence of ids (``UNK`` shows as U+FFFD)."""
        ids = torch.as_tensor(ids)
        if ids.ndim != 1:
            raise ValueError(f"decode takes a 1-D sequence of ids, got shape {tuple(ids.shape)}")
        chars = list(self.vocab) + (["\ufffd"] if self.unk else [])
        bad = [int(i) for i in ids if not 0 <= int(i) < len(chars)]
        if bad:
            raise ValueError(f"ids out of range 0..{len(chars) - 1}: {bad[:5]}")
        return "".join(chars[int(i)] for i in ids)

    def split(self, fractions: Mapping[str, float], block_chars: int = 2048,
              seed: int = 0) -> dict[str, CorpusSplit]:
        """Assign whole blocks of ``block_chars`` characters to named splits.

        ``fractions`` maps split names to shares that sum to 1; split ``i`` gets
        ``round(share * n_blocks)`` blocks (the last split takes the rest), chosen by a
        permutation seeded with ``seed``. Every split gets at least one block.
        """
        if not isinstance(fractions, Mapping) or not fractions:
            raise ValueError("fractions must be a non-empty mapping of split name -> share")
        shares = {str(k): float(v) for k, v in fractions.items()}
        if any(not (v > 0) for v in shares.values()) or not math.isclose(sum(shares.values()), 1.0,
                                                                          abs_tol=1e-9):
            raise ValueError(f"split shares must be positive and sum to 1, got {shares}")
        block_chars = _positive_int("block_chars", block_chars)
        n_blocks = len(self) // block_chars
        if n_blocks < len(shares):
            raise ValueError(f"{len(self)} characters make only {n_blocks} blocks of "
                             f"{block_chars}; need at least one per split ({len(shares)})")
        blocks = self.ids[: n_blocks * block_chars].reshape(n_blocks, block_chars)
        order = torch.randperm(n_blocks, generator=torch.Generator().manual_seed(int(seed)))
        out, start = {}, 0
        names = list(shares)
        for i, name in enumerate(names):
            remaining = len(names) - i - 1
            if remaining == 0:
                count = n_blocks - start
            else:
                count = max(1, round(shares[name] * n_blocks))
                count = min(count, n_blocks - start - remaining)
            rows = order[start:start + count].sort().values       # keep text order within a split
            out[name] = CorpusSplit(name, blocks[rows].contiguous())
            start += count
        return out
