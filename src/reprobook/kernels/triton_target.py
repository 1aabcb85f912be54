"""Where Triton kernels run here: natively on a CUDA GPU, else on the CPU through Triton's interpreter.

Triton reads ``TRITON_INTERPRET`` once, when it is first imported, so the choice has to be made
before anything imports it. A chapter calls :func:`triton_device` in its imports cell (before
importing a kernel module) and hands ``impl="triton"`` inputs on the device it returns; the same
notebook then compiles natively on a GPU machine and interprets on a laptop.
"""
from __future__ import annotations

import os
import sys

__all__ = ["triton_device", "triton_mode"]


def triton_device(device: str = "auto"):
    """The ``torch.device`` that ``impl="triton"`` inputs must live on.

    ``"auto"``: CUDA when torch sees one, else the CPU with the interpreter switched on (which must
    happen before triton is first imported: asking too late is an error that says so).
    ``"cpu"``: the interpreter even on a GPU machine (a cheap check of the kernels' logic).
    ``"cuda"``/``"cuda:N"``: native, and an error when there is no GPU.
    """
    import torch

    name = str(device).strip().lower()
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    if name.startswith("cuda"):
        if not torch.cuda.is_available():
            raise RuntimeError(f"triton_device({device!r}): torch sees no CUDA device here")
        if os.environ.get("TRITON_INTERPRET") == "1":
            raise RuntimeError("TRITON_INTERPRET=1 is set, so Triton would interpret instead of "
                               "compiling for the GPU; unset it before starting Python")
        return torch.device(name)
    if name != "cpu":
        raise ValueError(f"triton_device: unknown device {device!r}; use 'auto', 'cpu' or 'cuda'")
    if os.environ.get("TRITON_INTERPRET") != "1":
        if "triton" in sys.modules:
            raise RuntimeError("Triton was imported before triton_device() could switch on its "
                               "CPU interpreter; call triton_device() before importing a kernel "
                               "module, or set TRITON_INTERPRET=1 before starting Python")
        os.environ["TRITON_INTERPRET"] = "1"
    return torch.device("cpu")


def triton_mode() -> str:
    """``"interpreter (CPU)"`` or ``"compiled (CUDA)"``, for ledgers and printouts."""
    return "interpreter (CPU)" if os.environ.get("TRITON_INTERPRET") == "1" else "compiled (CUDA)"
