"""Scale-invariant factor problems: closed-form gradients against autograd, and the exact
one-step balancedness identities of gradient descent and SAM."""
import numpy as np
import pytest
import torch

from reprobook import rng
from reprobook.data.low_rank import lora_task
from reprobook.models.factorization import (LoRARegression, NoisyMatrixFit, factor_grads,
                                            factor_loss)
from reprobook.optim.bar import balancedness
from reprobook.optim.sam import GlobalRadius, autograd_grad_fn, sam_gradients

pytestmark = pytest.mark.usefixtures("float64_default")


def _matrix_fit(members=3, r=1):
    g = torch.Generator().manual_seed(0)
    prob = NoisyMatrixFit(torch.diag(torch.tensor([0.5, 0.0, 0.0])), torch.linspace(0, 2, members),
                          row_scales=torch.tensor([1.0, 0.8, 0.5]))
    x, y = torch.randn(members, 3, r, generator=g), torch.randn(members, 3, r, generator=g)
    return prob, x, y, prob.sample_batch(g)


def _lora(members=2):
    tasks = [lora_task(rng(s), n_train=40, n_val=10, n_test=10) for s in range(members)]
    t = lambda f: torch.tensor(np.stack([f(k) for k in tasks]))  # noqa: E731
    prob = LoRARegression(t(lambda k: k.train_inputs), t(lambda k: k.train_targets),
                          t(lambda k: k.base))
    g = torch.Generator().manual_seed(1)
    x = torch.randn(members, 32, 4, generator=g) * 0.1
    return prob, x, t(lambda k: k.down0), prob.sample_batch(g, 16)


@pytest.mark.parametrize("make", [_matrix_fit, lambda: _matrix_fit(r=2), _lora])
def test_closed_form_factor_gradients_equal_autograd(make):
    prob, x, y, batch = make()
    loss, gx, gy = factor_grads(prob, x, y, batch)
    xa, ya = x.clone().requires_grad_(), y.clone().requires_grad_()
    la = factor_loss(prob, xa, ya, batch)
    ax, ay = torch.autograd.grad(la.sum(), [xa, ya])
    assert torch.allclose(loss, la.detach(), atol=1e-12)
    assert torch.allclose(gx, ax, atol=1e-12) and torch.allclose(gy, ay, atol=1e-12)


@pytest.mark.parametrize("make", [_matrix_fit, _lora])
def test_gradient_descent_changes_balancedness_only_at_second_order(make):
    # B(x - eta gx, y - eta gy) - B(x, y) = eta^2/2 (|gx|^2 - |gy|^2) exactly, because
    # <x, gx> = <y, gy> for any loss of x y^T (the paper's Theorem 1 in discrete time)
    prob, x, y, batch = make()
    _, gx, gy = factor_grads(prob, x, y, batch)
    eta = 0.01
    db = balancedness(x - eta * gx, y - eta * gy, 1) - balancedness(x, y, 1)
    exact = 0.5 * eta ** 2 * (gx.pow(2).sum((1, 2)) - gy.pow(2).sum((1, 2)))
    assert torch.allclose(db, exact, rtol=1e-9, atol=1e-15)


