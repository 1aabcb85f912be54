r"""Deterministic counters of what a torch call does: memory alive, FLOPs, bytes written.

Both run the call under a :class:`~torch.utils._python_dispatch.TorchDispatchMode`, which sees
every aten op, so their numbers depend only on the code and the shapes, never on the machine, the
allocator or timing: the same call always gives the same counts.

* :func:`track_memory` -- the **peak of bytes alive at once**: each op output with a new storage
  adds its storage's bytes, freed when the last tensor seen with that storage is collected.
* :func:`count_work` -- **FLOPs** of the matrix products (``mm``, ``bmm``, ``addmm``,
  ``baddbmm``: :math:`2\,b\,m\,n\,k`; a fused scaled-dot-product-attention op:
  :math:`2\,B H L_q L_k (D + D_v)`), and **bytes written**: every op output that is not a view
  counts its bytes (a new tensor is written once, and an intermediate must be read back at least
  once, so this is a lower bound on the memory traffic of running the ops one by one); an
  in-place op counts the bytes of its floating-point source (``index_copy_``, ``scatter_add_``,
  ``copy_``) or, without one, of the tensor it rewrites (``masked_fill_``, ``mul_``).

What neither sees: the scratch a single op uses inside (a matmul's packing buffers) and data kept
in registers or shared memory by a compiled kernel, which is exactly what a fused kernel saves.
"""
from __future__ import annotations

import math
import weakref

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

__all__ = ["track_memory", "count_work"]


class _Mode(TorchDispatchMode):
    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        # torch wraps __torch_dispatch__ in a dynamo-disable guard unless told otherwise; nothing
        # here is compiled, and the guard would import torch._dynamo (seconds) on first use
        return False


class _AllocationCounter(_Mode):
    """Counts the bytes of tensor storages that aten ops create while the mode is active.

    Each op's outputs whose storage is new (not one of its inputs' and not already counted) add
    their storage size to ``current``; the bytes are released when the last tensor object seen
    with that storage is garbage-collected. ``peak`` is the maximum of ``current``, ``largest``
    the largest single new storage. Storages created outside (the inputs) are never counted.
    """

    def __init__(self):
        super().__init__()
        self.live: dict[int, list[int]] = {}   # storage address -> [bytes, tensor objects]
        self.current = self.peak = self.largest = 0

    def _release(self, key: int) -> None:
        entry = self.live.get(key)
        if entry is None:
            return
        entry[1] -= 1
        if entry[1] == 0:
            self.current -= entry[0]
            del self.live[key]

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        inputs = {t.untyped_storage().data_ptr() for t in tree_leaves((args, kwargs))
                  if isinstance(t, torch.Tensor)}
        for t in tree_leaves(out):
            if not isinstance(t, torch.Tensor):
                continue
            st = t.untyped_storage()
            key, nbytes = st.data_ptr(), st.nbytes()
            if key in self.live:
                self.live[key][1] += 1
            elif key in inputs or nbytes == 0:
                continue                      # a view of (or in-place on) an outside tensor
            else:
                self.live[key] = [nbytes, 1]
                self.current += nbytes
                self.peak = max(self.peak, self.current)
                self.largest = max(self.largest, nbytes)
            weakref.finalize(t, self._release, key)
        return out


def track_memory(fn, *args, **kwargs) -> dict:
    """Run ``fn(*args, **kwargs)`` under no-grad and count what its aten ops allocate.

    Returns ``{"peak": bytes, "largest": bytes, "result_bytes": bytes}``: the peak of the bytes
    live at once (the returned result included), the largest single allocation, and the size of
    the returned tensor's storage. Deterministic (see the module).
    """
    counter = _AllocationCounter()
    with torch.no_grad(), counter:
        out = fn(*args, **kwargs)
    res = out.untyped_storage().nbytes() if isinstance(out, torch.Tensor) else 0
    del out
    return {"peak": counter.peak, "largest": counter.largest, "result_bytes": res}


_MATMULS = {"mm": (0, 1), "bmm": (0, 1), "addmm": (1, 2), "baddbmm": (1, 2)}


def _nbytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


class _WorkCounter(_Mode):
    def __init__(self):
        super().__init__()
        self.flops = 0
        self.written = 0

    def _count_flops(self, name: str, args) -> None:
        if name in _MATMULS:
            a, b = (args[i] for i in _MATMULS[name])
            batch = math.prod(a.shape[:-2])
            self.flops += 2 * batch * a.shape[-2] * a.shape[-1] * b.shape[-1]
        elif "scaled_dot_product" in name and "backward" not in name:
            q, k, v = args[:3]                                  # [B, H, L, D]
            self.flops += 2 * math.prod(q.shape[:-1]) * k.shape[-2] * (q.shape[-1] + v.shape[-1])

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        name = func.overloadpacket.__name__
        self._count_flops(name, args)
        tensors = [t for t in tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)]
        if func._schema.is_mutable:                              # in place (name_, out=)
            self_t = tensors[0] if tensors else None
            srcs = [t for t in tensors[1:] if t.is_floating_point()]
            if self_t is not None:
                self.written += min(_nbytes(self_t), max(map(_nbytes, srcs))) if srcs else \
                    _nbytes(self_t)
            return out
        storages = {t.untyped_storage().data_ptr() for t in tensors}
        for t in tree_leaves(out):
            if isinstance(t, torch.Tensor) and t.untyped_storage().data_ptr() not in storages:
                self.written += _nbytes(t)                      # a new tensor, not a view
        return out


def count_work(fn, *args, **kwargs) -> dict:
    """Run ``fn(*args, **kwargs)`` under no-grad; return ``{"flops": int, "bytes_written": int}``
    of its aten ops (see the module for what is counted)."""
    counter = _WorkCounter()
    with torch.no_grad(), counter:
        fn(*args, **kwargs)
    return {"flops": counter.flops, "bytes_written": counter.written}
