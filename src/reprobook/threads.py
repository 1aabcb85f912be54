"""Limit BLAS/LAPACK to one thread around code that works on many small matrices.

For matrices of a few hundred rows, BLAS threads cost more in synchronisation than they save in
arithmetic; on a busy 2-core machine we measured a multi-threaded 200x200 solve about 50x slower,
and a batch of small products about 10x slower, than with one thread. Entering the limit costs
about a millisecond, so wrap whole algorithms, not single calls.
"""
from __future__ import annotations

import contextlib

from threadpoolctl import threadpool_limits

__all__ = ["single_threaded_blas", "single_threaded_torch"]


class single_threaded_blas(contextlib.ContextDecorator):
    """BLAS limited to one thread, as a context manager (``with single_threaded_blas():``) or a
    decorator (``@single_threaded_blas()``). The previous limits are restored on exit, also when
    the body raises."""

    def __enter__(self):
        self._limits = threadpool_limits(limits=1, user_api="blas")
        return self

    def __exit__(self, *exc):
        self._limits.restore_original_limits()
        return False


class single_threaded_torch(contextlib.ContextDecorator):
    """torch's intra-op thread pool limited to one thread (``torch.set_num_threads(1)``), restored
    on exit. For loops of many small batched tensor operations on a CPU: on a busy 2-core machine
    we measured full-batch PINN training about 9x faster with one torch thread than with two.
    Harmless for work on a GPU, whose kernels do not use this pool."""

    def __enter__(self):
        import torch

        self._threads = torch.get_num_threads()
        torch.set_num_threads(1)
        return self

    def __exit__(self, *exc):
        import torch

        torch.set_num_threads(self._threads)
        return False
