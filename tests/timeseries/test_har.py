import numpy as np
import pytest
import torch

from reprobook.timeseries.har import accuracy, build_seeded, daphnet_placement_task, fit


def _fake(T=400, seed=0):
    r = np.random.default_rng(seed)
    v = r.normal(size=(T, 9))
    v[:, 0:3] *= 50; v[:, 0:3] += 1000             # loud ankle with an offset
    return v


def test_placement_windows_are_labelled_by_sensor_and_standardised():
    task = daphnet_placement_task(window=32, stride=16, train_share=0.5, values=_fake())
    assert task.x_train.shape[1:] == (3, 32) and task.n_classes == 3
    n = len(task.y_train) // 3
    assert task.y_train.tolist() == [0] * n + [1] * n + [2] * n
    # every window's axis is z-scored: loudness and offset are gone
    assert torch.allclose(task.x_train.mean(-1), torch.zeros(1), atol=1e-4)
    assert torch.allclose(task.x_train.std(-1, unbiased=False), torch.ones(1), atol=1e-3)
    # chronological: test windows start after the training part plus one window
    assert len(task.y_test) == 3 * len(range(0, 400 - 200 - 32 - 32 + 1, 16))


def test_placement_bad_input():
    with pytest.raises(ValueError, match=r"\[T, 9\]"):
        daphnet_placement_task(values=np.zeros((100, 6)))
    with pytest.raises(ValueError, match="train_share"):
        daphnet_placement_task(values=_fake(), train_share=1.0)
    with pytest.raises(ValueError, match="no window"):
        daphnet_placement_task(window=300, values=_fake())


def test_fit_learns_a_separable_task_and_is_deterministic():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(64, 2, 8, generator=g)
    y = (x[:, 0].mean(-1) > 0).long()
    mk = lambda: torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(16, 2))  # noqa: E731
    m1, m2 = build_seeded(mk, 1), build_seeded(mk, 1)
    l1 = fit(m1, x, y, epochs=30, seed=3, lr=0.05)
    l2 = fit(m2, x, y, epochs=30, seed=3, lr=0.05)
    assert l1 == l2 and l1[-1] < l1[0]
    assert accuracy(m1, x, y) > 0.9
    with pytest.raises(ValueError, match="epochs"):
        fit(m1, x, y, epochs=-1, seed=0)
