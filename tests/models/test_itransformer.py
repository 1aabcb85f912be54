import math

import pytest
import torch

from reprobook.bench.flops import count_flops
from reprobook.models.itransformer import ChannelAttention, itransformer


def test_matches_torch_multihead_attention():
    torch.manual_seed(0)
    a = ChannelAttention(16, 4, dropout=0.0).double().eval()
    ref = torch.nn.MultiheadAttention(16, 4, batch_first=True).double().eval()
    with torch.no_grad():
        ref.in_proj_weight.copy_(torch.cat([a.q.weight, a.k.weight, a.v.weight]))
        ref.in_proj_bias.copy_(torch.cat([a.q.bias, a.k.bias, a.v.bias]))
        ref.out_proj.weight.copy_(a.o.weight)
        ref.out_proj.bias.copy_(a.o.bias)
    x = torch.randn(2, 7, 16, dtype=torch.float64)
    torch.testing.assert_close(a(x), ref(x, x, x, need_weights=False)[0])


def test_equivariance_and_quadratic_flops():
    torch.manual_seed(0)
    m = itransformer(24, 6, d_model=16, d_ff=16).double().eval()
    x = torch.randn(1, 24, 9, dtype=torch.float64)
    p = torch.randperm(9)
    torch.testing.assert_close(m(x[..., p]), m(x)[..., p])
    f = {c: count_flops(m, torch.randn(1, 24, c, dtype=torch.float64)) for c in (256, 512, 1024)}
    # F(C) = a C + b C^2 with b = 4 d per layer (Q K^T and A V, 2 C^2 d each), two layers
    assert f[1024] - 2 * f[512] == 4 * (f[512] - 2 * f[256])
    assert f[1024] - 2 * f[512] == 2 * 4 * 16 * (1024 ** 2 - 2 * 512 ** 2)
    assert math.log(f[1024] / f[512], 2) > 1.3


def test_errors():
    with pytest.raises(ValueError, match="divisible"):
        ChannelAttention(10, 4)
    with pytest.raises(ValueError, match="ChannelAttention expects"):
        ChannelAttention(8, 2)(torch.randn(8))
