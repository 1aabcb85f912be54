"""ReLU^p PINNs: closed-form derivatives and gradients against autograd, the problems, GD."""
import math

import numpy as np
import pytest
import torch

from reprobook.pinn.problems import (boundary_points, collocation_points, exact_solution,
                                     polyharmonic, evaluation_points)
from reprobook.pinn.relu_power import (RhoPowers, derivative_1d, falling_factorial, init_net,
                                       laplacian_power, laplacian_power_vjp, relu_power)
from reprobook.pinn.train import (pinn_loss, pinn_loss_and_grad, train_pinn,
                                  tune_learning_rate, _nets_for)


def autograd_net(net, s):
    """Run ``s`` of ``net`` as a plain torch function of x (autograd's own path)."""
    W, b, a = net.W[s], net.b[s], net.a[s]

    def u(X):
        return (a * torch.relu(X @ W.T + b) ** net.p).sum(-1) / math.sqrt(net.width)
    return u


def nested_1d(u, x, j):
    x = x.clone().requires_grad_(True)
    y = u(x[:, None])
    for _ in range(j):
        y = torch.autograd.grad(y.sum(), x, create_graph=True)[0]
    return y.detach()


def nested_laplacian(u, X, k):
    X = X.clone().requires_grad_(True)
    y = u(X)
    for _ in range(k):
        g = torch.autograd.grad(y.sum(), X, create_graph=True)[0]
        y = sum(torch.autograd.grad(g[:, i].sum(), X, create_graph=True)[0][:, i]
                for i in range(X.shape[1]))
    return y.detach()


def test_falling_factorial_and_relu_power():
    assert falling_factorial(5, 0) == 1 and falling_factorial(5, 2) == 20
    assert falling_factorial(5, 5) == 120
    with pytest.raises(ValueError, match="0..p"):
        falling_factorial(3, 4)
    z = torch.tensor([-1.0, 0.0, 2.0])
    assert torch.equal(relu_power(z, 0), torch.tensor([0.0, 0.0, 1.0]))
    assert torch.equal(relu_power(z, 3), torch.tensor([0.0, 0.0, 8.0]))
    rho = RhoPowers(z)
    assert torch.equal(rho(0), relu_power(z, 0)) and torch.equal(rho(2), relu_power(z, 2))


@pytest.mark.parametrize("p", [3, 4, 5])
def test_derivative_1d_matches_autograd(p):
    net = init_net(16, 1, p, [0, 1])
    x = torch.linspace(0.01, 0.99, 37, dtype=torch.float64)
    for s in range(2):
        u = autograd_net(net, s)
        for j in range(0, min(4, p - 1) + 1):
            ours = derivative_1d(net, x, j)[s]
            ref = nested_1d(u, x, j)
            assert torch.allclose(ours, ref, rtol=1e-10, atol=1e-9), (p, j)


