"""Execute one chapter notebook with papermill, in the process that runs this module.

The runner starts ``python -m reprobook.book.execute SPEC.json`` in a fresh process per chapter (locally
or on a Dask worker), so that a crash, a hang or a leak in one chapter cannot take others down.
The spec names the input notebook, the output notebook, the parameters to inject and a per-cell
timeout; the outcome is written to ``SPEC.result.json``. The ledger goes where
``$REPROBOOK_LEDGER`` says (the chapter's ``ledger.save()`` writes it).

The executor dies with the runner that started it, and takes its kernel along: on Linux the kernel
is asked to send it SIGTERM when its parent dies (``PR_SET_PDEATHSIG``), and a watchdog thread
notices a changed parent elsewhere. A runner killed with SIGKILL therefore leaves no chapter running
and no result written behind its back.
"""
from __future__ import annotations

import json
import os
import resource
import signal
import sys
import threading
import time
import traceback
from pathlib import Path

from .atomic import write_text

STATIC_ENV = "REPROBOOK_STATIC"
#: The runner's process id, so the executor can tell when it has been orphaned.
PARENT_ENV = "REPROBOOK_PARENT_PID"


def _kill_descendants_and_exit(*_args) -> None:
    try:
        import psutil

        kids = psutil.Process().children(recursive=True)
        for k in kids:
            try:
                k.kill()
            except psutil.NoSuchProcess:
                pass
        psutil.wait_procs(kids, timeout=5)
    finally:
        os._exit(143)


def die_with_parent() -> None:
    """End this process and its kernel when the runner that started it goes away."""
    expected = int(os.environ.get(PARENT_ENV, "0") or 0)
    signal.signal(signal.SIGTERM, _kill_descendants_and_exit)
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG: SIGTERM us when the parent dies
        except (OSError, AttributeError):
            pass
    if expected and os.getppid() != expected:  # the runner died before the line above
        _kill_descendants_and_exit()

    def watch():
        while True:
            time.sleep(1.0)
            if expected and os.getppid() != expected:
                _kill_descendants_and_exit()

    threading.Thread(target=watch, daemon=True, name="reprobook-parent-watch").start()


def failed_cell(nb_path: Path) -> dict | None:
    """The cell that raised or was still running in a (partial) executed notebook."""
    try:
        nb = json.loads(Path(nb_path).read_text())
    except (OSError, ValueError):
        return None
    for i, cell in enumerate(nb.get("cells", [])):
        if cell.get("cell_type") != "code":
            continue
        status = cell.get("metadata", {}).get("papermill", {}).get("status")
        errored = any(o.get("output_type") == "error" for o in cell.get("outputs", []))
        if errored or status in ("running", "failed"):
            src = cell.get("source", "")
            src = "".join(src) if isinstance(src, list) else src
            return {"index": i, "status": "error" if errored else status, "source": src[:2000]}
    return None


def cpu_seconds() -> float:
    """User plus system CPU time of this process and of its children that have ended (the
    kernel, once papermill has shut it down and reaped it)."""
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def run_spec(spec: dict) -> dict:
    """Run the notebook; the result holds the status, the failing cell, the wall time, the CPU
    time (executor and kernel) and the 1-minute load average at the start and the end. Wall time
    on a shared machine grows with its load; CPU time much less, so the two together say how
    long the chapter takes on a quiet one."""
    import papermill as pm
    from papermill.exceptions import PapermillExecutionError

    t0, c0, load0 = time.perf_counter(), cpu_seconds(), os.getloadavg()[0]
    out = Path(spec["output"])
    result = {"status": "ok", "error": None, "cell": None}
    try:
        pm.execute_notebook(spec["notebook"], str(out), parameters=spec["parameters"],
                            cwd=spec.get("cwd"), execution_timeout=spec.get("cell_timeout"),
                            kernel_name=spec.get("kernel_name"), progress_bar=False,
                            log_output=False, report_mode=False)
    except PapermillExecutionError as e:
        result.update(status="error", error=f"{e.ename}: {e.evalue}", cell=failed_cell(out))
    except Exception as e:  # a timeout or a dead kernel: report it, do not crash the runner
        name = type(e).__name__
        status = "timeout" if "Timeout" in name or "timed out" in str(e).lower() else "error"
        result.update(status=status, error=f"{name}: {e}".strip()[:2000], cell=failed_cell(out))
        if status == "error" and result["cell"] is None:
            result["traceback"] = traceback.format_exc()[-4000:]
    result["wall_time_s"] = round(time.perf_counter() - t0, 3)
    result["cpu_time_s"] = round(cpu_seconds() - c0, 3)
    result["load_average"] = [round(load0, 2), round(os.getloadavg()[0], 2)]
    return result


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    spec_path = Path(argv[0])
    spec = json.loads(spec_path.read_text())
    die_with_parent()
    result = run_spec(spec)
    write_text(spec_path.with_suffix(".result.json"), json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
