import numpy as np
import pytest
import torch

from reprobook import rng
from reprobook.timeseries.train import FitConfig, evaluate, fit_forecaster
from reprobook.timeseries.windows import split_windows


class Linear(torch.nn.Module):
    def __init__(self, L, H):
        super().__init__()
        self.fc = torch.nn.Linear(L, H)

    def forward(self, x):
        return self.fc(x.transpose(1, 2)).transpose(1, 2)


def _data():
    t = np.arange(600)[:, None]
    x = np.sin(2 * np.pi * t / 20 + np.array([0.0, 1.0])) + 0.05 * rng(0).standard_normal((600, 2))
    return split_windows(x, 40, 10)[0]


def test_loss_decreases_and_best_weights_kept():
    sets = _data()
    torch.manual_seed(0)
    m = Linear(40, 10)
    before = evaluate(m, sets["test"])["mse"]
    res = fit_forecaster(m, sets["train"], sets["val"], FitConfig(epochs=4, lr=1e-2), seed=0)
    assert res.train_loss[-1] < res.train_loss[0]
    assert evaluate(m, sets["test"])["mse"] < 0.2 * before
    assert evaluate(m, sets["val"])["mse"] == pytest.approx(min(res.val_mse), rel=1e-6)


def test_seeded_and_channel_mask():
    sets = _data()
    out = []
    for _ in range(2):
        torch.manual_seed(1)
        m = Linear(40, 10)
        fit_forecaster(m, sets["train"], sets["val"], FitConfig(epochs=1, max_steps=5), seed=3)
        out.append(m.fc.weight.detach().clone())
    assert torch.equal(out[0], out[1])
    full = evaluate(m, sets["test"])["mse"]
    per = [evaluate(m, sets["test"], channels=[c])["mse"] for c in (0, 1)]
    assert full == pytest.approx(np.mean(per))


def test_bad_config():
    with pytest.raises(ValueError, match="FitConfig"):
        FitConfig(epochs=0)


def test_build_seeded_is_reproducible_and_restores_the_generator():
    from reprobook.timeseries.train import build_seeded
    torch.manual_seed(5)
    state = torch.random.get_rng_state()
    a = build_seeded(lambda: torch.nn.Linear(3, 2), 7).weight
    assert torch.equal(torch.random.get_rng_state(), state)
    b = build_seeded(lambda: torch.nn.Linear(3, 2), 7).weight
    c = build_seeded(lambda: torch.nn.Linear(3, 2), 8).weight
    assert torch.equal(a, b) and not torch.equal(a, c)
