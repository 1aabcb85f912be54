"""reprobook.glue writes what myst-nb's own glue writes, without importing myst-nb."""
import queue
import time

import pytest
from jupyter_client.manager import start_new_kernel

from reprobook.glue import glue

pytestmark = pytest.mark.timeout(120)


def outputs(kc, code):
    msg_id = kc.execute(code)
    out, end = [], time.monotonic() + 60
    while time.monotonic() < end:
        try:
            m = kc.get_iopub_msg(timeout=1)
        except queue.Empty:
            continue
        if m["parent_header"].get("msg_id") != msg_id:
            continue
        if m["msg_type"] == "status" and m["content"]["execution_state"] == "idle":
            return out
        if m["msg_type"] in ("display_data", "error"):
            out.append(m["content"])
    raise AssertionError("the cell did not finish")


def test_the_same_output_as_myst_nb_and_no_sphinx_import():
    km, kc = start_new_kernel(kernel_name="python3")
    try:
        ours = outputs(kc, "import sys, numpy as np\nfrom reprobook import glue\n"
                           "glue('ratio', np.float64(0.8125))\nglue('verdict', 'reproduced')\n"
                           "assert 'myst_nb' not in sys.modules and 'sphinx' not in sys.modules")
        theirs = outputs(kc, "from myst_nb import glue as g\ng('ratio', 0.8125, display=False)\n"
                             "g('verdict', 'reproduced', display=False)")
        assert [o for o in ours if "ename" in o] == []
        assert ours == theirs
        assert ours[0]["data"] == {"application/papermill.record/text/plain": "0.8125"}
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def test_outside_a_kernel_gluing_does_nothing_and_names_are_checked(capsys):
    glue("x", 1.0)
    assert capsys.readouterr().out == ""
    with pytest.raises(ValueError, match="without ':'"):
        glue("a:b", 1)
