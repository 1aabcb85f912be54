"""The einsum family of structured linear layers: sizes, identities with textbook forms, ranks,
parameter and FLOP formulas, μP init, the mixture of experts and the FFN block."""
import math

import pytest
import torch

from reprobook.bench.flops import count_flops
from reprobook.models.structured_linear import (STRUCTURES, EinsumLinear, EinsumMoE, EinsumSizes,
                                                StructuredMLP, materialize, sizes_from_theta,
                                                taxonomy)
from reprobook.models.tiny_transformer import TinyTransformer


def layer(name, d=16, rank=None, seed=0, **kw):
    torch.manual_seed(seed)
    return EinsumLinear(d, d, name, rank=rank, **kw)


def test_sizes_of_named_structures():
    assert sizes_from_theta(64, 64, "btt").as_dict() == dict(a=8, b=1, c=8, d=1, e=8, f=8, r=1)
    assert sizes_from_theta(64, 64, "kronecker").as_dict() == dict(a=8, b=8, c=1, d=8, e=8, f=1, r=1)
    assert sizes_from_theta(64, 64, "dense").as_dict() == dict(a=64, b=1, c=1, d=64, e=1, f=1, r=1)
    assert sizes_from_theta(64, 64, "low-rank-btt").as_dict() == dict(a=16, b=1, c=4, d=1, e=16, f=4, r=1)
    assert sizes_from_theta(64, 64, "low-rank", rank=5).r == 5
    s = sizes_from_theta(32, 300, "btt")          # non-square widths still split exactly, b = d = 1
    assert (s.d_in, s.d_out, s.b, s.d) == (32, 300, 1, 1)


@pytest.mark.parametrize("bad, match", [
    (dict(theta=(0.5, 0.5, 0.5, 1, 0, 0, 0)), "α\\+β\\+γ"),
    (dict(theta="nope"), "unknown structure"),
    (dict(theta="low-rank"), "rank is free"),
    (dict(theta="btt", rank=3), "fixes its rank"),
    (dict(theta=(1, 0, 0, 1, 0, 0)), "7 exponents"),
])
def test_bad_theta(bad, match):
    with pytest.raises(ValueError, match=match):
        sizes_from_theta(16, 16, bad.pop("theta"), **bad)


def test_bad_input_shape():
    with pytest.raises(ValueError, match="expected inputs"):
        layer("btt")(torch.randn(3, 17))


def test_kronecker_equals_torch_kron():
    L = layer("kronecker", 16, mup=False).double()
    A, B = L.factors()
    K = torch.kron(A[:, 0, :, 0, 0].T, B[:, 0, :, 0, 0].T)
    assert torch.allclose(materialize(L), K, atol=1e-12)
    # and the layer itself computes W x
    x = torch.randn(5, 16, dtype=torch.float64)
    assert torch.allclose(L(x), x @ K.T, atol=1e-12)


def test_low_rank_and_dense_closed_forms():
    L = layer("low-rank", 16, rank=3).double()
    A, B = L.factors()
    assert torch.allclose(materialize(L), B[0, 0, :, 0, :] @ A[:, 0, 0, 0, :].T, atol=1e-12)
    D = layer("dense", 16).double()
    assert torch.allclose(materialize(D), D.factors()[0][:, 0, :, 0, 0].T, atol=1e-12)


def test_btt_is_two_block_diagonal_factors():
    """y_{ef} = sum_c B_{cef} sum_a A_{acf} x_{ac}: checked against explicit loops."""
    L = layer("btt", 16).double()
    A, B = (t[:, :, 0, :, 0] if t.shape[0] > 1 else t for t in L.factors())
    A = L.factors()[0][:, :, 0, :, 0]         # [a, c, f]
    B = L.factors()[1][0, :, :, :, 0]         # [c, e, f]
    x = torch.randn(16, dtype=torch.float64)
    X = x.view(4, 4)                          # (a, c)
    y = torch.zeros(4, 4, dtype=torch.float64)   # (e, f)
    for e in range(4):
        for f in range(4):
            y[e, f] = sum(B[c, e, f] * sum(A[a, c, f] * X[a, c] for a in range(4)) for c in range(4))
    assert torch.allclose(L(x[None])[0], y.reshape(-1), atol=1e-12)


@pytest.mark.parametrize("name, rank, expected", [
    ("dense", None, 16), ("btt", None, 16), ("kronecker", None, 16), ("tt", 2, 16),
    ("low-rank", 2, 2)])
def test_ranks(name, rank, expected):
    assert int(torch.linalg.matrix_rank(materialize(layer(name, 16, rank=rank)))) == expected


