"""SAM's width scalings and the member training loop."""
import math

import pytest
import torch

from reprobook.models.mlp import init_mlp, mlp_forward
from reprobook.models.parametrization import mup
from reprobook.optim.member_training import accuracy, member_losses, train_members
from reprobook.optim.sam import GlobalRadius, Layerwise, autograd_grad_fn, sam_gradients
from reprobook.optim.width_scaling import SAM_SCALINGS, sam_scaling


def test_rules_at_the_base_width_and_their_scales():
    sizes, base = [64, 256, 256, 10], [64, 64, 64, 10]
    assert isinstance(sam_scaling("naive").rule(0.1, base, base), GlobalRadius)
    g = sam_scaling("global").rule(0.1, sizes, base)
    assert isinstance(g, GlobalRadius) and g.rho == pytest.approx(0.05)      # m = 4
    mp2 = sam_scaling("mup2")
    assert mp2.scales(sizes, base) == pytest.approx(
        (math.sqrt(256 / 64), 1.0, math.sqrt(10 / 256)))                    # sqrt(fan-out/fan-in)
    assert sam_scaling("mup2-joint").scales(sizes, base) == pytest.approx((4.0, 1.0, 0.25))
    r = mp2.rule(torch.tensor([0.1, 0.2]), sizes, base)
    assert isinstance(r, Layerwise) and r.normalise == "layer"


def test_mup2_perturbs_every_layer_by_its_spectral_size():
    sizes, base = [8, 32, 32, 3], [8, 8, 8, 3]
    grads = [torch.randn(1, o, i) for i, o in zip(sizes[:-1], sizes[1:])]
    eps = sam_scaling("mup2").rule(0.5, sizes, base)(grads)
    for e, (i, o) in zip(eps, zip(sizes[:-1], sizes[1:])):
        assert float(e.norm()) == pytest.approx(0.5 * math.sqrt(o / i), rel=1e-5)


def test_unknown_scaling_is_named():
    with pytest.raises(ValueError, match="one of"):
        sam_scaling("local")
    assert set(SAM_SCALINGS) == {"naive", "global", "mup2", "mup2-joint"}


def _problem(members=4):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(64, 5, generator=g)
    y = (x[:, 0] > 0).long() + 2 * (x[:, 1] > 0).long()
    p = init_mlp([5, 16, 16, 4], [5, 16, 16, 4], mup(), members, g)
    return p, x, y, lambda ps, xb: mlp_forward(ps, xb, mup(), 1.0)


def test_members_train_as_they_would_alone_and_count_gradients():
    p, x, y, fwd = _problem()
    lrs = [torch.tensor([0.05, 0.1, 0.1, 0.2])] * 3
    rule = GlobalRadius(torch.tensor([0.0, 0.05, 0.1, 0.05]), member_dims=1)
    run = train_members(p, fwd, x, y, layer_lrs=lrs, member_seeds=[0, 0, 1, 1], epochs=2,
                        batch_size=16, rule=rule)
    assert run.grad_evals == 2 * 2 * 4 and len(run.epoch_loss) == 2
    alone = train_members([w[2:3] for w in p], fwd, x, y, layer_lrs=[torch.tensor([0.1])] * 3,
                          member_seeds=[1], epochs=2, batch_size=16,
                          rule=GlobalRadius(torch.tensor([0.1]), member_dims=1))
    for a, b in zip(run.params, alone.params):
        assert torch.allclose(a[2:3], b, atol=1e-5)
    acc = accuracy(run.params, fwd, x, y)
    assert acc.shape == (4,) and float(acc.max()) > 0.5


def test_a_zero_radius_is_sgd():
    p, x, y, fwd = _problem(2)
    lrs = [torch.tensor([0.1, 0.1])] * 3
    sgd = train_members(p, fwd, x, y, layer_lrs=lrs, member_seeds=[0, 0], epochs=1, batch_size=16)
    sam = train_members(p, fwd, x, y, layer_lrs=lrs, member_seeds=[0, 0], epochs=1, batch_size=16,
                        rule=GlobalRadius(0.0, member_dims=1))
    for a, b in zip(sgd.params, sam.params):
        assert torch.allclose(a, b, atol=1e-6)


@pytest.mark.parametrize("kw, match", [
    ({"layer_lrs": [torch.ones(2)] * 3}, "layer_lrs"), ({"member_seeds": [0]}, "member_seeds"),
    ({"epochs": 0}, "epochs"), ({"batch_size": 1000}, "exceeds"), ({"momentum": 1.0}, "momentum"),
    ({"rule": GlobalRadius(0.1)}, "member_dims=1"),
])
def test_bad_arguments_are_named(kw, match):
    p, x, y, fwd = _problem()
    args = {"layer_lrs": [torch.ones(4)] * 3, "member_seeds": [0] * 4, "epochs": 1,
            "batch_size": 16} | kw
    with pytest.raises(ValueError, match=match):
        train_members(p, fwd, x, y, **args)


def test_member_losses_shape():
    assert member_losses(torch.zeros(3, 5, 4), torch.zeros(3, 5, dtype=torch.long)).shape == (3,)
