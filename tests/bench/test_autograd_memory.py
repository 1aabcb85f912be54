"""saved_tensor_bytes counts what autograd keeps, once per storage."""
import pytest
import torch

from reprobook.bench.autograd_memory import saved_tensor_bytes


def test_counts_saved_storages():
    w = torch.randn(100, 50, dtype=torch.float64, requires_grad=True)
    x = torch.randn(50, dtype=torch.float64)
    # the gradient of w @ x with respect to w needs only x (400 B) ...
    assert saved_tensor_bytes(lambda: (w @ x).sum()) == 50 * 8
    # ... and when x needs a gradient too, w (40 kB) is kept as well
    x.requires_grad_(True)
    assert saved_tensor_bytes(lambda: (w @ x).sum()) == 100 * 50 * 8 + 50 * 8
    # a bigger intermediate is counted: exp saves its output
    n1 = saved_tensor_bytes(lambda: torch.exp(w @ w.T).sum())
    assert n1 >= 100 * 100 * 8


def test_bad_input():
    with pytest.raises(ValueError, match="callable"):
        saved_tensor_bytes(3)
    with pytest.raises(ValueError, match="requires grad"):
        saved_tensor_bytes(lambda: torch.ones(2).sum())
