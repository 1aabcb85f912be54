import numpy as np
import pytest
import torch

from reprobook.models.neural_cde import NeuralCDE
from reprobook.models.rough_transformer import (RoughTransformer, SequenceTransformer, padding_mask,
                                                vanilla_tokens)
from reprobook.models.sequence_fit import FitConfig, accuracy, fit_classifier, seconds_per_epoch
from reprobook.timeseries.irregular import drop_mask, sinusoids

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_padding_does_not_change_the_logits():
    torch.manual_seed(0)
    m = SequenceTransformer(3, 4, d_model=16, n_heads=2, n_layers=1).eval()
    x = torch.randn(2, 5, 3)
    short = m(x[:1, :3])
    padded = m(torch.cat([x[:1, :3], 100 * torch.randn(1, 2, 3)], 1), torch.tensor([3]))
    assert torch.allclose(short, padded, atol=1e-5)
    assert padding_mask(torch.tensor([1, 3]), 3).tolist() == [[False, True, True], [False, False, False]]
    with pytest.raises(ValueError, match="expected tokens"):
        m(torch.randn(2, 5, 4))
    with pytest.raises(ValueError, match="n_heads"):
        SequenceTransformer(3, 4, d_model=10, n_heads=3)


def test_time_encoding_reads_the_first_feature():
    torch.manual_seed(0)
    m = SequenceTransformer(2, 3, d_model=8, n_heads=2, n_layers=1, time_encoding=4).eval()
    x = torch.rand(2, 5, 2)
    shifted = x.clone()
    shifted[..., 0] += 1.0          # every encoded frequency is an integer: a shift of 1 is invisible
    m.mean[0], m.std[0] = 0.0, 1.0
    m.embed.weight.data[:, 0] = 0   # ... once the raw time feature itself is ignored
    assert torch.allclose(m(x), m(shifted), atol=1e-5)
    shifted[..., 0] += 0.25
    assert not torch.allclose(m(x), m(shifted), atol=1e-3)
    with pytest.raises(ValueError, match="time_encoding"):
        SequenceTransformer(2, 3, d_model=8, n_heads=2, time_encoding=-1)


def test_fit_scaling_uses_real_tokens_only():
    m = SequenceTransformer(1, 2, d_model=8, n_heads=2, n_layers=1)
    x = torch.tensor([[[1.0], [3.0], [1e6]]])
    m.fit_scaling(x, torch.tensor([2]))
    assert float(m.mean) == pytest.approx(2.0) and float(m.std) == pytest.approx(np.sqrt(2.0))


def test_rough_transformer_tokens_and_forward():
    d = sinusoids(6, 50, rng=np.random.default_rng(0), freqs=(1, 2))
    m = RoughTransformer(1, 2, n_windows=4, depth=3, d_model=16, n_heads=2, n_layers=1)
    z = m.tokens(d.times, d.values)
    assert z.shape == (6, 4, 28) and z.dtype == torch.float32 and m.in_features == 28
    assert m.fit_scaling(z)(z).shape == (6, 2)
    g = RoughTransformer(1, 2, n_windows=4, depth=2, view="global", d_model=16, n_heads=2, n_layers=1)
    assert g.tokens(d.times, d.values).shape == (6, 4, 6)
    with pytest.raises(ValueError, match="view"):
        RoughTransformer(1, 2, view="all")


def test_vanilla_tokens_follow_the_mask():
    d = sinusoids(3, 20, rng=np.random.default_rng(1), freqs=(1, 2))
    mask = drop_mask(d.times.shape, 0.5, rng=np.random.default_rng(2))
    x, n = vanilla_tokens(d.times, d.values, mask)
    assert n.tolist() == mask.sum(1).tolist() and x.shape == (3, int(n.max()), 2)
    assert torch.allclose(x[0, :n[0], 0].double(), torch.from_numpy(d.times[0][mask[0]]).float().double())


def test_neural_cde_ignores_repeated_points():
    torch.manual_seed(0)
    m = NeuralCDE(2, 3, hidden=8, width=16)
    p = torch.randn(2, 6, 2)
    padded = torch.cat([p, p[:, -1:].expand(2, 4, 2)], 1)
    assert torch.allclose(m(p), m(padded), atol=1e-6)
    with pytest.raises(ValueError, match="expected path"):
        m(torch.randn(2, 6, 3))


def test_training_learns_an_easy_task_and_is_deterministic():
    d = sinusoids(48, 30, rng=np.random.default_rng(3), freqs=(1, 6), noise=0.05)
    y = torch.from_numpy(d.labels)

    def run():
        torch.manual_seed(0)
        m = RoughTransformer(1, 2, n_windows=4, depth=2, d_model=8, n_heads=2, n_layers=1)
        z = m.tokens(d.times, d.values)
        m.fit_scaling(z)
        hist = fit_classifier(m, (z,), y, FitConfig(epochs=12, lr=2e-2, batch_size=16), seed=0)
        return hist, accuracy(m, (z,), y)

    h1, a1 = run()
    h2, a2 = run()
    assert h1 == h2 and a1 == a2
    assert h1[-1] < h1[0] and a1 > 0.85
    with pytest.raises(ValueError, match="samples"):
        fit_classifier(SequenceTransformer(1, 2, d_model=8, n_heads=2), (torch.zeros(3, 2, 1),), y,
                       FitConfig(epochs=1), seed=0)
    with pytest.raises(ValueError, match="FitConfig"):
        FitConfig(epochs=0)


def test_seconds_per_epoch_counts_feature_time():
    ticks = iter([0.0, 5.0, 5.0, 6.0])                # features take 5 s, 2 of 4 steps take 1 s
    m = SequenceTransformer(1, 2, d_model=8, n_heads=2, n_layers=1)
    y = torch.zeros(8, dtype=torch.long)
    s = seconds_per_epoch(lambda: (torch.zeros(8, 3, 1),), m, y, batch_size=2, max_steps=2,
                          clock=lambda: next(ticks))
    assert s == pytest.approx(5.0 + 1.0 * 4 / 2)


def test_vanilla_transformer_learns_an_easy_task():
    """The baseline is not broken: it separates series by their mean level within a few epochs."""
    rng = np.random.default_rng(4)
    t = np.sort(rng.uniform(0, 1, (32, 10)), axis=1)
    y = rng.integers(0, 2, 32)
    v = (2.0 * y[:, None] - 1.0 + 0.3 * rng.standard_normal((32, 10)))[..., None]
    torch.manual_seed(0)
    m = SequenceTransformer(2, 2, d_model=8, n_heads=2, n_layers=1, time_encoding=3)
    x, n = vanilla_tokens(t, v)
    m.fit_scaling(x, n)
    fit_classifier(m, (x, n), torch.from_numpy(y), FitConfig(epochs=5, lr=1e-2, batch_size=16), seed=0)
    assert accuracy(m, (x, n), torch.from_numpy(y)) > 0.95
