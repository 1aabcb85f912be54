"""FLOP counting through torch's FlopCounterMode, including CPU attention."""
import pytest
import torch
import torch.nn.functional as F

from reprobook.bench.flops import count_flops, flops_by_module, flops_per_token
from reprobook.models.ffn import MLP


def test_matmul_is_two_m_n_k():
    a, b = torch.randn(3, 5), torch.randn(5, 7)
    assert count_flops(torch.mm, a, b) == 2 * 3 * 5 * 7


def test_cpu_attention_is_counted():
    B, H, T, d = 2, 3, 8, 4
    q = torch.randn(B, H, T, d, requires_grad=True)
    fwd = count_flops(lambda: F.scaled_dot_product_attention(q, q, q, is_causal=True))
    assert fwd == 4 * B * H * T * T * d
    both = count_flops(lambda: F.scaled_dot_product_attention(q, q, q, is_causal=True).sum().backward())
    assert both > 2 * fwd


def test_flops_per_token_of_a_dense_ffn():
    mlp = MLP(16, 40).double()
    assert flops_per_token(mlp, 16, n_tokens=10) == 2 * 2 * 16 * 40
    fb = flops_per_token(mlp, 16, n_tokens=10, backward=True)
    assert fb == pytest.approx(5 * 2 * 16 * 40)   # 2 forward products; 3 backward (no input grad)
    assert all(p.grad is None for p in mlp.parameters())


def test_flops_by_module_and_errors():
    mlp = MLP(8, 8)
    by = flops_by_module(mlp, torch.randn(4, 8))
    assert by["Global"] == 2 * 2 * 4 * 8 * 8
    with pytest.raises(TypeError):
        count_flops(3)
    with pytest.raises(ValueError):
        flops_per_token(mlp, 8, n_tokens=0)
