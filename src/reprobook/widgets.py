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

    The figure is a plotly ``FigureWidget`` whose traces and layout are replaced on each change,
    so the redraw travels over the widget's own channel and every frontend (JupyterLab, Notebook,
    VS Code) shows it. Two alternatives fail in practice: ``ipywidgets.interactive`` draws into an
    Output widget, and a notebook executed without a frontend (papermill) can then wait forever for
    the cell to finish; replacing a display through its display id from a widget callback is
    ignored by JupyterLab, which routes display updates only to the cell that asked for them.
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
    import plotly.graph_objects as go

    from .plotting import apply_style, figure_bundle

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

    def draw() -> go.Figure:
        fig = fn(**values())
        figure_bundle(fig, name)  # the same checks (a Figure, a valid name) as a static figure
        return apply_style(fig)

    figure = go.FigureWidget(draw())

    def redraw(_change=None):
        try:
            new = draw()
        except Exception as exc:  # a bad setting must not kill the controls; say what failed
            status.value = f"<b>{type(exc).__name__}</b>: {exc}"
            return
        status.value = ""
        with figure.batch_update():
            figure.layout = new.layout
        figure.data = []
        figure.add_traces(list(new.data))

    for w in inputs.values():
        w.observe(redraw, names="value")
    display(widgets.VBox([figure, *inputs.values(), status]))
    return None
