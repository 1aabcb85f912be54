import os
import subprocess
import sys

import pytest
import torch

from reprobook.kernels.triton_target import triton_device, triton_mode


def run(code: str, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env={k: v for k, v in {**os.environ, **env}.items() if v is not None})


def test_auto_picks_the_interpreter_on_a_cpu_machine_before_triton_loads():
    if torch.cuda.is_available():
        pytest.skip("a GPU machine compiles natively")
    out = run("import os, sys; from reprobook.kernels.triton_target import triton_device, "
              "triton_mode; d = triton_device(); import triton; "
              "print(d, os.environ['TRITON_INTERPRET'], triton_mode())",
              {"TRITON_INTERPRET": None})
    assert out.returncode == 0, out.stderr[-1500:]
    assert out.stdout.split() [:2] == ["cpu", "1"] and "interpreter" in out.stdout


def test_asking_after_triton_was_imported_is_a_clear_error():
    if torch.cuda.is_available():
        pytest.skip("a GPU machine compiles natively")
    out = run("import triton; from reprobook.kernels.triton_target import triton_device; "
              "triton_device()", {"TRITON_INTERPRET": None})
    assert out.returncode != 0 and "before importing a kernel module" in out.stderr


def test_cuda_without_a_gpu_and_unknown_names_are_errors():
    if not torch.cuda.is_available():
        with pytest.raises(RuntimeError, match="no CUDA device"):
            triton_device("cuda")
    with pytest.raises(ValueError, match="unknown device"):
        triton_device("tpu")
    assert triton_mode() in ("interpreter (CPU)", "compiled (CUDA)")
