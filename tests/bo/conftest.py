"""The BO tests work on tiny tensors: one intra-op thread is faster, and on a busy 2-core machine
OpenMP spinning threads made them 30x slower. Restored after each test module."""
import pytest
import torch


@pytest.fixture(autouse=True, scope="module")
def _one_torch_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
