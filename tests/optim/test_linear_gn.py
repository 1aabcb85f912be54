"""The closed-form GN matrix of deep linear networks against autograd, and the bounds on kappa."""
import numpy as np
import pytest
import torch

from reprobook import rng
from reprobook.linalg.spectrum import condition_number, nonzero_eigenvalues
from reprobook.models.deep_linear import DeepLinear, deep_linear, residual_linear
from reprobook.optim.gauss_newton import gauss_newton, gauss_newton_eigenvalues
from reprobook.optim.linear_gn import (ff_matrix, gn_core, gn_factor, jacobian_factor, linear_gn_bounds,
                                       linear_gn_eigenvalues, linear_gn_matrix, second_moment)


def data(n=30, d=3, seed=0, shift=0.7):
    # inputs with a nonzero mean: the second moment and the covariance differ
    return rng(seed, 1).normal(size=(n, d)) + shift


def row_to_column_major(net):
    """Permutation taking torch's row-major flattening of every W_l to column-major vec order."""
    perm, start = [], 0
    for w in net.weights:
        r, c = w.shape
        perm += [start + i * c + j for j in range(c) for i in range(r)]
        start += r * c
    return np.array(perm)


NETS = [
    lambda g: deep_linear([3, 5, 2], g),
    lambda g: deep_linear([3, 4, 6, 2], g),
    lambda g: deep_linear([3, 2, 4, 2], g),                 # a bottleneck narrower than d
    lambda g: residual_linear(3, 3, g, beta=0.5),
    lambda g: DeepLinear([g.normal(size=(3, 3)), g.normal(size=(3, 3)), g.normal(size=(2, 3))],
                         (True, True, False), beta=0.3),  # residual blocks and a plain head
]


