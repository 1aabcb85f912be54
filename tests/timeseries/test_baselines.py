import numpy as np
import pytest
import torch

from reprobook import rng
from reprobook.timeseries.baselines import RidgeVAR, window_mean
from reprobook.timeseries.windows import split_windows


def _lagged(T=1500):
    """Channel 1 is channel 0 delayed by 3 steps: a cross-channel model predicts its first 3
    horizon steps exactly, a channel-independent one cannot."""
    r = rng(0)
    z = np.zeros(T + 3)
    for t in range(1, T + 3):
        z[t] = 0.9 * z[t - 1] + r.standard_normal()
    return np.stack([z[3:], z[:-3]], 1)


def test_cross_channel_ridge_sees_the_lag():
    sets, _ = split_windows(_lagged(), 32, 6)
    cross = RidgeVAR(8, 1e-3).fit(sets["train"])
    ci = RidgeVAR(8, 1e-3, cross=False).fit(sets["train"])
    pc, y = cross.predict(sets["test"])
    pi, _ = ci.predict(sets["test"])
    err_c = (pc - y)[:, :3, 1].square().mean()
    err_i = (pi - y)[:, :3, 1].square().mean()
    assert err_c < 1e-3 and err_i > 0.05


def test_window_mean_and_errors():
    sets, _ = split_windows(_lagged(300), 32, 6)
    p, y = window_mean(sets["test"])
    x, _ = sets["test"].tensors()
    torch.testing.assert_close(p[:, 0], x.mean(1))
    with pytest.raises(RuntimeError, match="before fit"):
        RidgeVAR().predict(sets["test"])
    with pytest.raises(ValueError, match="shorter"):
        RidgeVAR(k=64).fit(sets["train"])
