"""Unit-cube test functions: known optima, sign convention, input checks."""
import pytest
import torch

from reprobook.bo.test_functions import make_problem

KNOWN = {"branin": -0.397887, "hartmann6": 3.32237, "ackley": 0.0}


@pytest.mark.parametrize("name", ["branin", "hartmann6", "ackley"])
def test_optimum_value_at_optimizers(name):
    p = make_problem(name, dim=3) if name == "ackley" else make_problem(name)
    assert p.optimal_value == pytest.approx(KNOWN[name], abs=1e-6)
    vals = p(p.optimizers)
    assert torch.allclose(vals, torch.full_like(vals, p.optimal_value), atol=1e-4)
    U = torch.rand(500, p.dim, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    assert (p(U) <= p.optimal_value + 1e-9).all()       # maximisation: nothing beats the optimum


def test_scaling_roundtrip_and_single_point():
    p = make_problem("branin")
    U = torch.rand(4, 2, dtype=torch.float64)
    assert torch.allclose(p.to_unit(p.to_box(U)), U)
    assert p(U[0]).shape == ()


def test_bad_input():
    with pytest.raises(ValueError, match="name"):
        make_problem("rosenbrock")
    with pytest.raises(ValueError, match="dim"):
        make_problem("branin", dim=3)
    p = make_problem("branin")
    with pytest.raises(ValueError, match="U must have shape"):
        p(torch.rand(3, 4, dtype=torch.float64))
    with pytest.raises(ValueError, match="unit cube"):
        p(torch.full((1, 2), 1.5, dtype=torch.float64))
