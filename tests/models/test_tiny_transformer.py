"""TinyTransformer: shapes, causality, rotary, nested FFNs and exact submodel extraction."""
import pytest
import torch

from reprobook.models.ffn import MLP, NestedMLP
from reprobook.models.tiny_transformer import TinyTransformer, extract_submodel, rotary, to_nested


def tiny(**kw):
    torch.manual_seed(0)
    base = dict(vocab_size=30, d_model=16, n_layers=2, n_heads=2, max_len=24)
    base.update(kw)
    return TinyTransformer(**base).double()


@pytest.mark.parametrize("pos", ["learned", "rotary", "none"])
@pytest.mark.parametrize("ffn", ["mlp", "nested", "moe", "mh-moe"])
def test_shapes_and_causality(pos, ffn):
    opts = {"mh-moe": {"heads": 4, "n_experts": 3, "hidden": 8}, "moe": {"n_experts": 3}}.get(ffn)
    model = tiny(pos=pos, ffn=ffn, ffn_options=opts)
    x = torch.randint(0, 30, (2, 20))
    y = model(x)
    assert y.shape == (2, 20, 30)
    x2 = x.clone()
    x2[:, 12:] = (x2[:, 12:] + 7) % 30
    y2 = model(x2)
    assert torch.allclose(y2[:, :12], y[:, :12], atol=1e-12)
    assert not torch.allclose(y2[:, 12:], y[:, 12:])


def test_linear_lm_mixers_plug_in_as_attention():
    model = tiny(attention="deltanet", pos="learned")
    assert model(torch.randint(0, 30, (2, 10))).shape == (2, 10, 30)
    with pytest.raises(ValueError, match="rotary"):
        tiny(attention="deltanet", pos="rotary")


def test_rotary_scores_depend_on_relative_position_only():
    g = torch.Generator().manual_seed(0)
    q, k = torch.randn(8, generator=g, dtype=torch.float64), torch.randn(8, generator=g, dtype=torch.float64)
    T = 12
    Q = rotary(q.expand(1, 1, T, 8).clone())[0, 0]
    K = rotary(k.expand(1, 1, T, 8).clone())[0, 0]
    S = Q @ K.T
    for off in (0, 1, 5):
        diag = torch.diagonal(S, offset=off)
        assert torch.allclose(diag, diag[0].expand_as(diag), atol=1e-12)
    assert torch.allclose(Q.norm(dim=-1), q.norm().expand(T), atol=1e-12)


def test_nested_ffn_width_equals_its_extracted_mlp():
    torch.manual_seed(0)
    f = NestedMLP(6, 16).double()
    torch.nn.init.normal_(f.fc_out.bias)
    x = torch.randn(5, 6, dtype=torch.float64)
    for m in f.widths + [5]:
        mlp = f.extract(m)
        assert isinstance(mlp, MLP) and mlp.fc_in.out_features == m
        assert (f(x, width=m) - mlp(x)).abs().max() < 1e-12      # rounding order only
    full = MLP(6, 16).double()
    full.load_state_dict(f.state_dict())
    assert torch.equal(f(x), full(x))
    with pytest.raises(ValueError):
        f(x, width=17)
    with pytest.raises(ValueError, match="increase"):
        NestedMLP(6, 16, widths=[8, 4, 16])


@pytest.mark.parametrize("widths", [4, 32, [8, 16], [32, 4]])
def test_extracted_submodel_equals_the_nested_model_at_those_widths(widths):
    model = tiny(ffn="nested", ffn_options={"hidden": 32}, pos="rotary", tie_embeddings=True)
    for p in model.parameters():            # float64 values no float32 could hold
        p.data.add_(1e-9 * torch.randn_like(p))
    x = torch.randint(0, 30, (3, 17))
    model.set_ffn_width(widths)
    sub = extract_submodel(model, widths)
    assert all(isinstance(f, MLP) for f in sub.ffns)
    assert (sub(x) - model(x)).abs().max().item() < 1e-12
    assert sub.num_parameters() == model.num_parameters(widths)
    model.set_ffn_width(32)
    assert model.ffn_widths() == [32, 32]


def test_aux_loss_sums_routed_layers():
    model = tiny(ffn=["moe", "mh-moe"], ffn_options=[{"n_experts": 3}, {"heads": 2, "n_experts": 3}])
    model(torch.randint(0, 30, (2, 6)))
    assert torch.allclose(model.aux_loss(), model.ffns[0].aux_loss + model.ffns[1].aux_loss)
    assert tiny().aux_loss().item() == 0.0


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="pos"):
        tiny(pos="alibi")
    with pytest.raises(ValueError, match="unknown ffn"):
        tiny(ffn="dense")
    with pytest.raises(ValueError, match="entries"):
        tiny(ffn=["mlp"])
    with pytest.raises(ValueError, match="max_len"):
        tiny()(torch.randint(0, 30, (1, 25)))
    with pytest.raises(ValueError, match="integer"):
        tiny()(torch.randn(1, 4))
    with pytest.raises(ValueError, match="nested"):
        tiny().set_ffn_width(4)
    with pytest.raises(ValueError, match="nested"):
        extract_submodel(tiny(), 4)


def test_to_nested_keeps_the_function_and_allows_slicing():
    dense = tiny(ffn_options={"hidden": 32})
    x = torch.randint(0, 30, (2, 9))
    nested = to_nested(dense)
    assert all(isinstance(f, NestedMLP) for f in nested.ffns)
    assert torch.equal(nested(x), dense(x))
    sub = extract_submodel(nested, [4, 8])
    assert sub(x).shape == (2, 9, 30)
    with pytest.raises(ValueError, match="dense"):
        to_nested(tiny(ffn="nested", ffn_options={"hidden": 32}))