@pytest.mark.parametrize("make", [_matrix_fit, _lora])
def test_sam_step_balancedness_identity(make):
    # the paper's eq. (16a) in discrete time: with u = 1/|g| and G, G~ the product gradients at
    # w and at the perturbed point, a SAM step moves B by
    #   eta rho u (y'G~'G y - x'G~G'x) + eta^2/2 (|g~x|^2 - |g~y|^2)
    prob, x, y, batch = make()
    eta, rho = 0.01, 0.05
    for m in range(prob.members):
        sub = _member(prob, m)
        grad_fn = autograd_grad_fn(lambda p: factor_loss(sub, p[0][None], p[1][None],
                                                         _batch_of(batch, m)).sum())
        step = sam_gradients(grad_fn, [x[m], y[m]], GlobalRadius(rho))
        gxs, gys = step.sam_grads
        db = balancedness(x[m] - eta * gxs, y[m] - eta * gys) - balancedness(x[m], y[m])
        wt = (x[m] + step.eps[0]) @ (y[m] + step.eps[1]).T
        _, gt = sub.grad_of_product(wt[None], _batch_of(batch, m))
        _, g0 = sub.grad_of_product((x[m] @ y[m].T)[None], _batch_of(batch, m))
        gt, g0 = gt[0], g0[0]
        u = 1 / (step.grads[0].pow(2).sum() + step.grads[1].pow(2).sum()).sqrt()
        first = eta * rho * u * (torch.trace(y[m].T @ gt.T @ g0 @ y[m])
                                 - torch.trace(x[m].T @ gt @ g0.T @ x[m]))
        second = 0.5 * eta ** 2 * (gxs.pow(2).sum() - gys.pow(2).sum())
        assert float(db) == pytest.approx(float(first + second), rel=1e-9, abs=1e-15)


def _member(prob, m):
    if isinstance(prob, NoisyMatrixFit):
        return NoisyMatrixFit(prob.target, prob.noise_scale[m:m + 1], prob.row_scales)
    return LoRARegression(prob.inputs[m:m + 1], prob.targets[m:m + 1], prob.base[m:m + 1])


def _batch_of(batch, m):
    return None if batch is None else batch[m:m + 1]


def test_matrix_fit_noise_has_the_right_scale():
    prob = NoisyMatrixFit(torch.zeros(3, 3), torch.tensor([0.0, 2.0]),
                          row_scales=torch.tensor([1.0, 0.8, 0.5]))
    g = torch.Generator().manual_seed(0)
    draws = torch.stack([prob.sample_batch(g) for _ in range(4000)])
    assert float(draws[:, 0].abs().max()) == 0.0
    sd = draws[:, 1].std(dim=0).mean(dim=1)
    assert torch.allclose(sd, 2 * torch.tensor([1.0, 0.8, 0.5]), rtol=0.05)


def test_lora_minibatches_are_rows_without_replacement():
    prob, *_ = _lora()
    stream = prob.batches(torch.Generator().manual_seed(0), 16)
    epoch = [next(stream) for _ in range(2)]          # n = 40: two batches of 16 per epoch
    rows = torch.cat([z for z, _ in epoch], dim=1)
    for m in range(2):
        seen = {tuple(r.tolist()) for r in rows[m]}
        assert len(seen) == 32                          # no row twice within an epoch
    assert next(prob.batches(None, None)) is None
    prob, *_ = _lora()
    b = prob.sample_batch(torch.Generator().manual_seed(0), 16)
    assert b.shape == (2, 16)
    assert all(len(set(row.tolist())) == 16 for row in b)
    assert prob.sample_batch(None, None) is None


@pytest.mark.parametrize("bad, match", [
    (lambda: NoisyMatrixFit(torch.zeros(3), torch.ones(2)), "target"),
    (lambda: NoisyMatrixFit(torch.zeros(3, 3), -torch.ones(2)), "alphas"),
    (lambda: NoisyMatrixFit(torch.zeros(3, 3), torch.ones(2)).sample_batch(None), "Generator"),
    (lambda: NoisyMatrixFit(torch.zeros(3, 3), torch.ones(2)).sample_batch(None, 4), "batch"),
    (lambda: factor_grads(_matrix_fit()[0], torch.zeros(3, 4, 1), torch.zeros(3, 3, 1), None),
     "shape"),
    (lambda: factor_grads(_matrix_fit()[0], torch.zeros(3, 3, 1), torch.zeros(3, 3, 2), None),
     "rank"),
    (lambda: LoRARegression(torch.zeros(2, 5, 3), torch.zeros(2, 4, 2), torch.zeros(2, 2, 3)),
     "targets"),
])
def test_bad_arguments_are_named(bad, match):
    with pytest.raises((ValueError, TypeError), match=match):
        bad()
