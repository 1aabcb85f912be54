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

    ``controls`` are what :func:`ipywidgets.interact` takes: widgets, ``(min, max, step)``
    tuples, lists of options, booleans. Unknown keyword names are an error of ``fn``'s signature.
    Returns ``None`` (so a cell ending in ``explore(...)`` does not show the controls twice).

    The figure is an ordinary display output that each change replaces through its display id.
    ``ipywidgets.interactive`` would draw into an Output widget instead, and a notebook executed
    without a frontend (papermill, nbclient) can then wait forever for the cell to finish.
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

    from .plotting import figure_bundle

    inputs = {}
    for key, abbrev in controls.items():
        default = params[key].default
        w = widgets.interactive.widget_from_abbrev(
            abbrev, default if default is not inspect.Parameter.empty else widgets.interaction.empty)
        if w is None:
            raise ValueError(f"explore(): cannot make a control for {key}={abbrev!r}")
        w.description = key
        inputs[key] = w
    status = widgets.HTML()

    def values():
        return {k: w.value for k, w in inputs.items()}

    handle = display(figure_bundle(fn(**values()), name), raw=True, display_id=True)

    def redraw(_change=None):
        try:
            bundle = figure_bundle(fn(**values()), name)
        except Exception as exc:  # a bad setting must not kill the controls; say what failed
            status.value = f"<b>{type(exc).__name__}</b>: {exc}"
            return
        status.value = ""
        handle.update(bundle, raw=True)

    for w in inputs.values():
        w.observe(redraw, names="value")
    display(widgets.VBox([*inputs.values(), status]))
    return None
