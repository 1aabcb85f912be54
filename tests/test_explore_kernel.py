"""explore() in a real kernel, driven over the Jupyter protocol the way a frontend drives it.

Moving a control sends a comm ``update`` to the kernel; the figure, a plotly ``FigureWidget``,
must come back as a comm message on its own widget carrying the new data. (A display-id update
from the callback would satisfy the protocol but JupyterLab ignores it: see test_jupyterlab.)
"""
import json
import queue
import time

import pytest
from jupyter_client.manager import start_new_kernel

pytestmark = pytest.mark.timeout(120)

CELL = """
import os
os.environ["REPROBOOK_STATIC"] = "0"
import plotly.graph_objects as go
from reprobook.widgets import explore

def draw(k=2):
    return go.Figure(go.Scatter(x=[0, 1], y=[0, 1000 + k]))

explore(draw, name="live", k=(1, 5, 1))
"""


def _drain(kc, until, timeout=30.0):
    """iopub messages until ``until(msg)`` is true (that message included)."""
    out, end = [], time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            msg = kc.get_iopub_msg(timeout=1)
        except queue.Empty:
            continue
        out.append(msg)
        if until(msg):
            return out
    raise AssertionError(f"no matching message within {timeout}s; got {[m['msg_type'] for m in out]}")


def test_moving_a_control_updates_the_figure_widget():
    km, kc = start_new_kernel(kernel_name="python3")
    try:
        msg_id = kc.execute(CELL)
        msgs = _drain(kc, lambda m: m["msg_type"] == "status"
                      and m["parent_header"].get("msg_id") == msg_id
                      and m["content"]["execution_state"] == "idle")
        assert not [m for m in msgs if m["msg_type"] == "error"], "the cell raised"
        opened = {m["content"]["comm_id"]: m for m in msgs if m["msg_type"] == "comm_open"}
        sliders = [c for c, m in opened.items()
                   if m["content"]["data"]["state"].get("_model_name") == "IntSliderModel"]
        figures = [c for c, m in opened.items() if "1002" in json.dumps(m["content"]["data"])]
        assert len(sliders) == 1 and len(figures) == 1, "one slider and one figure widget"

        # what a frontend sends when the user drags the slider to 4
        msg = kc.session.msg("comm_msg", {"comm_id": sliders[0], "data": {
            "method": "update", "state": {"value": 4}, "buffer_paths": []}})
        kc.shell_channel.send(msg)
        got = _drain(kc, lambda m: m["msg_type"] == "comm_msg"
                     and m["content"]["comm_id"] == figures[0]
                     and "1004" in json.dumps(m["content"]["data"]))
        assert got
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
