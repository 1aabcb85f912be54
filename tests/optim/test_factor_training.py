"""The SGD / SAM / BAR loop for factor problems."""
import pytest
import torch

from reprobook.models.factorization import NoisyMatrixFit, factor_grads
from reprobook.optim.bar import balancedness, bar_rescale
from reprobook.optim.factor_training import train_factors
from reprobook.optim.sam import GlobalRadius

pytestmark = pytest.mark.usefixtures("float64_default")


def _setup(members=2):
    prob = NoisyMatrixFit(torch.diag(torch.tensor([0.5, 0.0, 0.0])), torch.full((members,), 0.5))
    x0 = torch.tensor([0.2, -0.1, 0.3]).reshape(1, 3, 1).repeat(members, 1, 1)
    return prob, x0, -3 * x0


def _manual(method, steps, **kw):
    prob, x, y = _setup()
    g = torch.Generator().manual_seed(0)
    for _ in range(steps):
        batch = prob.sample_batch(g)
        _, gx, gy = factor_grads(prob, x, y, batch)
        if method == "sam":
            e = GlobalRadius(kw["rho"], member_dims=1)([gx, gy])
            _, gx, gy = factor_grads(prob, x + e[0], y + e[1], batch)
        if method == "bar":
            x, y = bar_rescale(x, y, gx, gy, alpha=kw["alpha"], lr=kw["lr"], member_dims=1)
        x, y = x - kw["lr"] * gx, y - kw["lr"] * gy
    return x, y


@pytest.mark.parametrize("method, kw", [("sgd", {}), ("sam", {"rho": 0.1}),
                                        ("bar", {"alpha": 0.5, "schedule": "constant"})])
def test_loop_matches_a_hand_written_one(method, kw):
    prob, x0, y0 = _setup()
    run = train_factors(prob, x0, y0, method=method, steps=20, lr=0.01,
                        generator=torch.Generator().manual_seed(0), **kw)
    x, y = _manual(method, 20, lr=0.01, rho=kw.get("rho"), alpha=kw.get("alpha"))
    assert torch.allclose(run.x, x) and torch.allclose(run.y, y)
    assert run.grad_evals == (40 if method == "sam" else 20)


def test_records_and_sgd_nearly_conserves_balancedness():
    prob, x0, y0 = _setup()
    run = train_factors(prob, x0, y0, method="sgd", steps=100, lr=1e-3, record_every=10,
                        generator=torch.Generator().manual_seed(0))
    b = run.balancedness_array()
    assert run.steps == list(range(0, 100, 10)) + [100] and b.shape == (11, 2)
    assert torch.allclose(b[0], balancedness(x0, y0, 1))
    assert float(((b[-1] - b[0]) / b[0]).abs().max()) < 1e-3


def test_step_times_with_a_clock():
    prob, x0, y0 = _setup()
    ticks = iter(range(1000))
    run = train_factors(prob, x0, y0, method="sgd", steps=4, lr=0.01, record_every=100,
                        generator=torch.Generator().manual_seed(0), clock=lambda: next(ticks))
    assert len(run.step_times) == 4 and all(t > 0 for t in run.step_times)


def test_per_member_learning_rates():
    prob, x0, y0 = _setup()
    run = train_factors(prob, x0, y0, method="sgd", steps=5, lr=torch.tensor([0.01, 0.02]),
                        generator=torch.Generator().manual_seed(0))
    one = train_factors(prob, x0, y0, method="sgd", steps=5, lr=0.02,
                        generator=torch.Generator().manual_seed(0))
    assert torch.allclose(run.x[1], one.x[1]) and not torch.allclose(run.x[0], one.x[0])


@pytest.mark.parametrize("kw, match", [
    ({"method": "adam"}, "method"), ({"method": "sgd", "steps": 0}, "steps"),
    ({"method": "sgd", "lr": -1.0}, "lr"), ({"method": "bar", "variant": "x"}, "variant"),
    ({"method": "sam", "rule": GlobalRadius(0.1)}, "member_dims=1"),
])
def test_bad_arguments_are_named(kw, match):
    prob, x0, y0 = _setup()
    args = {"steps": 3, "lr": 0.01, "generator": torch.Generator()} | kw
    with pytest.raises(ValueError, match=match):
        train_factors(prob, x0, y0, **args)
