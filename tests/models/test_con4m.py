import numpy as np
import pytest
import torch

from reprobook import rng
from reprobook.models.con4m import (ContextLayer, LabelHarmoniser, con4m, consistent_probs,
                                    context_classifier, contextual_prediction,
                                    gaussian_kernel_attention, iid_classifier, tanh_fit)


def test_gaussian_attention_rows_sum_to_one_and_bandwidth_acts():
    L = 9
    v = torch.randn(2, 3, L, 4, dtype=torch.float64)
    narrow, wide = torch.full((2, 3, L), np.log(0.7)), torch.full((2, 3, L), np.log(3.0))
    _, wn = gaussian_kernel_attention(narrow.double(), v)
    _, ww = gaussian_kernel_attention(wide.double(), v)
    assert torch.allclose(wn.sum(-1), torch.ones(2, 3, L, dtype=torch.float64))
    # a larger sigma spreads the weights: lower peak weight (on the diagonal)
    assert (ww.diagonal(dim1=-2, dim2=-1) < wn.diagonal(dim1=-2, dim2=-1)).all()
    # against a brute-force Gaussian kernel
    i = 4
    k = np.exp(-(np.arange(L) - i) ** 2 / (2 * 3.0 ** 2))
    assert np.allclose(ww[0, 0, i].numpy(), k / k.sum())
    with pytest.raises(ValueError, match="log_sigma"):
        gaussian_kernel_attention(narrow[0], v)


def test_context_layer_gate_is_a_convex_mix():
    torch.manual_seed(0)
    layer = ContextLayer(8, 5, n_heads=2, gaussian=True).eval()
    layer(torch.randn(3, 5, 8))
    g = layer.last_gate
    assert g.shape == (3, 5, 2) and torch.allclose(g.sum(-1), torch.ones(3, 5))
    with pytest.raises(ValueError, match="ContextLayer expects"):
        layer(torch.randn(3, 4, 8))


def test_models_shapes_and_window_independence_of_iid():
    torch.manual_seed(0)
    x = torch.randn(2, 6, 3, 16)
    for make in (iid_classifier, context_classifier, con4m):
        m = make(3, 16, 6, 4, d=8).eval()
        logits, pair = m(x)
        assert logits.shape == (2, 6, 4)
        assert (pair is None) == (make is not con4m)
        if pair is not None:
            assert pair.shape == (2, 6, 6, 2)
    # the iid model classifies each window alone: changing window 0 leaves window 5's logits alone;
    # a context model's change
    y = x.clone()
    y[:, 0] += 5
    iid, ctx = iid_classifier(3, 16, 6, 4, d=8).eval(), context_classifier(3, 16, 6, 4, d=8).eval()
    assert torch.allclose(iid(x)[0][:, 5], iid(y)[0][:, 5])
    assert not torch.allclose(ctx(x)[0][:, 5], ctx(y)[0][:, 5])
    with pytest.raises(ValueError, match="group batch"):
        iid(x[:, :4])


def test_contextual_prediction_is_a_weighted_average():
    p = torch.tensor([[[1.0, 0.0], [0.0, 1.0], [0.0, 1.0]]])
    q = torch.tensor([[[1.0, 0.0, 0.0], [0.0, 1.0, 1.0], [0.0, 1.0, 1.0]]])
    assert torch.allclose(contextual_prediction(p, q), p)
    q = torch.ones(1, 3, 3)                                      # everyone the same class
    assert torch.allclose(contextual_prediction(p, q), torch.tensor([1 / 3, 2 / 3]).expand(1, 3, 2))


def test_tanh_fit_locates_a_noisy_step():
    r = rng(0)
    n = 10
    for at in range(2, 9):
        y = np.where(np.arange(n) >= at, 1.0, -1.0)
        y = np.stack([y, -y]) + 0.3 * r.standard_normal((2, n))
        fit, P = tanh_fit(y)
        # the fitted centre x = -c lies between windows at-1 and at (x = i - n//2), within 1
        centre = -P[:, 2] + n // 2
        assert np.all(np.abs(centre - (at - 0.5)) <= 1.0), (at, centre)
        assert np.abs(fit - y).mean() < 0.35
    with pytest.raises(ValueError, match="tanh_fit"):
        tanh_fit(np.zeros(4))


def test_consistent_probs_smooths_one_outlier():
    p = torch.full((1, 10, 2), 0.05)
    p[0, :5, 0] = p[0, 5:, 1] = 0.95
    p[0, 2] = torch.tensor([0.3, 0.7])                            # one window flipped
    c = consistent_probs(p)
    assert torch.allclose(c.sum(-1), torch.ones(1, 10))
    assert (c[0].argmax(-1) == torch.tensor([0] * 5 + [1] * 5)).all()


def test_harmoniser_eta_zero_keeps_labels_and_eta_one_follows_predictions():
    y = np.array([[0, 0, 1, 1], [2, 2, 2, 1]])
    h = LabelHarmoniser(y, 3)
    pred = torch.nn.functional.one_hot(torch.tensor([[0, 1, 1, 1], [2, 2, 1, 1]]), 3).double()
    h.propose([0, 1], pred, pred, eta=0.0)
    assert h.commit() == 0 and np.array_equal(h.current.numpy(), y)
    # eta = 1 for several epochs: the history fills with the predictions and the labels follow
    for _ in range(5):
        h.propose([0, 1], pred, pred, eta=1.0)
        h.commit()
    assert np.array_equal(h.current.numpy(), pred.argmax(-1).numpy())
    # random mode: as many changes, elsewhere
    g = LabelHarmoniser(y, 3, mode="random", rng=rng(0))
    for _ in range(5):
        g.propose([0, 1], pred, pred, eta=1.0)
    assert g.commit() == int((pred.argmax(-1).numpy() != y).sum())
    with pytest.raises(ValueError, match="mode"):
        LabelHarmoniser(y, 3, mode="oracle")
    with pytest.raises(ValueError, match="eta"):
        h.propose([0], pred[:1], pred[:1], eta=2.0)
