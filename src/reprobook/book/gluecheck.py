"""The prose of an executed chapter refers only to numbers its run glued.

A markdown cell says ``{glue:text}`key:fmt``` (or ``{glue}`key```); the key must have been glued
by some code cell of the same run (``reprobook.glue`` or the ledger). The book build catches a
missing key too, but only minutes later and for the whole book; the runner checks each chapter as
it finishes.
"""
from __future__ import annotations

import json
import re

__all__ = ["glued_keys", "referenced_keys", "missing_glue"]

_ROLE = re.compile(r"\{glue(?::[a-z]+)?\}`([^`]+)`")
_DIRECTIVE = re.compile(r"^```\{glue(?::[a-z]+)?\}\s+(\S+)", re.M)


def _source(cell) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else src


def glued_keys(nb: dict) -> set[str]:
    """The keys that the notebook's outputs glued."""
    keys = set()
    for cell in nb.get("cells", []):
        for out in cell.get("outputs", []) or []:
            name = (out.get("metadata") or {}).get("scrapbook", {}).get("name")
            if name:
                keys.add(name)
    return keys


def referenced_keys(nb: dict) -> list[str]:
    """The keys the markdown cells refer to, in order (the format spec after ':' removed)."""
    out = []
    for cell in nb.get("cells", []):
        if cell.get("cell_type") != "markdown":
            continue
        text = _source(cell)
        for m in _ROLE.finditer(text):
            out.append(m.group(1).rsplit(":", 1)[0] if ":" in m.group(1) else m.group(1))
        out += _DIRECTIVE.findall(text)
    return out


def missing_glue(notebook_text: str) -> list[str]:
    """Keys the prose refers to that no cell glued (empty when the prose is complete)."""
    nb = json.loads(notebook_text)
    have = glued_keys(nb)
    return sorted({k for k in referenced_keys(nb) if k not in have})
