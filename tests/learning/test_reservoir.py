import numpy as np
import pytest
import torch

from reprobook.learning.reservoir import ReservoirBuffer


def test_every_stream_item_is_kept_with_probability_capacity_over_n():
    """Algorithm R's invariant: after n items each is in the buffer with probability M/n."""
    M, n, reps = 10, 50, 2000
    counts = np.zeros(n)
    for r in range(reps):
        buf = ReservoirBuffer(M, seed=r)
        for s in range(0, n, 7):   # uneven batches: the invariant is per item, not per batch
            ids = torch.arange(s, min(s + 7, n))
            buf.add(ids[:, None].float(), ids)
        assert len(buf) == M and buf.seen == n
        counts[buf.y.numpy()] += 1
    freq = counts / reps
    # binomial sd of one frequency: sqrt(0.2 * 0.8 / 2000) = 0.009; 5 sd = 0.045
    assert np.abs(freq - M / n).max() < 0.045
    # a buffer that kept the first M (or the last M) items would be at 0 or 1 here
    assert freq[:M].mean() < 0.3 and freq[-M:].mean() < 0.3


def test_fills_first_stores_logits_and_tasks_and_samples_without_replacement():
    buf = ReservoirBuffer(5, seed=0)
    x, y = torch.randn(3, 2, 2), torch.tensor([0, 1, 2])
    assert buf.add(x, y, logits=torch.randn(3, 4), task=1) == 3 and len(buf) == 3
    torch.testing.assert_close(buf.x[:3], x)
    s = buf.sample(10)
    assert len(s["y"]) == 3 and sorted(s["y"].tolist()) == [0, 1, 2]
    assert s["logits"].shape == (3, 4) and s["task"].tolist() == [1, 1, 1]


def test_the_same_seed_gives_the_same_buffer_and_draws():
    def run(seed):
        buf = ReservoirBuffer(4, seed=seed)
        buf.add(torch.arange(20.0)[:, None], torch.arange(20))
        return buf.y.tolist(), buf.sample(3)["y"].tolist()

    assert run(3) == run(3)
    assert any(run(3) != run(s) for s in (4, 5, 6))


def test_bad_input_is_named():
    with pytest.raises(ValueError, match="capacity must be a positive int"):
        ReservoirBuffer(0)
    buf = ReservoirBuffer(4)
    with pytest.raises(ValueError, match="the buffer is empty"):
        buf.sample(2)
    with pytest.raises(ValueError, match="same B"):
        buf.add(torch.zeros(3, 2), torch.zeros(2, dtype=torch.long))
    buf.add(torch.zeros(2, 2), torch.zeros(2, dtype=torch.long))
    with pytest.raises(ValueError, match="do not fit a buffer"):
        buf.add(torch.zeros(2, 3), torch.zeros(2, dtype=torch.long))
    with pytest.raises(ValueError, match="give logits with every batch or with none"):
        buf.add(torch.zeros(2, 2), torch.zeros(2, dtype=torch.long), logits=torch.zeros(2, 3))
