"""The chapters that exist: ``notebooks/<part>/<slug>.ipynb`` with their sidecar ``<slug>.yml``.

The sidecar is the one place that defines a chapter's ``cpu``/``gpu`` profiles, the verdicts it
expects at ``smoke`` (CI compares them) and its timeout.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from .catalog import Paper, paper_by_slug, parts
from ..claims import VERDICTS
from .profiles import PROFILES, SMOKE, ParameterError, read_parameters, resolve

__all__ = ["Chapter", "ChapterError", "book_root", "discover", "find", "select"]

DEFAULT_TIMEOUT = 900
_SIDECAR_KEYS = {"paper", "timeout", "profiles", "expected"}


class ChapterError(ValueError):
    """A chapter that cannot be found or whose sidecar is malformed."""


def book_root(start: str | os.PathLike | None = None) -> Path:
    """The book's root folder: ``$REPROBOOK_ROOT``, else the first parent with ``_toc.yml`` and
    ``notebooks/``, else the checkout this package was installed from (editable install)."""
    if os.environ.get("REPROBOOK_ROOT"):
        return Path(os.environ["REPROBOOK_ROOT"]).resolve()
    here = Path(start or Path.cwd()).resolve()
    for p in (here, *here.parents):
        if (p / "_config.yml").exists() and (p / "notebooks").is_dir():
            return p
    src_root = Path(__file__).resolve().parents[3]
    if (src_root / "notebooks").is_dir():
        return src_root
    raise ChapterError("cannot find the book (a folder with _config.yml and notebooks/); "
                       "run from inside the checkout or set REPROBOOK_ROOT")


@dataclass
class Chapter:
    slug: str
    part: str
    notebook: Path
    paper: Paper
    defaults: dict[str, Any]
    profiles: dict[str, dict] = field(default_factory=dict)
    expected: dict[str, str] = field(default_factory=dict)
    timeout: int = DEFAULT_TIMEOUT

    @property
    def id(self) -> str:
        return f"{self.part}/{self.slug}"

    @property
    def profile_names(self) -> list[str]:
        return [SMOKE, *[p for p in PROFILES[1:] if p in self.profiles]]

    def parameters_for(self, profile: str, overrides: dict | None = None) -> dict[str, Any]:
        return resolve(self.defaults, self.profiles, profile, overrides, where=self.slug)

    @classmethod
    def load(cls, notebook: Path) -> "Chapter":
        notebook = Path(notebook)
        slug, part = notebook.stem, notebook.parent.name
        sidecar = notebook.with_suffix(".yml")
        if not sidecar.exists():
            raise ChapterError(f"{notebook}: missing sidecar {sidecar.name} (profiles, expected "
                               "verdicts); see CONTRIBUTING.md")
        meta = yaml.safe_load(sidecar.read_text()) or {}
        unknown = set(meta) - _SIDECAR_KEYS
        if unknown:
            raise ChapterError(f"{sidecar}: unknown keys {sorted(unknown)}; allowed: "
                               f"{sorted(_SIDECAR_KEYS)}")
        try:
            paper = paper_by_slug(slug)
        except KeyError:
            raise ChapterError(f"{notebook}: {slug!r} is not a paper in the catalog") from None
        if paper.part != part:
            raise ChapterError(f"{notebook}: the catalog puts {slug!r} in part {paper.part!r}")
        if meta.get("paper") not in (None, paper.number):
            raise ChapterError(f"{sidecar}: paper {meta['paper']} but the catalog says "
                               f"{paper.number}")
        profiles = meta.get("profiles") or {}
        for name in profiles:
            if name not in PROFILES or name == SMOKE:
                raise ChapterError(f"{sidecar}: unknown profile {name!r}; a sidecar may define "
                                   "'cpu' and 'gpu' (smoke is the parameters cell)")
        expected = meta.get("expected") or {}
        for cid, v in expected.items():
            # a list: the verdicts a volatile (timing) claim may reach at smoke, where it depends
            # on the machine's load; the runner refuses a list for any other claim
            for one in (v if isinstance(v, list) and v else [v]):
                if one not in VERDICTS:
                    raise ChapterError(f"{sidecar}: expected verdict {one!r} for {cid!r} is not "
                                       f"one of {', '.join(VERDICTS)}")
        timeout = meta.get("timeout", DEFAULT_TIMEOUT)
        if not isinstance(timeout, int) or timeout <= 0:
            raise ChapterError(f"{sidecar}: timeout must be a positive number of seconds")
        try:
            defaults = read_parameters(notebook)
        except ParameterError as e:
            raise ChapterError(str(e)) from None
        ch = cls(slug=slug, part=part, notebook=notebook, paper=paper, defaults=defaults,
                 profiles=profiles, expected=expected, timeout=timeout)
        for name in profiles:  # a bad override in the sidecar fails here, before anything runs
            try:
                ch.parameters_for(name)
            except ParameterError as e:
                raise ChapterError(f"{sidecar}: {e}") from None
        return ch


def discover(root: str | os.PathLike | None = None) -> list[Chapter]:
    """Every chapter of the book, in catalog order of parts then paper number."""
    root = book_root(root)
    order = {p.id: i for i, p in enumerate(parts())}
    found = []
    for nb in sorted((root / "notebooks").glob("*/*.ipynb")):
        if ".ipynb_checkpoints" in nb.parts:
            continue
        found.append(Chapter.load(nb))
    return sorted(found, key=lambda c: (order.get(c.part, 99), c.paper.number))


def find(slug: str, root: str | os.PathLike | None = None) -> Chapter:
    chapters = discover(root)
    for c in chapters:
        if slug in (c.slug, c.id):
            return c
    known = ", ".join(c.slug for c in chapters) or "none"
    raise ChapterError(f"unknown chapter {slug!r}; chapters: {known}")


def select(slugs: list[str] | None = None, part: str | None = None, all_: bool = False,
           root: str | os.PathLike | None = None) -> list[Chapter]:
    """The chapters named by slugs, by a part, or all; unknown names are an error."""
    chapters = discover(root)
    if all_:
        return chapters
    if part:
        known_parts = [p.id for p in parts()]
        if part not in known_parts:
            raise ChapterError(f"unknown part {part!r}; parts: {', '.join(known_parts)}")
        return [c for c in chapters if c.part == part]
    if not slugs:
        raise ChapterError("name chapters to run, or use --part PART or --all")
    by = {**{c.slug: c for c in chapters}, **{c.id: c for c in chapters}}
    missing = [s for s in slugs if s not in by]
    if missing:
        raise ChapterError(f"unknown chapter(s) {', '.join(map(repr, missing))}; chapters: "
                           f"{', '.join(c.slug for c in chapters) or 'none'}")
    seen, out = set(), []
    for s in slugs:
        if by[s].slug not in seen:
            seen.add(by[s].slug)
            out.append(by[s])
    return out
