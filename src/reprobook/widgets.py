"""ipywidgets explorers for a live kernel; a short note in the static book instead.

A static page has no kernel, so widget callbacks cannot run there; the book shows plotly's own
sliders over a precomputed sweep (:func:`reprobook.plotting.slider_figure`) instead, and the runner
(which sets ``REPROBOOK_STATIC=1``) gets a note in place of the controls.
"""
from __future__ import annotations

import os

__all__ = ["explore", "is_static"]


def is_static() -> bool:
    """True when the notebook is executed for the book (by the runner) rather than by a person."""
    return os.environ.get("REPROBOOK_STATIC", "") not in ("", "0")


def explore(fn, name: str = "explore", **controls):
    """Interactive controls that redraw ``fn(**values)`` (a plotly figure) when they change.

    ``controls`` are what :func:`ipywidgets.interactive` takes: widgets, ``(min, max, step)``
    tuples, lists of options, booleans. Unknown keyword names are an error of ``fn``'s signature.
    """
    import inspect

    params = inspect.signature(fn).parameters
    unknown = [k for k in controls if k not in params]
    if unknown:
        raise TypeError(f"explore(): {fn.__name__}() has no parameter(s) {', '.join(unknown)}")
    from IPython.display import Markdown, display

    if is_static():
        display(Markdown("*Live explorer: open this chapter in Jupyter to move the controls "
                         f"({', '.join(controls)}). The static figures above show a precomputed "
                         "sweep.*"))
        return None
    import ipywidgets as widgets

    from .plotting import show

    def draw(**values):
        show(fn(**values), name)

    ui = widgets.interactive(draw, **controls)
    display(ui)
    return ui
