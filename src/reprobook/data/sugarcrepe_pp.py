r"""A loader for the real SugarCrepe++ benchmark files (Dumpala et al., NeurIPS 2024 Datasets and
Benchmarks), for readers who have them on disk.

The benchmark is released as one JSON file per subset (``swap_obj.json``, ``swap_att.json``,
``replace_obj.json``, ``replace_att.json``, ``replace_rel.json``; CC BY 4.0, from the authors'
repository or the Hugging Face hub). Each file is a list of items

.. code-block:: json

    {"id": 0, "filename": "000000460347.jpg", "caption": "...", "caption2": "...",
     "negative_caption": "..."}

where ``caption`` and ``caption2`` describe the COCO val2017 image ``filename`` in different words
(the two positives :math:`P_1, P_2`) and ``negative_caption`` changes its meaning while staying
lexically close to ``caption`` (the hard negative :math:`N`). The files cannot be fetched at run
time here, so the book never downloads them; :func:`load_sugarcrepe_pp` reads a folder of them, and
the triplets it returns feed the same text-only rule
(:func:`reprobook.data.caption_triplets.tot_correct`) as the chapter's generated triplets.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from .caption_triplets import SUBSETS

__all__ = ["SUBSET_FILES", "RealTriplet", "load_sugarcrepe_pp"]

#: The book's subset names (those of :mod:`~reprobook.data.caption_triplets`) -> the released files.
SUBSET_FILES = {s: s.replace("-", "_") + ".json" for s in SUBSETS}

_FIELDS = ("caption", "caption2", "negative_caption")


@dataclass(frozen=True)
class RealTriplet:
    """One benchmark item: its subset, id, COCO image file and captions ``p1``, ``p2``, ``n``."""

    subset: str
    id: int
    image: str
    p1: str
    p2: str
    n: str


def _item(path: Path, subset: str, i: int, raw) -> RealTriplet:
    if not isinstance(raw, dict):
        raise ValueError(f"{path}: item {i} is a {type(raw).__name__}, not an object with "
                         f"fields {', '.join(_FIELDS)}")
    missing = [f for f in _FIELDS if not isinstance(raw.get(f), str) or not raw[f].strip()]
    if missing:
        raise ValueError(f"{path}: item {i} (id {raw.get('id', '?')}) lacks a non-empty "
                         f"{', '.join(missing)}")
    return RealTriplet(subset=subset, id=int(raw.get("id", i)), image=str(raw.get("filename", "")),
                       p1=" ".join(raw["caption"].split()), p2=" ".join(raw["caption2"].split()),
                       n=" ".join(raw["negative_caption"].split()))


def load_sugarcrepe_pp(root: str | Path, subsets=SUBSETS,
                       limit: int | None = None) -> dict[str, list[RealTriplet]]:
    """Read the benchmark's JSON files from the folder ``root``: ``{subset: [RealTriplet, ...]}``
    for the ``subsets`` asked (the book's names, e.g. ``"swap-att"``), at most ``limit`` items each
    (the first ones, in file order). Whitespace inside captions is normalised (some end in a
    newline)."""
    root = Path(root)
    if not root.is_dir():
        raise FileNotFoundError(f"no SugarCrepe++ folder at {root} (it should hold "
                                f"{', '.join(SUBSET_FILES.values())})")
    if isinstance(subsets, str):
        subsets = (subsets,)
    unknown = [s for s in subsets if s not in SUBSET_FILES]
    if unknown:
        raise ValueError(f"unknown SugarCrepe++ subset {unknown[0]!r}; known: {', '.join(SUBSETS)}")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise ValueError(f"limit must be a positive int or None, got {limit!r}")
    out = {}
    for s in subsets:
        path = root / SUBSET_FILES[s]
        if not path.is_file():
            raise FileNotFoundError(f"{root} has no {SUBSET_FILES[s]} (subset {s!r})")
        try:
            items = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as e:
            raise ValueError(f"{path} is not valid JSON: {e}") from None
        if not isinstance(items, list):
            raise ValueError(f"{path} must hold a list of items, got a {type(items).__name__}")
        out[s] = [_item(path, s, i, raw) for i, raw in enumerate(items[:limit])]
    return out
