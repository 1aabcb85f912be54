"""EULBO: its ELBO part is gpytorch's, its gradient reaches x, x stays in the box, the bound holds."""
import gpytorch
import pytest
import torch

from reprobook.bo.eulbo import eulbo_bound_gap, eulbo_loss, eulbo_terms, fit_eulbo
from reprobook.bo.svgp import fit_svgp, make_svgp

D = torch.float64


@pytest.fixture(scope="module")
def setup():
    g = torch.Generator().manual_seed(0)
    X = torch.rand(40, 2, generator=g, dtype=D)
    y = torch.sin(5 * X).sum(1)
    y = (y - y.mean()) / y.std()
    m = make_svgp(X, 6)
    fit_svgp(m, X, y, steps=30, lr=0.05)
    return X, y, m


def test_elbo_part_equals_gpytorch_and_zero_weight_is_elbo(setup):
    X, y, m = setup
    x = torch.tensor([[0.2, 0.7]], dtype=D)
    e, u = eulbo_terms(m, X, y, x, float(y.max()))
    g, lik = m.to_gpytorch()
    g.train()
    with torch.no_grad():
        ref = gpytorch.mlls.VariationalELBO(lik, g, num_data=40)(g(X), y).item()
    assert e.item() - m.jitter / (2 * m.prior.noise.item()) == pytest.approx(ref, abs=1e-9)
    assert eulbo_loss(m, X, y, x, float(y.max()), utility_weight=0.0).item() == pytest.approx(-e.item())
    assert eulbo_loss(m, X, y, x, float(y.max())).item() == pytest.approx(-(e + u).item())


def test_gradient_reaches_x(setup):
    X, y, m = setup
    x = torch.tensor([[0.4, 0.4]], dtype=D, requires_grad=True)
    eulbo_loss(m, X, y, x, float(y.max())).backward()
    assert x.grad.abs().sum() > 0


def test_x_stays_in_bounds_and_moves(setup):
    X, y, m0 = setup
    m = make_svgp(X, 6)
    m.load_state_dict(m0.state_dict())
    lo, hi = torch.tensor([0.1, 0.1], dtype=D), torch.tensor([0.3, 0.35], dtype=D)
    res = fit_eulbo(m, X, y, torch.tensor([0.2, 0.2], dtype=D), float(y.max()), lower=lo, upper=hi,
                    epochs=6, steps_per_epoch=5, x_lr=0.05)
    assert (res.x >= lo).all() and (res.x <= hi).all()
    assert not torch.allclose(res.x[0], torch.tensor([0.2, 0.2], dtype=D))
    frozen = fit_eulbo(m, X, y, torch.tensor([0.2, 0.2], dtype=D), float(y.max()), epochs=2,
                       steps_per_epoch=2, optimise_x=False)
    assert torch.equal(frozen.x[0], torch.tensor([0.2, 0.2], dtype=D))


def test_jensen_bound_holds_and_planted_bug_breaks_it(setup):
    X, y, m = setup
    best = float(y.max())
    for x in torch.rand(4, 2, dtype=D, generator=torch.Generator().manual_seed(1)):
        assert eulbo_bound_gap(m, X, y, x, best) <= 0
    Xs, ys = X[:20], y[:20]
    full = make_svgp(Xs, 20)                       # full rank: the tightest case
    fit_svgp(full, Xs, ys, steps=60, lr=0.1)
    x = torch.tensor([0.5, 0.5], dtype=D)
    assert eulbo_bound_gap(full, Xs, ys, x, best) <= 0
    # with the KL dropped, a well-fitted q "beats" the evidence: the bound breaks
    assert eulbo_bound_gap(full, Xs, ys, x, best, planted_bug="no_kl") > 0


def test_bad_input(setup):
    X, y, m = setup
    x = torch.tensor([0.5, 0.5], dtype=D)
    with pytest.raises(ValueError, match="x must have shape"):
        eulbo_terms(m, X, y, torch.zeros(1, 3, dtype=D), 0.0)
    with pytest.raises(ValueError, match="utility_weight"):
        eulbo_loss(m, X, y, x, 0.0, utility_weight=-1.0)
    with pytest.raises(ValueError, match="planted_bug"):
        eulbo_terms(m, X, y, x, 0.0, planted_bug="nope")
    with pytest.raises(ValueError, match="epochs"):
        fit_eulbo(m, X, y, x, 0.0, epochs=-1)
    with pytest.raises(ValueError, match="lower and upper"):
        fit_eulbo(m, X, y, x, 0.0, lower=torch.ones(2, dtype=D), upper=torch.zeros(2, dtype=D))
