from threadpoolctl import threadpool_info

from reprobook.threads import single_threaded_blas, single_threaded_torch


def _blas_threads():
    return [p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"]


def test_limits_inside_and_restores_after():
    import numpy  # noqa: F401  (loads a BLAS for threadpoolctl to see)
    before = _blas_threads()
    with single_threaded_blas():
        assert all(n == 1 for n in _blas_threads())
    assert _blas_threads() == before


def test_decorator_restores_on_error():
    before = _blas_threads()

    @single_threaded_blas()
    def boom():
        assert all(n == 1 for n in _blas_threads())
        raise RuntimeError("inside")

    try:
        boom()
    except RuntimeError:
        pass
    assert _blas_threads() == before


def test_torch_threads_limited_and_restored():
    import torch
    before = torch.get_num_threads()
    with single_threaded_torch():
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == before

    @single_threaded_torch()
    def boom():
        raise RuntimeError("inside")

    try:
        boom()
    except RuntimeError:
        pass
    assert torch.get_num_threads() == before