@pytest.mark.parametrize("make", NETS)
def test_closed_form_matrix_equals_autograd(make):
    net = make(rng(0, 2))
    x = data()
    xt = torch.tensor(x[:, :net.dims[0]])
    g_auto = gauss_newton(net.forward, net.params(), xt).numpy()
    perm = row_to_column_major(net)
    g_closed = linear_gn_matrix(net.effective(), second_moment(x[:, :net.dims[0]]), net.scales())
    np.testing.assert_allclose(g_auto[np.ix_(perm, perm)], g_closed, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("make", NETS)
def test_core_spectrum_is_the_nonzero_spectrum(make):
    net = make(rng(1, 2))
    d = net.dims[0]
    x = data(d=d)
    ev_auto = nonzero_eigenvalues(gauss_newton_eigenvalues(net.forward, net.params(), torch.tensor(x)))
    ev_closed = nonzero_eigenvalues(linear_gn_eigenvalues(net.effective(), second_moment(x), net.scales()))
    np.testing.assert_allclose(ev_auto, ev_closed, rtol=1e-9)


def test_centred_covariance_is_wrong():
    # the uncentred second moment is right; the covariance (a classic slip) is not
    net = deep_linear([3, 4, 2], rng(2, 2))
    x = data(shift=2.0)
    truth = nonzero_eigenvalues(gauss_newton_eigenvalues(net.forward, net.params(), torch.tensor(x)))
    wrong = linear_gn_eigenvalues(net.effective(), np.cov(x.T, bias=True), net.scales())
    assert np.max(np.abs(wrong - truth) / truth) > 0.1


def test_rank_is_dk_and_bounds_are_ordered():
    g = rng(3, 2)
    for dims in ([4, 6, 3], [4, 8, 8, 3], [4, 5, 7, 6, 3], [4, 6, 6, 6, 3]):
        net = deep_linear(dims, g)
        x = data(n=50, d=4)
        b = linear_gn_bounds(net.effective(), second_moment(x), net.scales(), layerwise=True)
        assert b.rank == 4 * 3
        tol = 1 + 1e-9
        assert b.kappa <= b.bound_ff * tol and b.bound_ff <= b.bound_cvx * tol
        assert b.bound_cvx <= b.bound_loose * tol
        if len(set(dims[1:-1])) == 1:        # constant hidden width: the layer-by-layer bound holds
            assert b.bound_loose <= b.bound_layers * tol
        # the convex-combination form equals sum_l gamma_l kappa_l
        assert np.isclose(b.bound_cvx, b.kappa_sigma * np.sum(b.weights * b.layer_kappas))


def test_one_hidden_layer_whitened_bound_is_attained():
    # FF^T = I (x) W2 W2^T + W1^T W1 (x) I is a Kronecker sum: its extreme eigenvalues are sums
    for s in range(5):
        net = deep_linear([4, 7, 3], rng(s, 4))
        b = linear_gn_bounds(net.effective(), np.eye(4), net.scales())
        assert b.kappa == pytest.approx(b.bound_cvx, rel=1e-10)


def test_narrow_layer_gives_infinite_bounds_and_lower_rank():
    net = deep_linear([4, 2, 3], rng(5, 2))   # width 2 < d = 4 and < K = 3
    b = linear_gn_bounds(net.effective(), np.eye(4), net.scales())
    assert np.all(b.s_min == 0) and b.bound_cvx == np.inf and b.bound_loose == np.inf
    assert b.rank < 12 and np.isfinite(b.kappa)


def test_ff_matrix_is_f_f_transpose():
    net = residual_linear(3, 4, rng(6, 2), beta=0.4)
    f = jacobian_factor(net.effective(), net.scales())
    np.testing.assert_allclose(f @ f.T, ff_matrix(net.effective(), net.scales()), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(gn_core(net.effective(), np.eye(3), net.scales()), f @ f.T, rtol=1e-12, atol=1e-12)


def test_bad_input():
    net = deep_linear([3, 4, 2], rng(7, 2))
    with pytest.raises(ValueError, match="do not chain"):
        linear_gn_bounds([np.ones((4, 3)), np.ones((2, 5))], np.eye(3))
    with pytest.raises(ValueError, match=r"\(3, 3\) second moment"):
        linear_gn_bounds(net.effective(), np.eye(4))
    with pytest.raises(ValueError, match="one entry per layer"):
        linear_gn_eigenvalues(net.effective(), np.eye(3), scales=[1.0])
    with pytest.raises(ValueError, match="symmetric"):
        gn_core(net.effective(), np.triu(np.ones((3, 3))))
    with pytest.raises(ValueError, match="non-finite"):
        linear_gn_bounds([np.full((2, 3), np.inf)], np.eye(3))
    with pytest.raises(TypeError, match="non-empty list"):
        linear_gn_bounds(np.eye(3), np.eye(3))
    with pytest.raises(ValueError, match=r"shape \(n, d\)"):
        second_moment(np.ones(3))


def test_square_root_factor_and_its_accuracy():
    net = deep_linear([3, 5, 4, 2], rng(8, 2))
    sig = second_moment(data())
    b = gn_factor(net.effective(), sig, net.scales())
    np.testing.assert_allclose(b @ b.T, gn_core(net.effective(), sig, net.scales()), rtol=1e-11, atol=1e-12)
    # diagonal layers: FF^T is diagonal with known entries spanning 17 decades, beyond what an
    # eigenvalue solver on FF^T resolves
    a = [np.array([1.0, 1e-3, 1e-5, 2.0]), np.array([1.0, 1e-2, 1e-5, 0.5]), np.array([1.0, 1e-4, 1e-3, 3.0])]
    mats = [np.diag(v) for v in a]
    # FF^T = sum_l diag(P_l^2) (x) diag(S_l^2): entry (i, k) is sum_l prod_{j<l} a_j[i]^2 prod_{j>l} a_j[k]^2
    full = np.sort(np.concatenate([[sum(np.prod([a[j][i] ** 2 if j < l else a[j][k] ** 2 if j > l else 1.0
                                                 for j in range(3)]) for l in range(3))
                                    for k in range(4)] for i in range(4)]))[::-1]
    np.testing.assert_allclose(linear_gn_eigenvalues(mats, np.eye(4)), full, rtol=1e-10)
    # and the fast path (an eigenvalue solver) agrees where it is accurate
    well = deep_linear([3, 6, 2], rng(9, 2))
    np.testing.assert_allclose(linear_gn_eigenvalues(well.effective(), np.eye(3)),
                               np.linalg.svd(gn_factor(well.effective(), np.eye(3)), compute_uv=False) ** 2,
                               rtol=1e-10)
    assert full[0] / full[-1] > 1e17
    b = linear_gn_bounds(mats, np.eye(4))
    assert b.rank == 16 and b.kappa == pytest.approx(full[0] / full[-1], rel=1e-10)
