import pytest
import torch

from reprobook.models.gfsa import GraphFilterAttention, exact_filter, gfsa_apply, gfsa_matrix


def _att(B=2, H=3, n=7, seed=0, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    return torch.softmax(torch.randn(B, H, n, n, generator=g, dtype=dtype) * 2, dim=-1)


def test_init_weights_give_softmax_attention():
    att = _att()
    f = gfsa_matrix(att, 0.0, 1.0, 0.0, K=3)
    assert torch.allclose(f, att, atol=0, rtol=0)


def test_taylor_is_exact_for_K2_and_not_for_K3():
    att = _att()
    w = torch.tensor([0.3, -0.2, 0.5], dtype=torch.float64)
    assert (gfsa_matrix(att, w, 1 - w, -w, 2) - exact_filter(att, w, 1 - w, -w, 2)).abs().max() < 1e-12
    assert (gfsa_matrix(att, 0, 0, 1, 3) - exact_filter(att, 0, 0, 1, 3)).abs().max() > 1e-3


def test_value_side_equals_matrix_form():
    att = _att()
    v = torch.randn(2, 3, 7, 5, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    w0, w1, wK = (torch.tensor(x, dtype=torch.float64) for x in ([0.1, 0.2, -0.3], [1., .5, .9],
                                                                    [-.4, .7, .2]))
    for K in (1, 2, 3, 5):
        ref = gfsa_matrix(att, w0, w1, wK, K) @ v
        assert (gfsa_apply(att, v, w0, w1, wK, K) - ref).abs().max() < 1e-12


def test_filter_rows_sum_to_w0_plus_w1_plus_wK():
    # A 1 = 1 for a row-stochastic A, so GF(A) 1 = (w0 + w1 + wK) 1 for every K
    att = _att()
    f = gfsa_matrix(att, 0.2, 0.7, -0.5, 4)
    assert torch.allclose(f.sum(-1), torch.full_like(f.sum(-1), 0.4), atol=1e-12)


@pytest.mark.parametrize("impl", ["explicit", "matrix", "sdpa"])
def test_layer_impls_agree_and_fresh_gfsa_is_softmax(impl):
    torch.manual_seed(0)
    x = torch.randn(2, 6, 16)
    base = GraphFilterAttention(16, 4, filter="softmax")
    layer = GraphFilterAttention(16, 4, filter="gfsa", K=3, impl=impl)
    layer.load_state_dict(base.state_dict(), strict=False)
    assert torch.allclose(layer(x), base(x), atol=1e-5)
    with torch.no_grad():
        layer.w0.copy_(torch.tensor([0.5, -0.1, 0.2, 0.0]))
        layer.wK.copy_(torch.tensor([-0.3, 0.4, 0.1, 0.6]))
    ref = GraphFilterAttention(16, 4, filter="gfsa", K=3, impl="matrix")
    ref.load_state_dict(layer.state_dict())
    assert torch.allclose(layer(x), ref(x), atol=1e-5)
    assert not torch.allclose(layer(x), base(x), atol=1e-3)


def test_learn_flags_and_identity_filter():
    layer = GraphFilterAttention(8, 2, filter="gfsa", learn=("wK",))
    assert [n for n, p in layer.named_parameters() if p.requires_grad and n.startswith("w")] == ["wK"]
    ident = GraphFilterAttention(8, 2, filter="identity")
    x = torch.randn(1, 5, 8)
    # no token mixing: permuting the tokens permutes the output
    perm = torch.tensor([4, 2, 0, 1, 3])
    assert torch.allclose(ident(x)[:, perm], ident(x[:, perm]), atol=1e-6)
    soft = GraphFilterAttention(8, 2, filter="softmax", keep_attention=True)
    soft(x)
    assert soft.attention.shape == (1, 2, 5, 5)
    assert torch.allclose(soft.attention.sum(-1), torch.ones(1, 2, 5))


def test_gradients_reach_filter_weights():
    layer = GraphFilterAttention(8, 2, filter="gfsa")
    layer(torch.randn(2, 5, 8)).pow(2).sum().backward()
    assert layer.wK.grad is not None and layer.wK.grad.abs().sum() > 0


def test_bad_input():
    with pytest.raises(ValueError, match="filter"):
        GraphFilterAttention(8, 2, filter="cheb")
    with pytest.raises(ValueError, match="impl"):
        GraphFilterAttention(8, 2, impl="flash")
    with pytest.raises(ValueError, match="divisible"):
        GraphFilterAttention(9, 2)
    with pytest.raises(ValueError, match="K must"):
        gfsa_matrix(_att(), 0, 1, 0, K=0)
    with pytest.raises(ValueError, match="square"):
        gfsa_matrix(torch.zeros(2, 3, 4), 0, 1, 0, K=2)
    with pytest.raises(ValueError, match="per-head"):
        gfsa_matrix(_att(H=3), torch.zeros(2), 1, 0, K=2)
    with pytest.raises(ValueError, match="keep_attention"):
        GraphFilterAttention(8, 2, impl="sdpa", keep_attention=True)
    with pytest.raises(ValueError, match="x must"):
        GraphFilterAttention(8, 2)(torch.zeros(2, 5, 6))


def test_filter_matrix_reproduces_the_layer_output():
    torch.manual_seed(0)
    for filt in ("softmax", "gfsa", "identity"):
        layer = GraphFilterAttention(8, 2, filter=filt, keep_attention=True)
        if filt == "gfsa":
            with torch.no_grad():
                layer.w0.fill_(0.3)
                layer.wK.fill_(-0.2)
        x = torch.randn(3, 5, 8)
        out = layer(x)
        o = layer.filter_matrix() @ layer.values(x)
        assert torch.allclose(layer.proj(o.transpose(1, 2).reshape(3, 5, 8)), out, atol=1e-5)
    with pytest.raises(ValueError, match="keep_attention"):
        GraphFilterAttention(8, 2).filter_matrix()
