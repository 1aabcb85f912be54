"""The catalog of the book's 76 papers and eight parts (``catalog.yml``)."""
from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

import yaml

__all__ = ["Paper", "Part", "papers", "parts", "paper_by_slug"]


@dataclass(frozen=True)
class Paper:
    number: int
    slug: str
    part: str
    tier: str
    title: str


@dataclass(frozen=True)
class Part:
    id: str
    title: str


@functools.lru_cache(maxsize=1)
def _load() -> dict:
    return yaml.safe_load((Path(__file__).parent / "catalog.yml").read_text())


def papers() -> list[Paper]:
    return [Paper(**p) for p in _load()["papers"]]


def parts() -> list[Part]:
    return [Part(**p) for p in _load()["parts"]]


def paper_by_slug(slug: str) -> Paper:
    for p in papers():
        if p.slug == slug:
            return p
    raise KeyError(f"no paper with slug {slug!r} in the catalog")
