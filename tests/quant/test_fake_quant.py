"""Fake quantisers and the activation entropy."""
import math

import pytest
import torch

from reprobook.quant.fake_quant import histogram_entropy, quantize_act, quantize_weight, storage_ratio


def test_weight_grid_points_are_fixed_and_error_bounded():
    g = torch.Generator().manual_seed(0)
    W = torch.randn(8, 128, generator=g)
    Q = quantize_weight(W, 4, 64)
    assert torch.equal(quantize_weight(Q, 4, 64), Q)                  # idempotent
    # at most 15 distinct levels per group, error at most half a step
    for r in range(8):
        for s in (0, 64):
            grp, qg = W[r, s:s + 64], Q[r, s:s + 64]
            step = grp.abs().max() / 7
            assert len(torch.unique(qg)) <= 15
            assert (grp - qg).abs().max() <= step / 2 + 1e-6
    # per-row scale (group_size=None) is coarser than groups of 64 on rows with mixed magnitudes
    W2 = W.clone()
    W2[:, :64] *= 20
    assert (quantize_weight(W2, 4, None) - W2)[:, 64:].abs().mean() > \
        (quantize_weight(W2, 4, 64) - W2)[:, 64:].abs().mean()


def test_act_quantiser_levels_clipping_and_errors():
    x = torch.linspace(-1.0, 3.0, 1001)
    q = quantize_act(x, 4, -1.0, 3.0)
    assert len(torch.unique(q)) <= 16
    assert torch.allclose(quantize_act(q, 4, -1.0, 3.0), q)           # grid points are fixed
    assert (q - x).abs().max() <= (4.0 / 15) / 2 + 1e-6
    qc = quantize_act(x, 4, -1.0, 3.0, clip=0.5)     # clipping saturates near [-0.5, 1.5]
    half = (2.0 / 15) / 2                            # the integer zero point shifts the grid < 1/2 step
    assert qc.max() <= 1.5 + half and qc.min() >= -0.5 - half and qc.max() >= 1.5 - half
    assert torch.any(qc == 0)                        # zero is exactly representable
    # per-sample ranges broadcast over leading rows
    X = torch.stack([x, 10 * x]).reshape(2, 1, -1)
    lo = torch.tensor([-1.0, -10.0]).reshape(2, 1, 1)
    hi = torch.tensor([3.0, 30.0]).reshape(2, 1, 1)
    QX = quantize_act(X, 4, lo, hi)
    assert torch.allclose(QX[0, 0], q) and torch.allclose(QX[1, 0], quantize_act(10 * x, 4, -10.0, 30.0))
    with pytest.raises(ValueError, match="clip"):
        quantize_act(x, 4, -1, 3, clip=1.5)
    with pytest.raises(ValueError, match="bits"):
        quantize_act(x, 1, -1, 3)
    with pytest.raises(ValueError, match="lo <= hi"):
        quantize_act(x, 4, 3, -1)


def test_weight_bad_input():
    with pytest.raises(ValueError, match="2-d"):
        quantize_weight(torch.zeros(3), 4)
    with pytest.raises(ValueError, match="group_size"):
        quantize_weight(torch.zeros(2, 10), 4, 64)


def test_histogram_entropy():
    u = torch.linspace(0, 1, 128 * 50)
    assert histogram_entropy(u, 0.0, 1.0, 128) == pytest.approx(math.log(128), abs=1e-3)
    assert histogram_entropy(torch.zeros(100), -1.0, 1.0, 16) == pytest.approx(0.0)
    # an outlier stretching the range concentrates the mass: lower entropy
    g = torch.Generator().manual_seed(1)
    v = torch.randn(5000, generator=g)
    assert histogram_entropy(v, -50, 50) < histogram_entropy(v, -4, 4)
    with pytest.raises(ValueError, match="hi > lo"):
        histogram_entropy(v, 1.0, 1.0)


def test_storage_ratio():
    # 4-bit codes plus a 16-bit scale per 64 weights: 32 / (4 + 0.25)
    assert storage_ratio(384 * 384, 4, 64, 384) == pytest.approx(32 / 4.25)
