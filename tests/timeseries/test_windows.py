import numpy as np
import pytest
import torch

from reprobook.timeseries.windows import (Scaler, batches, chronological_bounds, sequential_batches,
                                          split_windows)


def _ramp(T=200, C=3):
    return np.arange(T, dtype=float)[:, None] * np.ones((1, C)) + np.arange(C)


def test_bounds():
    assert chronological_bounds(100) == [(0, 70), (70, 80), (80, 100)]
    with pytest.raises(ValueError, match="sum to 1"):
        chronological_bounds(100, (0.5, 0.4))


def test_windows_content_and_scaling():
    x = _ramp()
    sets, sc = split_windows(x, 10, 5)
    tr = x[:140]
    np.testing.assert_allclose(sc.mean, tr.mean(0))
    wx, wy = sets["test"].get([0])
    raw_x, raw_y = sc.inverse(wx[0].numpy()), sc.inverse(wy[0].numpy())
    # first test window: targets start where the test part starts, look-back reaches into val
    assert raw_y[0, 0] == pytest.approx(160, abs=1e-3) and raw_x[-1, 0] == pytest.approx(159, abs=1e-3)
    assert raw_x.shape == (10, 3) and raw_y.shape == (5, 3)


def test_no_target_leaks_across_parts():
    sets, _ = split_windows(_ramp(), 10, 5)
    last_train_target = int(sets["train"].starts[-1]) + 4
    assert last_train_target < 140
    assert int(sets["val"].starts[0]) == 140 and int(sets["val"].starts[-1]) + 4 < 160
    assert int(sets["test"].starts[-1]) + 4 == 199


def test_stride_thins_training_only():
    a, _ = split_windows(_ramp(), 10, 5, stride=3)
    b, _ = split_windows(_ramp(), 10, 5)
    assert len(a["train"]) == -(-len(b["train"]) // 3)
    assert len(a["test"]) == len(b["test"])


def test_errors():
    with pytest.raises(ValueError, match="too short"):
        split_windows(_ramp(30), 10, 5)
    with pytest.raises(ValueError, match=r"\[T, C\]"):
        split_windows(np.zeros(10), 2, 2)
    with pytest.raises(ValueError, match="lookback"):
        split_windows(_ramp(), 0, 2)


def test_batches_shuffle_and_sequential():
    sets, _ = split_windows(_ramp(), 10, 5)
    tr = sets["train"]
    g1 = [x for x, _ in batches(tr, 8, generator=torch.Generator().manual_seed(0))]
    g2 = [x for x, _ in batches(tr, 8, generator=torch.Generator().manual_seed(0))]
    assert all(torch.equal(a, b) for a, b in zip(g1, g2))
    assert sum(len(x) for x in g1) == len(tr)
    seq = list(sequential_batches(tr, 4))
    x0, x1 = seq[0][0], seq[1][0]
    # consecutive windows move one step; the next batch continues where this one ended
    torch.testing.assert_close(x0[1, :-1], x0[0, 1:])
    torch.testing.assert_close(x1[0, :-1], x0[-1, 1:])
    strided, _ = split_windows(_ramp(), 10, 5, stride=2)
    with pytest.raises(ValueError, match="stride-1"):
        next(sequential_batches(strided["train"], 4))


def test_scaler_roundtrip():
    x = np.random.default_rng(0).normal(3, 2, (50, 2))
    s = Scaler.fit(x)
    np.testing.assert_allclose(s.inverse(s.transform(x)), x)
