import numpy as np
import pytest
import torch

from reprobook.models.itransformer import itransformer
from reprobook.models.spectral_attention import SpectralForecaster
from reprobook.timeseries.sequential import (SeqConfig, all_windows, fine_tune, predict_in_order,
                                             squared_error)
from reprobook.timeseries.windows import split_windows


@pytest.fixture(autouse=True)
def _one_thread():
    # tiny models: one thread avoids oversubscription on a shared machine
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def _sets(T=200, L=16, H=4):
    t = np.arange(T)[:, None]
    v = np.sin(2 * np.pi * t / 50 + np.array([0.0, 1.0])) + 0.01 * t
    return split_windows(v, L, H)[0]


def test_all_windows_positions_match_parts():
    sets = _sets()
    ws, where = all_windows(sets)
    assert bool((ws.starts.diff() == 1).all())
    for name, s in sets.items():
        xa, ya = ws.get(where[name])
        xs, ys = s.tensors()
        assert torch.equal(xa, xs) and torch.equal(ya, ys)


def test_predict_in_order_matches_window_by_window_recursion():
    """Batched evaluation with the carried state equals feeding the windows one at a time."""
    sets = _sets()
    ws, _ = all_windows(sets)
    torch.manual_seed(0)
    m = SpectralForecaster(itransformer(16, 4, d_model=8, d_ff=8, n_blocks=1), 2).double()
    with torch.no_grad():
        m.sa.logits[-1] += 2.0
    ws.series = ws.series.double()
    p, _ = predict_in_order(m, ws, batch_size=37)
    p1, _ = predict_in_order(m, ws, batch_size=1)
    assert (p - p1).abs().max() < 1e-10


def test_fine_tune_lowers_loss_and_keeps_base_rate():
    sets = _sets()
    torch.manual_seed(0)
    base = itransformer(16, 4, d_model=8, d_ff=8, n_blocks=1, dropout=0.0)
    m = SpectralForecaster(base, 2)
    before = {n: p.detach().clone() for n, p in base.named_parameters()}
    losses = fine_tune(m, sets["train"], SeqConfig(epochs=6, batch_size=16, lr_fast=0.05, lr_base=0.0), seed=0)
    assert np.mean(losses[-5:]) < np.mean(losses[:5])
    for n, p in base.named_parameters():                      # lr_base = 0: base untouched
        assert torch.equal(p, before[n])
    assert m.sa.state is None                                 # state reset after training


def test_errors():
    with pytest.raises(ValueError, match="SeqConfig"):
        SeqConfig(batch_size=1)
    sets = _sets()
    ws, _ = all_windows(sets)
    ws.starts = ws.starts[::2]
    with pytest.raises(ValueError, match="stride-1"):
        predict_in_order(itransformer(16, 4, d_model=8, d_ff=8), ws)
    assert squared_error(torch.zeros(3, 4, 2), torch.ones(3, 4, 2)).shape == (4, 2)
