import json

import plotly.graph_objects as go
import pytest

from reprobook.plotting import _html, show, slider_figure
from reprobook.widgets import explore, is_static


def fig():
    return go.Figure(go.Scatter(x=[1, 2], y=[3, 4], name="a</script>"))


def test_html_is_stable_offline_and_escaped():
    a, b = _html(fig(), "rb-fig-x"), _html(fig(), "rb-fig-x")
    assert a == b
    assert 'id="rb-fig-x"' in a and "window.Plotly.newPlot" in a
    assert "cdn" not in a.lower() and "require" not in a
    assert "a</script>" not in a  # cannot close the script tag early


def test_show_emits_html_and_plotly_json(monkeypatch):
    shown = []
    monkeypatch.setattr("IPython.display.display", lambda obj, raw=False: shown.append(obj))
    assert show(fig(), "demo") is None
    bundle = shown[0]
    assert set(bundle) == {"application/vnd.plotly.v1+json", "text/html", "text/plain"}
    assert json.dumps(bundle["application/vnd.plotly.v1+json"])
    with pytest.raises(ValueError, match="figure name"):
        show(fig(), "bad name!")
    with pytest.raises(TypeError, match="Figure"):
        show({"data": []}, "x")


def test_slider_figure_toggles_visibility():
    frames = {f"k={k}": [go.Scatter(y=[k, k]), go.Bar(y=[k])] for k in (1, 2, 3)}
    f = slider_figure(frames, "k", title="t")
    assert len(f.data) == 6 and [t.visible for t in f.data] == [True, True] + [False] * 4
    steps = f.layout.sliders[0].steps
    assert [s.label for s in steps] == ["k=1", "k=2", "k=3"]
    assert steps[2].args[0]["visible"] == [False] * 4 + [True, True]
    with pytest.raises(ValueError, match="same number of traces"):
        slider_figure({"a": [go.Scatter()], "b": []}, "x")
    with pytest.raises(ValueError):
        slider_figure({}, "x")


def test_explore_static_note_and_live_widget(monkeypatch):
    shown = []
    monkeypatch.setattr("IPython.display.display", lambda obj, **k: shown.append(obj))

    def draw(k=1, log=False):
        return fig()

    monkeypatch.setenv("REPROBOOK_STATIC", "1")
    assert is_static() and explore(draw, k=(1, 5, 1)) is None
    assert "open this chapter in Jupyter" in shown[-1].data
    monkeypatch.setenv("REPROBOOK_STATIC", "0")
    assert explore(draw, k=(1, 5, 1), log=False) is None
    assert len(shown[-1].children) == 4  # the figure, two controls and the status line
    with pytest.raises(TypeError, match="no parameter"):
        explore(draw, q=(1, 2))


def test_explore_redraws_the_figure_widget_and_reports_errors(monkeypatch):
    """Live controls replace the traces of a plotly FigureWidget (no Output widget, which can hang a
    notebook executed by papermill), and a failing redraw is reported beside the controls."""
    shown = []
    monkeypatch.setattr("IPython.display.display", lambda obj, **k: shown.append(obj))
    monkeypatch.setenv("REPROBOOK_STATIC", "0")

    def draw(k=2, log=False):
        if k == 5:
            raise ValueError("k=5 is not allowed")
        fig = go.Figure(go.Scatter(x=[0, 1], y=[0, k]))
        if log:
            fig.add_trace(go.Bar(y=[k]))
        return fig

    explore(draw, name="demo", k=(1, 5, 1), log=False)
    (ui,) = shown
    figure, slider, checkbox, status = ui.children
    assert isinstance(figure, go.FigureWidget) and figure.data[0].y == (0, 2)  # the default k
    slider.value = 3
    assert figure.data[0].y == (0, 3) and figure.layout.template.layout.colorway  # styled
    slider.value = 5
    assert figure.data[0].y == (0, 3) and "k=5 is not allowed" in status.value
    checkbox.value = True
    assert figure.data[0].y == (0, 3)  # k is still 5: still failing, still reported
    slider.value = 4
    assert [t.type for t in figure.data] == ["scatter", "bar"] and status.value == ""
    with pytest.raises(ValueError, match="figure name"):
        explore(draw, name="bad name", k=(1, 5, 1))
