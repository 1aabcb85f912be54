"""Plotly figures with one look, that render in the built book with no network.

:func:`show` emits a display bundle with two representations of the same figure:

* ``application/vnd.plotly.v1+json`` for JupyterLab's plotly renderer in a live kernel;
* ``text/html``: a ``<div>`` with a stable id and a call to ``Plotly.newPlot``. The book loads
  plotly.js once per page from its own static folder (copied out of the installed plotly
  package at build time), so there is no CDN and no require.js. The id comes from the figure's
  name, so re-running a chapter produces byte-identical output.
"""
from __future__ import annotations

import html
import json
import re

import plotly.graph_objects as go
import plotly.io as pio

__all__ = ["figure_bundle", "show", "apply_style", "slider_figure", "COLORS", "TEMPLATE"]

#: The book's palette (colour-blind safe, Okabe-Ito order): method first, baselines after.
COLORS = ["#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#F0E442",
          "#000000"]

TEMPLATE = go.layout.Template(
    layout=dict(
        font=dict(family="Inter, Helvetica, Arial, sans-serif", size=13, color="#222"),
        colorway=COLORS, paper_bgcolor="white", plot_bgcolor="white",
        xaxis=dict(showgrid=True, gridcolor="#eee", zeroline=False, linecolor="#888",
                   ticks="outside"),
        yaxis=dict(showgrid=True, gridcolor="#eee", zeroline=False, linecolor="#888",
                   ticks="outside"),
        legend=dict(bgcolor="rgba(255,255,255,0.8)"),
        margin=dict(l=60, r=20, t=60, b=50), hovermode="closest",
    )
)
pio.templates["reprobook"] = TEMPLATE

_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_-]*$")


def apply_style(fig: go.Figure, height: int | None = None) -> go.Figure:
    """Apply the book's template (in place) and return the figure."""
    fig.update_layout(template="reprobook")
    if height:
        fig.update_layout(height=height)
    return fig


def _html(fig: go.Figure, div_id: str) -> str:
    spec = json.loads(pio.to_json(fig, validate=False, engine="json"))
    payload = json.dumps({"data": spec.get("data", []), "layout": spec.get("layout", {}),
                          "config": {"responsive": True, "displaylogo": False}},
                         sort_keys=True, separators=(",", ":"))
    payload = payload.replace("</", "<\\/")  # a string in the figure must not close the script
    height = spec.get("layout", {}).get("height") or 450
    return (f'<div id="{div_id}" class="rb-plotly" style="width:100%;height:{int(height)}px;">'
            f"</div>\n<script type=\"text/javascript\">(function(){{var s={payload};"
            f"var draw=function(){{var el=document.getElementById({json.dumps(div_id)});"
            "if(!el){return;}if(!window.Plotly){el.innerHTML='<p><em>This figure needs plotly.js"
            ", which this page did not load.</em></p>';return;}"
            "window.Plotly.newPlot(el,s.data,s.layout,s.config);};"
            "if(document.readyState==='loading'){document.addEventListener('DOMContentLoaded',"
            "draw);}else{draw();}})();</script>")


def figure_bundle(fig: go.Figure, name: str, height: int | None = None) -> dict:
    """The MIME bundle :func:`show` displays: plotly JSON for Jupyter, an offline HTML div for the
    book (``id="rb-fig-<name>"``) and a one-line text form."""
    if not isinstance(fig, go.Figure):
        raise TypeError(f"show() needs a plotly.graph_objects.Figure, got {type(fig).__name__}")
    if not isinstance(name, str) or not _NAME.match(name):
        raise ValueError(f"figure name {name!r} must start with a letter and use only letters, "
                         "digits, '-' and '_' (it becomes the HTML id)")
    apply_style(fig, height)
    return {"application/vnd.plotly.v1+json": json.loads(pio.to_json(fig, validate=False)),
            "text/html": _html(fig, f"rb-fig-{name}"),
            "text/plain": f"<Figure {html.escape(name)}: {len(fig.data)} traces>"}


def show(fig: go.Figure, name: str, height: int | None = None):
    """Display a figure in the notebook and in the built book; ``name`` must be unique per chapter.

    Returns ``None`` so a trailing ``show(...)`` in a cell prints nothing else.
    """
    from IPython.display import display

    display(figure_bundle(fig, name, height), raw=True)
    return None


def slider_figure(frames: dict, slider_label: str, **layout) -> go.Figure:
    """A figure with plotly's own slider over precomputed steps: it works in a static page.

    ``frames`` maps each step's label to the list of traces shown at that step; every step must
    have the same number of traces. ``layout`` is passed to ``update_layout`` (titles, axes).
    """
    if not frames:
        raise ValueError("slider_figure needs at least one step in frames")
    labels = list(frames)
    counts = {len(frames[k]) for k in labels}
    if len(counts) != 1:
        raise ValueError(f"every step of slider_figure must have the same number of traces; "
                         f"got {sorted(counts)}")
    per = counts.pop()
    fig = go.Figure()
    for i, label in enumerate(labels):
        for tr in frames[label]:
            tr = go.Figure(data=[tr]).data[0]  # a copy, so callers may reuse trace objects
            tr.visible = i == 0
            fig.add_trace(tr)
    steps = []
    for i, label in enumerate(labels):
        visible = [False] * (per * len(labels))
        visible[i * per:(i + 1) * per] = [True] * per
        steps.append(dict(method="update", label=str(label), args=[{"visible": visible}]))
    fig.update_layout(sliders=[dict(active=0, steps=steps, pad=dict(t=50),
                                    currentvalue=dict(prefix=f"{slider_label}: "))], **layout)
    return apply_style(fig)
