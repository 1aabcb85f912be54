"""abc parameterisations and the member-stacked MLP."""
import math

import pytest
import torch

from reprobook.models.mlp import init_mlp, layer_inputs, mlp_forward, perturbation_effects
from reprobook.models.parametrization import Parametrization, Scaling, mlp_roles, mup, standard


def test_presets_match_the_tensor_programs_tables():
    sp, mp = standard(), mup()
    assert [sp.scaling(r).b for r in ("input", "hidden", "output")] == [0.0, 0.5, 0.5]
    assert [mp.scaling(r).b for r in ("input", "hidden", "output")] == [0.0, 0.5, 1.0]
    assert [mp.scaling(r).c for r in ("input", "hidden", "output")] == [-1.0, 0.0, 1.0]
    assert mp.lr("input", 4.0, 0.1) == pytest.approx(0.4) and mp.lr("output", 4.0, 0.1) == 0.025
    assert mp.init_std("output", 4.0, 0.125) == pytest.approx(0.125 / 4)
    for p in (sp, mp):                               # m = 1 is the base network
        assert all(p.lr(r, 1.0, 0.3) == 0.3 for r in p.layers)


def test_abc_symmetry_gives_the_same_function_and_sgd_step():
    # W = m^-a w with (a, b, c) -> (a + t, b - t, c - 2t): same forward pass, same SGD step on W
    m, t, eta = 8.0, 0.5, 0.1
    s = Scaling(a=0.0, b=0.5, c=0.0)
    s2 = s.shifted(t)
    g = torch.Generator().manual_seed(0)
    u = torch.randn(5, 7, generator=g)
    w1 = m ** -s.b * u                                # the same draw in both forms
    w2 = m ** -s2.b * u
    assert torch.allclose(m ** -s.a * w1, m ** -s2.a * w2)
    x, target = torch.randn(3, 7, generator=g), torch.randn(3, 5, generator=g)

    def step(w, sc):
        w = w.clone().requires_grad_()
        loss = ((x @ (m ** -sc.a * w).T - target) ** 2).sum()
        loss.backward()
        return m ** -sc.a * (w - eta * m ** -sc.c * w.grad).detach()

    assert torch.allclose(step(w1, s), step(w2, s2), atol=1e-6)


def test_mlp_shapes_roles_and_init_scale():
    assert mlp_roles(3) == ("input", "hidden", "output")
    p = init_mlp([6, 400, 400, 3], [6, 100, 100, 3], mup(), 2, torch.Generator().manual_seed(0))
    assert [tuple(w.shape) for w in p] == [(2, 400, 6), (2, 400, 400), (2, 3, 400)]
    assert float(p[1].std()) == pytest.approx(1 / math.sqrt(100) / 2, rel=0.02)   # m = 4, b = 1/2
    assert float(p[2].std()) == pytest.approx(1 / math.sqrt(100) / 4, rel=0.1)    # b = 1
    x = torch.randn(2, 5, 6)
    assert mlp_forward(p, x, mup(), 4.0).shape == (2, 5, 3)
    ins = layer_inputs(p, x, mup(), 4.0)
    assert [tuple(h.shape) for h in ins] == [(2, 5, 6), (2, 5, 400), (2, 5, 400)]
    assert (ins[1] >= 0).all()


def test_members_are_independent_networks():
    p = init_mlp([4, 8, 8, 2], [4, 8, 8, 2], standard(), 3, torch.Generator().manual_seed(1))
    x = torch.randn(3, 5, 4)
    out = mlp_forward(p, x, standard(), 1.0)
    alone = mlp_forward([w[1:2] for w in p], x[1:2], standard(), 1.0)
    assert torch.allclose(out[1:2], alone)


def test_perturbation_effects_are_the_rms_of_the_pre_activation_change():
    p = init_mlp([4, 8, 8, 2], [4, 8, 8, 2], standard(), 1, torch.Generator().manual_seed(2))
    x = torch.randn(1, 5, 4)
    deltas = [0.01 * torch.randn_like(w) for w in p]
    eff = perturbation_effects(deltas, layer_inputs(p, x, standard(), 1.0), standard(), 1.0)
    z = x @ deltas[0][0].T
    assert float(eff[0][0]) == pytest.approx(float(z.pow(2).mean().sqrt()))


@pytest.mark.parametrize("bad, match", [
    (lambda: init_mlp([4, 8], [4, 8], mup(), 1, torch.Generator()), "sizes"),
    (lambda: init_mlp([4, 8, 8, 2], [4, 8, 2], mup(), 1, torch.Generator()), "sizes"),
    (lambda: init_mlp([4, 8, 8, 2], [4, 8, 8, 2], mup(), 0, torch.Generator()), "members"),
    (lambda: mup().scaling("embedding"), "no role"),
    (lambda: mup().lr("input", -1.0), "multiplier"),
    (lambda: Parametrization("x", {"input": 1.0}), "Scaling"),
    (lambda: Scaling(a=float("nan")), "finite"),
    (lambda: mlp_roles(1), "at least 2"),
    (lambda: mlp_forward(init_mlp([4, 8, 8, 2], [4, 8, 8, 2], mup(), 2, torch.Generator()),
                         torch.zeros(3, 5, 4), mup(), 1.0), "members"),
])
def test_bad_arguments_are_named(bad, match):
    with pytest.raises((ValueError, TypeError, KeyError), match=match):
        bad()
