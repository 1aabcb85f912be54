import math

import pytest
import torch

from reprobook.ood.scores import msp
from reprobook.ood.weiper import (WeiPerKLD, coordinate_histograms, perturbation_directions,
                                  perturbed_weights, smooth_uniform, symmetric_kl, weiper_logits,
                                  weiper_msp)


def _layer(c=4, d=16, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(c, d, generator=g, dtype=torch.float64),
            torch.randn(c, generator=g, dtype=torch.float64), g)


def test_zero_perturbation_is_msp():
    # delta = 0: every block of perturbed logits is the logits, so WeiPer+MSP is MSP
    W, b, g = _layer()
    z = torch.relu(torch.randn(50, 16, generator=g, dtype=torch.float64))
    dirs = perturbation_directions(4, 16, 30, g)
    t = weiper_logits(z, perturbed_weights(W, 0.0, dirs), b)
    assert t.shape == (50, 30 * 4)
    assert torch.max(torch.abs(weiper_msp(t, 4) - msp(z @ W.T + b))) <= 1e-12
    # and a positive delta changes it
    t2 = weiper_logits(z, perturbed_weights(W, 1.0, dirs), b)
    assert torch.max(torch.abs(weiper_msp(t2, 4) - msp(z @ W.T + b))) > 1e-3


def test_perturbation_lengths_and_layout():
    W, b, g = _layer(3, 10)
    dirs = perturbation_directions(3, 10, 7, g)
    assert torch.allclose(dirs.norm(dim=-1), torch.ones(7, 3, dtype=torch.float64))
    wt = perturbed_weights(W, 2.1, dirs).reshape(7, 3, 10)
    moved = (wt - W[None]).norm(dim=-1)
    assert torch.allclose(moved, 2.1 * W.norm(dim=1)[None].expand(7, 3), rtol=1e-10)
    noise = perturbed_weights(W, 2.1, dirs, class_directions=False).reshape(7, 3, 10)
    assert torch.allclose(noise, wt - W[None])
    # block r, class c of the logits is z . w~_{r,c} + b_c
    z = torch.randn(5, 10, generator=g, dtype=torch.float64)
    t = weiper_logits(z, perturbed_weights(W, 2.1, dirs), b).reshape(5, 7, 3)
    assert torch.allclose(t[:, 4, 1], z @ wt[4, 1] + b[1])


def test_histograms_by_hand():
    v = torch.tensor([[0.05, 0.15, 0.15, 0.95, 1.5, -0.2]], dtype=torch.float64)
    h = coordinate_histograms(v, 0.0, 1.0, 10)
    want = torch.zeros(1, 10, dtype=torch.float64)
    want[0, 0], want[0, 1], want[0, 9] = 1 / 6, 2 / 6, 1 / 6      # 1.5 and -0.2 overflow
    assert torch.allclose(h, want)
    x = torch.rand(20, 33, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    assert torch.allclose(coordinate_histograms(x, 0.0, 1.0, 7).sum(1), torch.ones(20,
                                                                                   dtype=torch.float64))


def test_smoothing_matches_conv_and_keeps_mass():
    g = torch.Generator().manual_seed(2)
    p = torch.rand(3, 25, generator=g, dtype=torch.float64)
    for w in (1, 4, 5, 20):
        s = smooth_uniform(p, w)
        assert s.shape == p.shape
        # torch's Conv1d with padding='same', replicate padding and a flat kernel
        conv = torch.nn.Conv1d(1, 1, w, padding="same", padding_mode="replicate", bias=False,
                               dtype=torch.float64)
        with torch.no_grad():
            conv.weight.fill_(1.0 / w)
            ref = conv(p[:, None])[:, 0]
        assert torch.allclose(s, ref)
    # a constant density stays constant; the smoothed, eps-renormalised density sums to 1
    assert torch.allclose(smooth_uniform(torch.full((1, 9), 0.2, dtype=torch.float64), 4),
                          torch.full((1, 9), 0.2, dtype=torch.float64))


def test_symmetric_kl():
    p = torch.tensor([0.2, 0.3, 0.5], dtype=torch.float64)
    q = torch.tensor([[0.4, 0.4, 0.2], [0.2, 0.3, 0.5]], dtype=torch.float64)
    want = sum(p[i] * math.log(p[i] / q[0, i]) + q[0, i] * math.log(q[0, i] / p[i])
               for i in range(3))
    kl = symmetric_kl(p, q)
    assert kl[0] == pytest.approx(float(want)) and kl[1] == 0.0 and (kl >= 0).all()
    with pytest.raises(ValueError, match="strictly positive"):
        symmetric_kl(p, torch.tensor([0.0, 0.5, 0.5], dtype=torch.float64))


def test_weiper_kld_end_to_end():
    W, b, g = _layer(3, 12)
    train = torch.relu(torch.randn(200, 12, generator=g, dtype=torch.float64))
    dirs = perturbation_directions(3, 12, 20, g)
    wk = WeiPerKLD(W, b, dirs, n_bins=30, smoothing=3, smoothing_perturbed=3).fit(train)
    parts = wk.components(train[:50])
    assert set(parts) == {"kl_latent", "kl_weiper", "msp_weiper"}
    assert all(v.shape == (50,) for v in parts.values())
    assert (parts["kl_latent"] > 0).all() and (parts["kl_weiper"] > 0).all()
    assert torch.allclose(wk.score(train[:50]), -(parts["kl_latent"] + parts["kl_weiper"]
                                                  - parts["msp_weiper"]))
    # inputs far outside the training features' shape score lower than training inputs
    far = 10.0 * torch.rand(50, 12, generator=g, dtype=torch.float64)
    assert wk.score(far).mean() < wk.score(train[:50]).mean()


def test_weiper_rejects_bad_input():
    W, b, g = _layer(3, 12)
    dirs = perturbation_directions(3, 12, 5, g)
    with pytest.raises(ValueError, match="directions"):
        perturbed_weights(W, 1.0, perturbation_directions(3, 11, 5, g))
    with pytest.raises(ValueError, match="delta"):
        perturbed_weights(W, -1.0, dirs)
    with pytest.raises(RuntimeError, match="fit"):
        WeiPerKLD(W, b, dirs).score(torch.zeros(2, 12, dtype=torch.float64))
    with pytest.raises(ValueError, match="repeats"):
        weiper_msp(torch.zeros(2, 7), 3)
    with pytest.raises(TypeError, match="Generator"):
        perturbation_directions(3, 12, 5, 0)
