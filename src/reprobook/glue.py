"""Numbers a run produced, glued into the chapter's prose (myst-nb's ``glue``).

``glue("ratio", r)`` stores ``r`` in the cell's output without showing it; the markdown then says
``{glue:text}`ratio:.3f``` and the built book prints the run's own number. The ledger glues every
claim and control itself (``<claim>.value``, ``.low``, ``.high``, ``.n``, ``.verdict`` and
``<claim>.<control>.value``...), so prose never types a number a run produced.

Outside a Jupyter kernel (a plain script, a unit test) gluing does nothing.

The output is exactly what ``myst_nb.glue(name, value, display=False)`` writes (the value's display
bundle under ``application/papermill.record/`` MIME types, with ``scrapbook`` metadata naming it),
made here rather than by importing myst-nb, whose glue module pulls in Sphinx: seconds that the
ledger would count as the chapter's compute.
"""
from __future__ import annotations

from typing import Any

__all__ = ["glue", "PREFIX"]

#: The MIME prefix under which myst-nb finds glued values (the one its own ``glue`` uses).
PREFIX = "application/papermill.record/"


def _in_kernel() -> bool:
    try:
        from IPython import get_ipython
    except ImportError:  # pragma: no cover - IPython comes with ipykernel
        return False
    shell = get_ipython()
    return shell is not None and getattr(shell, "kernel", None) is not None


def _plain(value: Any) -> Any:
    """A numpy or torch scalar as a Python number, so format specs like ``:.3f`` apply."""
    if hasattr(value, "item") and getattr(value, "ndim", 0) == 0:
        value = value.item()
    return value  # inf and nan stay floats: their text "inf" still takes a float format spec


def glue(name: str, value: Any) -> None:
    """Glue ``value`` under ``name`` for the prose (not displayed in the cell)."""
    if not isinstance(name, str) or not name or ":" in name or "`" in name:
        raise ValueError(f"glue name {name!r} must be a non-empty string without ':' or '`'")
    if not _in_kernel():
        return
    from IPython.core.formatters import format_display_data
    from IPython.display import display

    bundle, metadata = format_display_data(_plain(value))
    metadata = {**metadata, "scrapbook": {"name": name, "mime_prefix": PREFIX}}
    display({PREFIX + mime: data for mime, data in bundle.items()}, raw=True, metadata=metadata)
