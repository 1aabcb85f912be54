"""CG data consistency: monotone residual, agreement with a direct solve, the z-TV ADMM step."""
import pytest
import torch

from reprobook.imaging.ct import radon_matrix, view_angles
from reprobook.imaging.data_consistency import (conjugate_gradient, data_consistency,
                                                data_consistency_tv_z, diff_z, diff_z_adjoint, tv_z)


def _problem(n=8, z=3, views=4, seed=0):
    g = torch.Generator().manual_seed(seed)
    A = radon_matrix(n, view_angles(views))
    x = torch.rand(2, z, n, n, generator=g, dtype=torch.float64)
    y = (x.reshape(2, z, -1) @ A.T) + 0.01 * torch.randn(2, z, A.shape[0], generator=g, dtype=torch.float64)
    x_hat = torch.rand(2, z, n, n, generator=g, dtype=torch.float64)
    return A, x, y, x_hat


def test_cg_matches_direct_solve_and_objective_decreases():
    A, _, y, x_hat = _problem()
    lam = 0.5
    M = A.T @ A + lam * torch.eye(A.shape[1], dtype=A.dtype)
    b = y @ A + lam * x_hat.reshape(2, 3, -1)
    direct = torch.linalg.solve(M, b.reshape(-1, A.shape[1]).T).T.reshape(x_hat.shape)
    sol = data_consistency(A, y, x_hat, lam, iters=200)
    assert (sol - direct).abs().max() < 1e-4

    def objective(x):
        r = x.reshape(2, 3, -1) @ A.T - y
        return (r ** 2).sum() + lam * ((x - x_hat) ** 2).sum()
    vals = [float(objective(data_consistency(A, y, x_hat, lam, k))) for k in range(6)]
    assert all(b < a for a, b in zip(vals, vals[1:]))   # CG decreases the quadratic every step


def test_cg_handles_a_converged_volume():
    b = torch.zeros(2, 3)
    x = conjugate_gradient(lambda v: 2 * v, b, torch.zeros(2, 3), 5)
    assert torch.equal(x, torch.zeros(2, 3))


def test_diff_z_adjoint_and_tv():
    g = torch.Generator().manual_seed(1)
    x = torch.randn(2, 5, 3, 3, generator=g, dtype=torch.float64)
    d = torch.randn(2, 4, 3, 3, generator=g, dtype=torch.float64)
    assert torch.isclose((diff_z(x) * d).sum(), (x * diff_z_adjoint(d)).sum())
    const = torch.ones(1, 4, 2, 2)
    assert tv_z(const).item() == 0.0


def test_tv_z_step_reduces_cross_slice_variation():
    A, _, y, x_hat = _problem(z=5, seed=2)
    plain = data_consistency(A, y, x_hat, 0.5, 10)
    tv = data_consistency_tv_z(A, y, x_hat, 0.5, mu=5.0, rho=5.0, admm_iters=10, cg_iters=10)
    assert (tv_z(tv) < tv_z(plain)).all()
    # without the TV term ADMM solves the plain problem
    same = data_consistency_tv_z(A, y, x_hat, 0.5, mu=0.0, rho=1.0, admm_iters=30, cg_iters=40)
    assert (same - data_consistency(A, y, x_hat, 0.5, 200)).abs().max() < 1e-3


def test_bad_shapes_are_named():
    A, _, y, x_hat = _problem()
    with pytest.raises(ValueError, match="sinograms"):
        data_consistency(A, y[:, :2], x_hat, 0.1, 3)
    with pytest.raises(ValueError, match="volumes"):
        data_consistency(A, y, x_hat[0], 0.1, 3)
    with pytest.raises(ValueError, match="lam"):
        data_consistency(A, y, x_hat, -1.0, 3)
