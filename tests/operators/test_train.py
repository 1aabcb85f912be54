import numpy as np
import pytest
import torch

from reprobook.operators.fno import FNO2d
from reprobook.operators.train import (fit, forward_times, loglog_slopes, predict, relative_l1,
                                       with_coordinates)


def test_relative_l1_and_coordinates():
    t = torch.ones(2, 4, 4)
    torch.testing.assert_close(relative_l1(1.5 * t, t), torch.full((2,), 0.5))
    x = with_coordinates(np.zeros((1, 4, 4)))
    assert x.shape == (1, 3, 4, 4) and float(x[0, 1, 3, 0]) == 0.75 and float(x[0, 2, 0, 3]) == 0.75
    with pytest.raises(ValueError, match="shape"):
        relative_l1(t, t[:1])


def test_fit_lowers_the_loss_and_is_seeded():
    g = torch.Generator().manual_seed(0)
    f = torch.randn(16, 8, 8, generator=g)
    y = 2 * f + 1
    x = with_coordinates(f)
    runs = []
    for _ in range(2):
        torch.manual_seed(0)
        m = FNO2d(3, 4, 2, 1)
        runs.append(fit(m, x, y, epochs=4, batch_size=8, lr=1e-2, seed=3))
    assert runs[0] == runs[1]
    assert runs[0][-1] < runs[0][0]


def test_predict_modes():
    m = FNO2d(3, 4, 2, 1)
    x = with_coordinates(torch.randn(3, 16, 16))
    assert predict(m, x, model_size=8).shape == (3, 16, 16)
    assert predict(m, x, model_size=8, mode="native").shape == (3, 16, 16)
    with pytest.raises(ValueError, match="mode"):
        predict(m, x, model_size=8, mode="bilinear")


def test_slopes():
    sizes = [8, 16, 32]
    t = np.array([[1.0, 4.0, 16.0], [2.0, 8.0, 32.0]])        # time ~ n^2: slope 1 in N = n^2
    np.testing.assert_allclose(loglog_slopes(t, sizes), [1.0, 1.0])
    times = forward_times(torch.nn.Identity(), [4, 8], 2, repeats=2)
    assert times.shape == (2, 2) and np.all(times >= 0)
    with pytest.raises(ValueError, match="repeats"):
        forward_times(torch.nn.Identity(), [4], 1, repeats=0)