def test_low_rank_btt_rank():
    W = materialize(layer("low-rank-btt", 64))
    assert int(torch.linalg.matrix_rank(W)) == 16


def test_taxonomy_of_named_points():
    assert taxonomy(STRUCTURES["dense"]) == pytest.approx({"omega": 0, "psi": 1, "nu": 1})
    assert taxonomy(STRUCTURES["btt"]) == pytest.approx({"omega": 0, "psi": 1, "nu": 0.5})
    assert taxonomy(STRUCTURES["kronecker"]) == pytest.approx({"omega": 0.5, "psi": 1, "nu": 0.5})
    assert taxonomy((1, 0, 0, 0, 1, 0, 0.25)) == pytest.approx({"omega": 0, "psi": 0.25, "nu": 0.25})


@pytest.mark.parametrize("theta, rank", [("dense", None), ("btt", None), ("kronecker", None),
                                         ("tt", 3), ("low-rank", 4),
                                         ((1 / 3, 1 / 3, 1 / 3, 1 / 3, 1 / 3, 1 / 3, 0), None),
                                         ((0, 0.5, 0.5, 0.5, 0, 0.5, 1 / 6), None)])
def test_params_and_flops_match_counter(theta, rank):
    torch.manual_seed(0)
    L = EinsumLinear(64, 64, theta, rank=rank)
    assert sum(p.numel() for p in L.parameters()) == L.num_params()
    x = torch.randn(5, 64)
    assert count_flops(lambda: L(x)) == 5 * L.flops()


def test_dense_formula_counts_d_squared():
    L = layer("dense", 16)
    assert L.num_params() == 256 and L.flops() == 2 * 256
    assert EinsumSizes(4, 1, 4, 1, 4, 4, 1).flops() == 2 * (64 + 64)


def test_init_is_dense_like_and_mup_multipliers():
    for name, rank in [("dense", None), ("btt", None), ("kronecker", None), ("low-rank", 16)]:
        torch.manual_seed(1)
        L = EinsumLinear(256, 256, name, rank=rank)
        v = float(materialize(L).var() * 256)
        assert 0.8 < v < 1.25, (name, v)
    L = layer("btt", 64)
    assert L.mult_a == 64 / 8 and L.mult_b == 64 / 8
    assert layer("dense", 64).mult_a == 1.0


def test_moe_dispatch_modes_agree_and_match_naive():
    torch.manual_seed(0)
    m = EinsumMoE(16, 36, "btt", n_experts=4, top_k=2, router_std=1.0).double()
    x = torch.randn(30, 16, dtype=torch.float64)
    y_pad = m(x)
    m.dispatch = "loop"
    y_loop = m(x)
    assert torch.allclose(y_pad, y_loop, atol=1e-12)
    p = torch.softmax(x @ m.router.weight.T, -1)
    g, idx = p.topk(2, -1)
    g = g / g.sum(-1, keepdim=True)
    naive = torch.stack([sum(g[n, j] * m.expert(int(idx[n, j]), x[n:n + 1])[0] for j in range(2))
                         for n in range(30)])
    assert torch.allclose(y_loop, naive, atol=1e-12)
    assert m.aux_loss is not None and m.last_assignments.shape == (30, 2)


def test_moe_flops_formula_loop_dispatch():
    torch.manual_seed(0)
    m = EinsumMoE(64, 144, "btt", n_experts=4)
    m.dispatch = "loop"
    x = torch.randn(40, 64)
    assert count_flops(lambda: m(x)) == 40 * m.active_flops()
    assert sum(p.numel() for p in m.parameters()) == m.num_params()


def test_moe_rejects_trivial_factor():
    with pytest.raises(ValueError, match="two non-trivial factors"):
        EinsumMoE(16, 16, "dense")


def test_structured_mlp_in_transformer_and_gradients():
    torch.manual_seed(0)
    model = TinyTransformer(20, d_model=16, n_layers=1, n_heads=2, max_len=8, ffn="structured",
                            ffn_options={"structure": "btt", "n_experts": 4, "hidden": 36})
    tok = torch.randint(20, (2, 8))
    out = model(tok)
    loss = out.square().mean() + 0.01 * model.aux_loss()
    loss.backward()
    ffn = model.ffns[0]
    assert ffn.fc_in.A.grad is not None and ffn.fc_out.B.grad.abs().sum() > 0
    assert float(model.aux_loss().detach()) > 0
    plain = StructuredMLP(16, 36, "btt")
    assert plain.aux_loss is None and plain(torch.randn(3, 16)).shape == (3, 16)
    assert math.isfinite(float(out.detach().sum()))
