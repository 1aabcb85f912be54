"""The prepared GPU command parses, and on a machine without a GPU says so instead of failing
somewhere inside (it runs for real only where `device` lends a GPU)."""
import subprocess
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("script", ["gpu-check.sh", "gpu-wheels.sh"])
def test_scripts_parse(script):
    assert subprocess.run(["bash", "-n", str(ROOT / "scripts" / script)]).returncode == 0


def test_gpu_check_refuses_a_machine_without_a_gpu(tmp_path):
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU: run scripts/gpu-check.sh itself")
    import os
    import sys
    res = subprocess.run([str(ROOT / "scripts" / "gpu-check.sh"), str(tmp_path)], cwd=ROOT,
                         capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PY": sys.executable})
    assert res.returncode == 2 and "torch sees no CUDA device" in res.stderr
