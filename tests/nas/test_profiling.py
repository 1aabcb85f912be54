import numpy as np
import pytest
import torch

from reprobook.nas.profiling import measure_latency


def test_rounds_are_interleaved_in_shuffled_order():
    calls = []
    models = [lambda x, i=i: calls.append(i) for i in range(4)]
    t, c = measure_latency(models, torch.zeros(1), rounds=5, rng=np.random.default_rng(0), warmup=1)
    assert t.shape == c.shape == (4, 5) and np.all(t >= 0) and np.all(c >= 0)
    timed = calls[4:]                                      # after one warm-up call each
    rounds = [timed[4 * r:4 * r + 4] for r in range(5)]
    assert all(sorted(r) == [0, 1, 2, 3] for r in rounds)
    assert len({tuple(r) for r in rounds}) > 1             # order differs between rounds


def test_slower_model_measures_slower_and_errors_are_named():
    fast = torch.nn.Linear(4, 4)
    slow = torch.nn.Sequential(*[torch.nn.Linear(256, 256) for _ in range(8)])
    t, c = measure_latency([lambda x: fast(x[:, :4]), slow], torch.zeros(64, 256), rounds=5,
                           rng=np.random.default_rng(0))
    assert np.median(t[1]) > np.median(t[0]) and np.median(c[1]) > np.median(c[0])
    with pytest.raises(ValueError, match="rounds"):
        measure_latency([fast], torch.zeros(1, 4), rounds=0, rng=np.random.default_rng(0))
    with pytest.raises(ValueError, match="non-empty"):
        measure_latency([], torch.zeros(1, 4), rounds=1, rng=np.random.default_rng(0))
