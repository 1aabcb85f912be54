import numpy as np
import pytest
import torch

from reprobook.timeseries import metrics


def test_values():
    p, t = np.array([[1.0, 2.0], [3.0, 4.0]]), np.array([[1.0, 0.0], [0.0, 4.0]])
    assert metrics.mse(p, t) == pytest.approx((4 + 9) / 4)
    assert metrics.mae(p, t) == pytest.approx(5 / 4)
    assert metrics.rmse(p, t) == pytest.approx(np.sqrt(13 / 4))
    np.testing.assert_allclose(metrics.mse(p, t, axis=-1), [9 / 2, 4 / 2])
    assert metrics.smape(np.zeros(2), np.zeros(2)) == 0.0
    assert metrics.smape(np.array([1.0]), np.array([3.0])) == pytest.approx(100.0)


def test_torch_and_mase():
    p, t = torch.ones(3, 2), torch.zeros(3, 2)
    assert metrics.mse(p, t) == 1.0
    train = np.arange(10.0)
    assert metrics.mase(np.array([2.0]), np.array([0.0]), train) == pytest.approx(2.0)


def test_errors():
    with pytest.raises(ValueError, match="shapes differ"):
        metrics.mse(np.zeros(2), np.zeros(3))
    with pytest.raises(ValueError, match="undefined"):
        metrics.mase(np.zeros(1), np.ones(1), np.ones(5))
