"""Scale-equivariant building blocks: the invariance and equivariance laws, and what breaks them."""
import pytest
import torch

from reprobook.models.scale_equivariant import (Canonicalizer, InvariantMap, PairMLP,
                                                ScaleEquivariantLayer, mlp)


def _x(shape=(5, 7, 6)):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(0), dtype=torch.float64)


def _scales(shape, symmetry):
    g = torch.Generator().manual_seed(1)
    if symmetry == "scale":
        return torch.exp(4 * torch.rand(*shape, 1, generator=g, dtype=torch.float64) - 2)
    return torch.where(torch.rand(*shape, 1, generator=g) < 0.5, -1.0, 1.0).double()


@pytest.mark.parametrize("symmetry", ["scale", "sign"])
def test_invariant_and_equivariant_laws(symmetry):
    torch.manual_seed(0)
    x = _x()
    q = _scales(x.shape[:-1], symmetry)
    canon = Canonicalizer(6, symmetry).double()
    inv = InvariantMap(6, 4, symmetry=symmetry).double()
    eq = ScaleEquivariantLayer(6, 3, symmetry=symmetry).double()
    torch.testing.assert_close(canon(q * x), canon(x), rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(inv(q * x), inv(x), rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(eq(q * x), q * eq(x), rtol=1e-12, atol=1e-12)


def test_scale_canonicalisation_is_the_unit_vector():
    x = _x((3, 4))
    torch.testing.assert_close(Canonicalizer(4, "scale")(x), x / x.norm(dim=-1, keepdim=True))
    assert torch.equal(Canonicalizer(4, "scale")(torch.zeros(2, 4)), torch.zeros(2, 4))


@torch.no_grad()
def test_scale_blocks_are_not_sign_invariant():
    # x / ||x|| is invariant to positive scalings only: a sign flip must show
    torch.manual_seed(0)
    x = _x()
    inv = InvariantMap(6, 4, symmetry="scale").double()
    assert float((inv(-x) - inv(x)).abs().max()) > 1e-3


@torch.no_grad()
def test_removing_the_canonicalisation_breaks_the_laws():
    torch.manual_seed(0)
    x = _x()
    q = _scales(x.shape[:-1], "scale")
    eq = ScaleEquivariantLayer(6, 3, symmetry="scale", canonicalize=False).double()
    assert float((eq(q * x) - q * eq(x)).abs().max()) > 1e-3


def test_pair_mlp_equals_an_mlp_on_the_concatenation():
    torch.manual_seed(0)
    pair = PairMLP((3, 5), 8, 2).double()
    full = mlp(8, 8, 2).double()
    with torch.no_grad():
        full[0].weight.copy_(torch.cat([pair.first[0].weight, pair.first[1].weight], dim=1))
        full[0].bias.copy_(pair.first[0].bias)
        full[1].load_state_dict(pair.rest[0].state_dict())
        full[3].load_state_dict(pair.rest[2].state_dict())
    a, b = _x((4, 1, 3)), _x((1, 6, 5))
    cat = torch.cat([a.expand(4, 6, 3), b.expand(4, 6, 5)], dim=-1)
    torch.testing.assert_close(pair(a, b), full(cat))


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="unknown symmetry"):
        Canonicalizer(4, "rotation")
    with pytest.raises(ValueError, match="d_in"):
        ScaleEquivariantLayer(0, 3)
    with pytest.raises(ValueError, match="expected 2 parts"):
        PairMLP((2, 2), 4, 1)(torch.zeros(1, 2))
