"""Memory a training step needs, measured deterministically: the bytes autograd keeps for backward.

Peak resident memory on a shared CPU machine is noisy and depends on the allocator; what a
method *must* hold between its forward and backward pass is not. :func:`saved_tensor_bytes`
runs ``fn`` under ``torch.autograd.graph.saved_tensors_hooks`` and adds up the storage of every
tensor autograd saves, counting each storage once (views of one buffer share it).
"""
from __future__ import annotations

from typing import Callable

import torch

__all__ = ["saved_tensor_bytes"]


def saved_tensor_bytes(fn: Callable[[], torch.Tensor]) -> int:
    """Bytes of the distinct storages autograd saves while ``fn()`` builds its graph.

    ``fn`` must return a tensor that requires grad (the loss); it is not backpropagated.
    """
    if not callable(fn):
        raise ValueError(f"fn must be callable, got {type(fn).__name__}")
    seen: dict[int, int] = {}

    def pack(t: torch.Tensor):
        st = t.untyped_storage()
        seen[st.data_ptr()] = max(seen.get(st.data_ptr(), 0), st.nbytes())
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = fn()
    if not isinstance(out, torch.Tensor) or not out.requires_grad:
        raise ValueError("fn must return a tensor that requires grad (a loss)")
    return int(sum(seen.values()))
