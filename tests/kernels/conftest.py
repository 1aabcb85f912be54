"""Triton kernels run under the CPU interpreter in these tests (set before triton is imported)."""
import os

os.environ["TRITON_INTERPRET"] = "1"
