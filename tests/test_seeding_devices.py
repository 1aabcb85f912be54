import random

import numpy as np
import pytest
import torch

from reprobook import rng, seed_everything, select_device
from reprobook.devices import device_description


def draw():
    return random.random(), np.random.rand(), torch.rand(1).item()


def test_same_seed_same_numbers():
    seed_everything(7)
    a = draw()
    seed_everything(7)
    assert draw() == a
    seed_everything(8)
    assert draw() != a


def test_rng_streams_are_reproducible_and_distinct():
    assert rng(1, 2).random() == rng(1, 2).random()
    assert rng(1, 2).random() != rng(1, 3).random()


@pytest.mark.parametrize("bad", [1.5, "3", True, -1, 2**32])
def test_bad_seed(bad):
    with pytest.raises((TypeError, ValueError), match="seed"):
        seed_everything(bad)


def test_devices():
    assert select_device("auto").type in ("cpu", "cuda")
    assert select_device("CPU").type == "cpu"
    with pytest.raises(ValueError, match="unknown device 'tpu'"):
        select_device("tpu")
    with pytest.raises(TypeError):
        select_device(0)
    if not torch.cuda.is_available():
        with pytest.raises(RuntimeError, match="no CUDA"):
            select_device("cuda")
    assert "cpu" in device_description("cpu")


def _fresh(code: str) -> str:
    import subprocess
    import sys
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout.strip()


def test_torch_imported_after_seeding_gets_the_same_numbers():
    """seed_everything does not import torch (seconds a numpy-only chapter should not pay), but a
    torch imported later is seeded on import: the same numbers as seeding after the import."""
    later = _fresh("import sys; from reprobook import seed_everything; seed_everything(5); "
                   "seed_everything(3); assert 'torch' not in sys.modules; import torch; "
                   "import importlib.resources as r; assert r.files('torch').joinpath('__init__.py').is_file(); "
                   "print(torch.rand(3).tolist(), torch.are_deterministic_algorithms_enabled())")
    before = _fresh("import torch; from reprobook import seed_everything; seed_everything(3); "
                    "print(torch.rand(3).tolist(), torch.are_deterministic_algorithms_enabled())")
    assert later == before and later.endswith("True")


def test_seeding_torch_does_not_load_the_compiler_or_triton():
    """Deterministic algorithms on, without importing torch._inductor (seconds) or Triton (which
    must not load before a chapter chooses Triton's CPU interpreter)."""
    import subprocess
    import sys
    code = ("import sys, torch; from reprobook import seed_everything; seed_everything(3); "
            "assert torch.are_deterministic_algorithms_enabled(); "
            "assert torch.is_deterministic_algorithms_warn_only_enabled(); "
            "bad = [m for m in ('torch._inductor', 'triton') if m in sys.modules]; "
            "assert not bad, bad")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
