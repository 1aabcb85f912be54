import pytest

from reprobook.threads import single_threaded_torch


@pytest.fixture
def one_torch_thread():
    # tiny batched products: a second torch thread only adds synchronisation (10x slower here)
    with single_threaded_torch():
        yield