@pytest.mark.parametrize("dim", [1, 2, 3])
def test_laplacian_power_matches_autograd(dim):
    net = init_net(12, dim, 5, [3])
    X = torch.rand(20, dim, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    u = autograd_net(net, 0)
    for k in (0, 1, 2):
        assert torch.allclose(laplacian_power(net, X, k)[0], nested_laplacian(u, X, k),
                              rtol=1e-10, atol=1e-9)


def test_vjp_matches_autograd():
    net = init_net(10, 2, 5, [0, 1, 2])
    X = torch.rand(15, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    g = torch.randn(3, 15, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    for k in (0, 1, 2):
        W, b, a = (t.clone().requires_grad_(True) for t in (net.W, net.b, net.a))
        from reprobook.pinn.relu_power import ReLUPowerNet
        (laplacian_power(ReLUPowerNet(W, b, a, 5), X, k) * g).sum().backward()
        dW, db, da = laplacian_power_vjp(net, X, k, g)
        for ours, ref in ((dW, W.grad), (db, b.grad), (da, a.grad)):
            assert torch.allclose(ours, ref, rtol=1e-10, atol=1e-9), k


def test_loss_gradient_matches_autograd_on_a_split_problem():
    prob = polyharmonic(2, 2, split=(1, 1), n_interior=16, boundary_per_face=3)
    nets = _nets_for(prob, 8, [0, 1], torch.float64, "cpu")
    L, grads = pinn_loss_and_grad(prob, nets)
    leaves = [[t.clone().requires_grad_(True) for t in (n.W, n.b, n.a)] for n in nets]
    from reprobook.pinn.relu_power import ReLUPowerNet
    Lref = pinn_loss(prob, [ReLUPowerNet(*lv, n.p) for lv, n in zip(leaves, nets)])
    assert torch.allclose(L, Lref.detach(), rtol=1e-12)
    Lref.sum().backward()
    for lv, gr in zip(leaves, grads):
        for t, g in zip(lv, gr):
            assert torch.allclose(g, t.grad, rtol=1e-9, atol=1e-9)


def test_exact_solution_zeroes_every_residual():
    # substitute u_j = Delta^(k_0+...+k_{j-1}) u* = (-d pi^2)^(...) u* into every block
    for K, dim, split in ((1, 1, (1,)), (2, 1, (2,)), (2, 2, (1, 1)), (3, 2, (1, 2))):
        prob = polyharmonic(K, dim, split=split, n_interior=25, boundary_per_face=4,
                            powers=[2 * k + 1 for k in split])
        lam = -dim * math.pi ** 2
        offset = np.cumsum((0,) + split)
        for blk in prob.blocks:
            r = -blk.target
            for n, k, c in blk.terms:
                r = r + c * lam ** (offset[n] + k) * exact_solution(blk.X)
            assert float(r.abs().max()) < 1e-9, blk.name


def test_problem_structure_and_errors():
    assert polyharmonic(1).powers == (3,) and polyharmonic(2).max_order == 4
    vs = polyharmonic(2, split=(1, 1))
    assert vs.powers == (3, 3) and vs.max_order == 2 and vs.order == 4
    assert [b.name for b in vs.blocks] == ["link 0", "bc u0 D^0", "pde", "bc u1 D^0"]
    with pytest.raises(ValueError, match="summing to K"):
        polyharmonic(2, split=(1,))
    with pytest.raises(ValueError, match="p >= 4"):
        polyharmonic(2, powers=(3,))
    with pytest.raises(ValueError, match="one power per network"):
        polyharmonic(2, split=(1, 1), powers=(3,))
    X = collocation_points(64, 2, 0)
    assert X.shape == (64, 2) and float(X.min()) > 0 and float(X.max()) < 1
    assert torch.equal(X, collocation_points(64, 2, 0))
    assert not torch.equal(X, collocation_points(64, 2, 1))
    B = boundary_points(4, 2)
    assert B.shape == (4 * 4 + 4, 2) and bool(((B == 0) | (B == 1)).any(1).all())
    assert boundary_points(4, 1).shape == (2, 1)
    assert evaluation_points(100, 2).shape == (100, 2)


def test_init_is_common_across_arms_and_checks_inputs():
    a, b = init_net(8, 1, 3, [5, 6]), init_net(8, 1, 5, [5, 6])
    assert torch.equal(a.W, b.W) and torch.equal(a.a, b.a)      # the same seed, any p
    assert not torch.equal(a.W[0], a.W[1])
    assert not torch.equal(a.W, init_net(8, 1, 3, [5, 6], stream=7).W)
    assert set(a.a.unique().tolist()) <= {-1.0, 1.0}
    with pytest.raises(ValueError, match="width"):
        init_net(0, 1, 3, [0])
    with pytest.raises(ValueError, match="p >= 4"):
        laplacian_power(a, torch.rand(3, 1, dtype=torch.float64), 2)
    with pytest.raises(ValueError, match="shape"):
        laplacian_power(a, torch.rand(3, 2, dtype=torch.float64), 1)
    with pytest.raises(ValueError, match="dim 1"):
        derivative_1d(init_net(4, 2, 3, [0]), torch.rand(3, 2), 1)


def test_gd_reduces_the_loss_and_flags_divergence():
    prob = polyharmonic(1, n_interior=32)
    runs = train_pinn(prob, 32, [0, 1, 0], [1e-2, 1e-2, 10.0], 60)
    assert np.all(runs.final_loss[:2] < 0.5 * runs.initial_loss[:2])
    assert runs.diverged.tolist() == [False, False, True]
    # a diverged run keeps its last iterate before the blow-up: finite, and no better than L_0 much
    assert np.isfinite(runs.final_loss[2]) and np.isfinite(runs.error[2])
    assert runs.final_loss[2] <= 1e3 * runs.initial_loss[2]
    assert np.isnan(runs.history[2, -1])
    assert runs.history.shape == (3, len(runs.steps)) and runs.steps[-1] == 60
    assert np.allclose(runs.history[:2, 0], runs.initial_loss[:2])
    assert runs.zero_loss == pytest.approx(float((prob.blocks[0].target ** 2).mean()))
    # chunking the runs does not change them
    small = train_pinn(prob, 32, [0, 1, 0], [1e-2, 1e-2, 10.0], 60, max_elements=32 * 32)
    assert np.allclose(small.final_loss[:2], runs.final_loss[:2])
    with pytest.raises(ValueError, match="pair up"):
        train_pinn(prob, 32, [0, 1], [1e-2], 10)
    with pytest.raises(ValueError, match="positive"):
        train_pinn(prob, 32, [0], [0.0], 10)


def test_tune_picks_the_best_step_and_refines_between_grid_values():
    prob = polyharmonic(1, n_interior=16)
    lr, table = tune_learning_rate(prob, 16, [0, 1], [10.0, 1e-2, 1e-6], 40, refine=False)
    assert lr == 1e-2 and list(table) == [10.0, 1e-2, 1e-6]
    assert table[1e-2] < table[10.0] and table[1e-2] < table[1e-6]
    lr, table = tune_learning_rate(prob, 16, [0, 1], [10.0, 1e-2, 1e-6], 40)
    assert len(table) == 5 and lr in table and table[lr] == min(table.values())
    assert any(abs(k - 1e-4) < 1e-12 for k in table) and any(abs(k - 0.31622776) < 1e-6 for k in table)
    with pytest.raises(ValueError, match="positive"):
        tune_learning_rate(prob, 16, [0], [1e-2, -1.0], 5)
