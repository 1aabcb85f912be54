"""SAM's perturbation rules, the functional SAM step and the torch.optim wrapper."""
import math

import pytest
import torch

from reprobook.optim.sam import (SAM, GlobalRadius, Layerwise, Masked, Unnormalised,
                                 autograd_grad_fn, member_sqnorm, sam_gradients)

pytestmark = pytest.mark.usefixtures("float64_default")


def _grads(seed=0, shapes=((3, 4), (4,), (2, 3))):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(*s, generator=g) for s in shapes]


def _norm(ts):
    return math.sqrt(sum(float(t.pow(2).sum()) for t in ts))


def test_global_radius_has_norm_rho_and_the_gradient_direction():
    g = _grads()
    eps = GlobalRadius(0.3)(g)
    assert _norm(eps) == pytest.approx(0.3, rel=1e-12)
    for e, gi in zip(eps, g):
        assert torch.allclose(e, 0.3 * gi / _norm(g))


def test_zero_gradient_gives_zero_perturbation():
    eps = GlobalRadius(0.1)([torch.zeros(3), torch.zeros(2, 2)])
    assert all(float(e.abs().max()) == 0 for e in eps)


def test_members_are_perturbed_as_if_alone():
    g = _grads(1, ((5, 3, 4), (5, 2)))
    rho = torch.tensor([0.1, 0.2, 0.0, 1.0, 0.5])
    eps = GlobalRadius(rho, member_dims=1)(g)
    for m in range(5):
        alone = GlobalRadius(float(rho[m]))([g[0][m], g[1][m]])
        assert torch.allclose(eps[0][m], alone[0]) and torch.allclose(eps[1][m], alone[1])


def test_layerwise_joint_with_unit_scales_is_sam_and_layer_norm_fixes_each_layer():
    g = _grads(2)
    same = Layerwise(0.2, (1, 1, 1))(g)
    for a, b in zip(same, GlobalRadius(0.2)(g)):
        assert torch.allclose(a, b)
    eps = Layerwise(0.2, (1.0, 3.0, 0.5), normalise="layer")(g)
    for e, s in zip(eps, (1.0, 3.0, 0.5)):
        assert float(e.norm()) == pytest.approx(0.2 * s, rel=1e-12)
    joint = Layerwise(0.2, (1.0, 3.0, 0.5))(g)
    v = [s * gi for s, gi in zip((1.0, 3.0, 0.5), g)]
    for e, vi in zip(joint, v):
        assert torch.allclose(e, 0.2 * vi / _norm(v))


def test_masked_keeps_only_some_layers_and_the_base_normalisation():
    g = _grads(3)
    eps = Masked(GlobalRadius(0.5), keep=(-1,))(g)
    full = GlobalRadius(0.5)(g)
    assert float(eps[0].abs().max()) == 0 and float(eps[1].abs().max()) == 0
    assert torch.allclose(eps[2], full[2])


def test_unnormalised_is_rho_times_gradient():
    g = _grads(4)
    for e, gi in zip(Unnormalised(0.1)(g), g):
        assert torch.allclose(e, 0.1 * gi)
    stacked = _grads(4, ((3, 2, 2), (3, 4)))
    for e, gi in zip(Unnormalised(0.1, member_dims=1)(stacked), stacked):
        assert torch.allclose(e, 0.1 * gi)


def test_member_sqnorm():
    t = torch.arange(12.0).reshape(2, 3, 2)
    assert float(member_sqnorm(t)) == float((t ** 2).sum())
    assert torch.allclose(member_sqnorm(t, 1), (t ** 2).sum(dim=(1, 2)))


@pytest.mark.parametrize("bad, match", [
    (lambda: GlobalRadius(-1.0)(_grads()), "rho"),
    (lambda: GlobalRadius(torch.ones(3))(_grads()), "one value per member"),
    (lambda: GlobalRadius(0.1, member_dims=2), "member_dims"),
    (lambda: Layerwise(0.1, (1, 1))(_grads()), "3 layers"),
    (lambda: Layerwise(0.1, (1, -1, 1)), "positive"),
    (lambda: Layerwise(0.1, (1, 1, 1), normalise="max"), "normalise"),
    (lambda: Masked(GlobalRadius(0.1), keep=(5,))(_grads()), "out of range"),
    (lambda: GlobalRadius(0.1)(torch.zeros(3)), "list of tensors"),
])
def test_bad_arguments_are_named(bad, match):
    with pytest.raises((ValueError, TypeError), match=match):
        bad()


def test_sam_gradient_on_a_quadratic_and_no_mutation():
    gen = torch.Generator().manual_seed(0)
    a = torch.randn(4, 4, generator=gen)
    a = a @ a.T + torch.eye(4)
    w = [torch.randn(4, generator=gen)]
    before = w[0].clone()
    grad_fn = autograd_grad_fn(lambda p: 0.5 * p[0] @ a @ p[0])
    step = sam_gradients(grad_fn, w, GlobalRadius(0.3))
    g = a @ before
    eps = 0.3 * g / g.norm()
    assert torch.allclose(step.grads[0], g) and torch.allclose(step.eps[0], eps)
    assert torch.allclose(step.sam_grads[0], a @ (before + eps))
    assert torch.equal(w[0], before)


def test_sam_gradients_checks_the_gradient_function():
    with pytest.raises(ValueError, match="one gradient per parameter"):
        sam_gradients(lambda p: (torch.tensor(0.0), [torch.zeros(2)]), [torch.zeros(3)],
                      GlobalRadius(0.1))


def test_optimizer_wrapper_matches_the_functional_step():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 1))
    x, y = torch.randn(8, 3), torch.randn(8, 1)
    params = list(model.parameters())
    w0 = [p.detach().clone() for p in params]

    def loss_of(ps):
        h = torch.tanh(x @ ps[0].T + ps[1])
        return ((h @ ps[2].T + ps[3] - y) ** 2).mean()

    step = sam_gradients(autograd_grad_fn(loss_of), w0, GlobalRadius(0.05))
    expected = [w - 0.1 * g for w, g in zip(w0, step.sam_grads)]

    opt = SAM(params, torch.optim.SGD, GlobalRadius(0.05), lr=0.1)

    def closure():
        opt.zero_grad()
        loss = ((model(x) - y) ** 2).mean()
        loss.backward()
        return loss

    opt.step(closure)
    assert opt.grad_evals == 2
    for p, e in zip(params, expected):
        assert torch.allclose(p.detach(), e, atol=1e-12)


def test_optimizer_wrapper_needs_a_closure():
    p = torch.nn.Parameter(torch.zeros(2))
    opt = SAM([p], torch.optim.SGD, GlobalRadius(0.1), lr=0.1)
    with pytest.raises(ValueError, match="closure"):
        opt.step()
