import pytest
import torch


@pytest.fixture
def one_thread():
    """Run a test on one torch thread: tiny nets only gain contention from a second one."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)
