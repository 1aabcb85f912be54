import math

import pytest
import torch

from reprobook.kernels.selective_scan import selective_scan
from reprobook.vision.style_perturb import (StylePerturbation, attention_saliency, implicit_attention,
                                            input_saliency, standardized_gap, style_mix, top_mask)


def _scan_inputs(seed=0, Bsz=2, D=3, N=4, L=9):
    g = torch.Generator().manual_seed(seed)
    u = torch.randn(Bsz, D, L, generator=g, dtype=torch.float64)
    delta = torch.nn.functional.softplus(torch.randn(Bsz, D, L, generator=g, dtype=torch.float64))
    A = -torch.rand(D, N, generator=g, dtype=torch.float64) * 2 - 0.1
    B = torch.randn(Bsz, N, L, generator=g, dtype=torch.float64)
    C = torch.randn(Bsz, N, L, generator=g, dtype=torch.float64)
    Dskip = torch.randn(D, generator=g, dtype=torch.float64)
    return u, delta, A, B, C, Dskip


def test_implicit_attention_reproduces_the_scan():
    u, delta, A, B, C, Dskip = _scan_inputs()
    y = selective_scan(u, delta, A, B, C, Dskip, impl="reference")
    alpha = implicit_attention(delta, A, B, C)   # [B, D, L, L]
    assert torch.all(alpha.triu(1) == 0)                                 # causal
    y_attn = torch.einsum("bdts,bds->bdt", alpha, u) + Dskip[:, None] * u
    assert (y - y_attn).abs().max() < 1e-10


def test_saliency_is_the_attention_column_sum():
    u, delta, A, B, C, _ = _scan_inputs(1)
    alpha = implicit_attention(delta, A, B, C)
    want = alpha.sum(-2).abs().sum(-2)                                   # sum_d |sum_t alpha|
    got = attention_saliency(delta, A, B, C)
    assert (want - got).abs().max() < 1e-9
    assert input_saliency(delta, u).shape == (2, 9)


def test_top_mask_counts():
    s = torch.randn(3, 2, 16)
    for r in (0.1, 0.5, 1.0):
        assert (top_mask(s, r).sum(-1) == math.ceil(r * 16)).all()
    m = top_mask(torch.arange(4.0), 0.5)
    assert m.tolist() == [False, False, True, True]
    with pytest.raises(ValueError):
        top_mask(s, 0.0)


def test_style_mix():
    g = torch.Generator().manual_seed(0)
    u = torch.randn(4, 2, 5, 8, generator=g) * 3 + 1
    mask = torch.ones(4, 2, 1, 8, dtype=torch.bool)
    perm = torch.tensor([1, 0, 3, 2])
    # lambda = 1 keeps every token (own style)
    assert torch.allclose(style_mix(u, mask, perm, torch.ones(4)), u, atol=1e-5)
    # lambda = 0 gives the partner's statistics, the own normalised content
    v = style_mix(u, mask, perm, torch.zeros(4))
    assert torch.allclose(v.mean(-1), u[perm].mean(-1), atol=1e-4)
    assert torch.allclose(v.std(-1), u[perm].std(-1), atol=1e-3)
    # the content (each channel's standardised sequence) is the sample's own
    z = lambda t: (t - t.mean(-1, keepdim=True)) / t.std(-1, keepdim=True)
    assert torch.allclose(z(v), z(u), atol=1e-3)
    # only masked tokens change
    half = torch.zeros(4, 2, 1, 8, dtype=torch.bool)
    half[..., :3] = True
    w = style_mix(u, half, perm, torch.zeros(4))
    assert torch.equal(w[..., 3:], u[..., 3:]) and not torch.allclose(w[..., :3], u[..., :3])


def test_perturbation_modes_and_seed():
    g = torch.Generator().manual_seed(0)
    Bsz, K, D, N, L = 4, 2, 3, 2, 8
    u = torch.randn(Bsz, K, D, L, generator=g)
    params = {"delta": torch.rand(Bsz, K, D, L, generator=g), "A": -torch.rand(K, D, N, generator=g),
              "B": torch.randn(Bsz, K, N, L, generator=g), "C": torch.randn(Bsz, K, N, L, generator=g)}
    for mode in ("mixstyle", "start-m", "start-x", "random"):
        a = StylePerturbation(mode, p=1.0, seed=3)(u, params)
        b = StylePerturbation(mode, p=1.0, seed=3)(u, params)
        assert torch.equal(a, b)
        changed = (a != u).any(-2)                                       # [B, K, L]
        assert changed.sum(-1).max() <= (L if mode == "mixstyle" else L // 2)
    off = StylePerturbation("start-m", p=0.0)
    assert off(u, params) is u
    with pytest.raises(ValueError, match="unknown mode"):
        StylePerturbation("dsu")


def test_standardized_gap():
    g = torch.Generator().manual_seed(0)
    a = torch.randn(500, 3, generator=g)
    assert standardized_gap(a, a) == 0.0
    assert abs(standardized_gap(a, a + 1.0) - 1.0) < 0.1
    with pytest.raises(ValueError):
        standardized_gap(a, torch.randn(5, 2))
