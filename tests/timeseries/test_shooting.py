import numpy as np
import pytest
import torch

from reprobook.timeseries.csode import build
from reprobook.timeseries.shooting import fit_shooting, rollout_errors, zscore


def test_zscore_uses_training_statistics_and_groups():
    x = np.arange(40, dtype=float).reshape(10, 4)
    z, mean, std = zscore(x, 5)
    np.testing.assert_allclose(z[:5].mean(0), 0, atol=1e-12)
    _, mean_g, _ = zscore(x, 5, groups=2)
    assert mean_g[0] == mean_g[1] and mean_g[2] == mean_g[3] and mean_g[0] != mean_g[2]
    with pytest.raises(ValueError, match="equal groups"):
        zscore(x, 5, groups=3)


def test_fit_learns_linear_decay_and_scores_it():
    t = torch.arange(120, dtype=torch.float32)
    series = torch.stack([torch.exp(-0.02 * t) * torch.cos(0.2 * t), torch.exp(-0.02 * t) * torch.sin(0.2 * t)], 1)
    torch.manual_seed(0)
    model = build("csode", 2, 8, control=False)
    before = rollout_errors(model, series, 80, horizon=10, dt=1.0)[0].mean()
    losses = fit_shooting(model, series, 80, window=5, steps=50, batch=16, lr=0.01, dt=1.0, seed=0)
    mse, mae, pred, target = rollout_errors(model, series, 80, horizon=10, dt=1.0)
    assert losses[-1] < 0.2 * losses[0]
    assert mse.mean() < 0.2 * before
    assert pred.shape == target.shape == (11, 3, 2)


def test_bad_input_is_named():
    s = torch.zeros(30, 2)
    m = build("node", 2, 4)
    with pytest.raises(ValueError, match="window < n_train"):
        fit_shooting(m, s, 5, window=10, steps=1, batch=2, lr=0.1, dt=0.1, seed=0)
    with pytest.raises(ValueError, match="no 10-step window"):
        rollout_errors(m, s, 20, horizon=10, dt=0.1)
