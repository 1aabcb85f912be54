"""A Sphinx extension that keeps the book's pages offline.

Jupyter Book 1.x always loads sphinx-thebe, whose inline configuration ends up twice on a page
(a JavaScript error) and points at a CDN; the book never launches live kernels from a page, so
thebe's scripts are dropped. Any other script that would still load from the network is a build
warning, which ``reprobook book`` (``-W``) turns into an error.
"""
from __future__ import annotations

from sphinx.util import logging

logger = logging.getLogger(__name__)


def _is_thebe(script) -> bool:
    name = getattr(script, "filename", None) or str(script)
    body = (getattr(script, "attributes", None) or {}).get("body", "")
    return "thebe" in str(name).lower() or "THEBE" in body


def _filter_scripts(app, pagename, templatename, context, doctree):
    scripts = context.get("script_files")
    if scripts is None:
        return
    kept = [s for s in scripts if not _is_thebe(s)]
    for s in kept:
        name = str(getattr(s, "filename", None) or "")
        if name.startswith(("http://", "https://", "//")):
            logger.warning(f"page {pagename} loads a script from the network: {name}")
    scripts[:] = kept


def setup(app):
    app.connect("html-page-context", _filter_scripts, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
