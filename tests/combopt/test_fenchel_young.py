import itertools

import numpy as np
import pytest
import torch

from reprobook.combopt.cmst import CMSTGraph, solve_cmst_milp
from reprobook.combopt.fenchel_young import (PerturbedFenchelYoung, fenchel_young_loss,
                                             perturbed_argmin)

# a finite feasible set: all 0/1 vectors of length 5 with exactly two ones
YS = np.array([y for y in itertools.product([0, 1], repeat=5) if sum(y) == 2], dtype=float)


def argmin_solver(t):
    return YS[np.argmin(YS @ t)]


def _loss(theta, y_star, noise, eps=0.5, sign=1.0):
    th = torch.tensor(theta, dtype=torch.float64, requires_grad=True)
    loss = PerturbedFenchelYoung.apply(th, torch.tensor(y_star), argmin_solver, eps,
                                       torch.tensor(noise), sign)
    loss.backward()
    return float(loss.detach()), th.grad.numpy()


def test_gradient_matches_finite_differences():
    g = np.random.default_rng(0)
    noise = g.normal(size=(16, 5))
    y_star = YS[3]
    for _ in range(5):
        theta = g.normal(size=5)
        value, grad = _loss(theta, y_star, noise)
        h = 1e-6
        fd = np.array([(_loss(theta + h * e, y_star, noise)[0] -
                        _loss(theta - h * e, y_star, noise)[0]) / (2 * h) for e in np.eye(5)])
        assert np.allclose(grad, fd, atol=1e-6)
        assert np.allclose(grad, y_star - perturbed_argmin(theta, argmin_solver, 0.5, noise))


def test_flipped_sign_disagrees_with_finite_differences():
    g = np.random.default_rng(1)
    noise, theta, y_star = g.normal(size=(16, 5)), g.normal(size=5), YS[0]
    _, grad = _loss(theta, y_star, noise, sign=-1.0)
    _, good = _loss(theta, y_star, noise)
    assert np.abs(grad - good).max() > 0.1


def test_loss_nonnegative_and_vanishes_when_target_is_favoured():
    g = np.random.default_rng(2)
    noise = g.normal(size=(32, 5))
    y_star = YS[5]
    for _ in range(10):
        assert _loss(g.normal(size=5), y_star, noise)[0] >= 0
    favour = 100 * (1 - 2 * y_star)   # target's entries very cheap, the others very expensive
    value, grad = _loss(favour, y_star, noise)
    assert value == pytest.approx(0, abs=1e-12) and np.abs(grad).max() == 0


def test_descent_step_makes_the_target_the_argmin():
    g = np.random.default_rng(3)
    gen = torch.Generator().manual_seed(0)
    y_star = YS[7]
    th = torch.tensor(g.normal(size=5), requires_grad=True)
    opt = torch.optim.SGD([th], lr=0.5)
    for _ in range(50):
        opt.zero_grad()
        loss = fenchel_young_loss(th, y_star, argmin_solver, eps=0.3, n_samples=8, generator=gen)
        loss.backward()
        opt.step()
    assert np.array_equal(argmin_solver(th.detach().numpy()), y_star)


def test_gradient_on_a_cmst_layer():
    # 6-BU path-like graph with the exact MILP layer: finite differences agree
    g = CMSTGraph(6, [(0, 1), (1, 2), (2, 3), (3, 4), (4, 5), (0, 3)])
    solver = lambda t: solve_cmst_milp(g, t, 2, 4)[0]
    r = np.random.default_rng(4)
    noise = torch.tensor(r.normal(size=(4, g.dim)))
    theta = r.uniform(0, 1, g.dim)
    y_star = solver(r.uniform(0, 1, g.dim))
    th = torch.tensor(theta, requires_grad=True)
    loss = PerturbedFenchelYoung.apply(th, torch.tensor(y_star), solver, 0.2, noise, 1.0)
    loss.backward()
    assert float(loss.detach()) >= -1e-9
    h, k = 1e-5, 0
    e = np.eye(g.dim)[k]
    f = lambda t: float(PerturbedFenchelYoung.apply(torch.tensor(t), torch.tensor(y_star), solver,
                                                    0.2, noise, 1.0))
    assert (f(theta + h * e) - f(theta - h * e)) / (2 * h) == pytest.approx(float(th.grad[k]),
                                                                           abs=1e-5)


def test_bad_inputs_are_named():
    th = torch.zeros(5)
    with pytest.raises(ValueError, match="eps"):
        fenchel_young_loss(th, YS[0], argmin_solver, eps=0.0)
    with pytest.raises(ValueError, match="y_target"):
        fenchel_young_loss(th, np.zeros(4), argmin_solver)
    with pytest.raises(ValueError, match="n_samples"):
        fenchel_young_loss(th, YS[0], argmin_solver, n_samples=0)
    with pytest.raises(ValueError, match="theta"):
        fenchel_young_loss(torch.zeros(2, 5), YS[0], argmin_solver)
