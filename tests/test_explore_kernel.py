"""explore() in a real kernel, driven over the Jupyter protocol the way a frontend drives it.

Moving a control sends a comm ``update`` to the kernel; the figure must come back as an
``update_display_data`` message for the display id of the first drawing. This is what JupyterLab
and the classic notebook act on, and it needs no Output widget.
"""
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
    return go.Figure(go.Scatter(x=[0, 1], y=[0, k]))

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


def test_moving_a_control_updates_the_figure_in_place():
    km, kc = start_new_kernel(kernel_name="python3")
    try:
        msg_id = kc.execute(CELL)
        msgs = _drain(kc, lambda m: m["msg_type"] == "status"
                      and m["parent_header"].get("msg_id") == msg_id
                      and m["content"]["execution_state"] == "idle")
        first = [m for m in msgs if m["msg_type"] == "display_data"
                 and "application/vnd.plotly.v1+json" in m["content"]["data"]]
        assert len(first) == 1
        display_id = first[0]["content"]["transient"]["display_id"]
        sliders = [m for m in msgs if m["msg_type"] == "comm_open"
                   and m["content"]["data"]["state"].get("_model_name") == "IntSliderModel"]
        assert len(sliders) == 1
        assert first[0]["content"]["data"]["application/vnd.plotly.v1+json"]["data"][0]["y"] == [0, 2]
        comm_id = sliders[0]["content"]["comm_id"]

        # what a frontend sends when the user drags the slider to 4
        msg = kc.session.msg("comm_msg", {"comm_id": comm_id, "data": {
            "method": "update", "state": {"value": 4}, "buffer_paths": []}})
        kc.shell_channel.send(msg)
        got = _drain(kc, lambda m: m["msg_type"] == "update_display_data")
        upd = got[-1]["content"]
        assert upd["transient"]["display_id"] == display_id
        assert upd["data"]["application/vnd.plotly.v1+json"]["data"][0]["y"] == [0, 4]
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
