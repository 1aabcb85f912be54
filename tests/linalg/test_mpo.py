"""MPO decomposition and contraction: exact round trip, the TT-SVD bound, the gauge, tensorly agrees."""
import pytest
import torch

from reprobook.linalg.mpo import (full_bond_dims, matrix_to_mpo, mpo_num_params, mpo_to_matrix)

SHAPES = [((8, 1, 1, 1, 8), (8, 1, 1, 1, 8)), ((2, 4, 8), (2, 4, 8)), ((2, 2, 2, 2, 4), (4, 2, 2, 2, 2)),
          ((4, 16), (2, 32)), ((64,), (64,))]


def rand(shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


@pytest.mark.parametrize("rows,cols", SHAPES)
def test_round_trip_exact_and_bonds(rows, cols):
    w = rand((64, 64))
    m = matrix_to_mpo(w, rows, cols)
    assert m.bonds == full_bond_dims(rows, cols)
    assert m.num_params == mpo_num_params(rows, cols)
    assert float((m.to_matrix() - w).norm() / w.norm()) < 1e-12
    assert m.bound == 0.0


def test_rectangular_and_wrong_layout_is_caught():
    w = rand((10, 64), 1)
    m = matrix_to_mpo(w, (1, 2, 5), (4, 4, 4))
    assert torch.allclose(m.to_matrix(), w, atol=1e-12)
    # the interleaving matters: contracting the cores in the plain (non-interleaved) order is wrong
    flat = torch.tensordot(torch.tensordot(m.cores[0], m.cores[1], ([3], [0])), m.cores[2], ([5], [0]))
    assert not torch.allclose(flat.reshape(10, 64), w, atol=1e-3)


def test_mixed_canonical_gauge():
    w = rand((64, 64), 2)
    m = matrix_to_mpo(w, (2, 2, 2, 2, 4), (2, 2, 2, 2, 4), center=2)
    for k, c in enumerate(m.cores):
        if k < m.center:
            a = c.reshape(-1, c.shape[3])
            assert torch.allclose(a.T @ a, torch.eye(a.shape[1], dtype=a.dtype), atol=1e-12)
        elif k > m.center:
            a = c.reshape(c.shape[0], -1)
            assert torch.allclose(a @ a.T, torch.eye(a.shape[0], dtype=a.dtype), atol=1e-12)
    assert abs(float(m.cores[2].norm() - w.norm())) < 1e-10
    assert m.auxiliary == [0, 1, 3, 4]


@pytest.mark.parametrize("keep", ["largest", "smallest"])
def test_truncation_obeys_tt_svd_bound(keep):
    w = rand((64, 64), 3)
    for bond in (1, 4, 16):
        m = matrix_to_mpo(w, (2, 2, 4, 2, 2), (2, 2, 4, 2, 2), max_bond=bond, keep=keep)
        err = float((m.to_matrix() - w).norm())
        assert err <= m.bound * (1 + 1e-9) + 1e-12
        assert max(m.bonds) <= bond
    # keeping the largest singular values loses less than keeping the smallest
    best = matrix_to_mpo(w, (8, 8), (8, 8), max_bond=8)
    worst = matrix_to_mpo(w, (8, 8), (8, 8), max_bond=8, keep="smallest")
    assert (best.to_matrix() - w).norm() < (worst.to_matrix() - w).norm()


def test_low_rank_matrix_is_exact_at_small_bond():
    a, b = rand((64, 3), 4), rand((3, 64), 5)
    w = a @ b                                   # rank 3 as a matrix; (8, 8) x (8, 8) realigned rank <= 64
    m = matrix_to_mpo(w, (64, 1), (64, 1), max_bond=3)
    assert float((m.to_matrix() - w).norm()) < 1e-10


def test_contraction_is_differentiable():
    w = rand((16, 16), 6)
    cores = [c.clone().requires_grad_(True) for c in matrix_to_mpo(w, (4, 4), (4, 4)).cores]
    mpo_to_matrix(cores).sum().backward()
    assert all(c.grad is not None and torch.isfinite(c.grad).all() for c in cores)


def test_agrees_with_tensorly():
    tl = pytest.importorskip("tensorly")
    from tensorly.decomposition import tensor_train_matrix
    from tensorly.tt_matrix import tt_matrix_to_tensor

    tl.set_backend("pytorch")
    try:
        w = rand((64, 64), 7)
        rows = cols = (2, 4, 8)
        m = matrix_to_mpo(w, rows, cols)
        # tensorly's TT-matrix layout is ours: (r_{k-1}, i_k, j_k, r_k); its contraction of our cores
        ours_by_tl = tt_matrix_to_tensor(m.cores).reshape(64, 64)
        assert torch.allclose(ours_by_tl, w, atol=1e-12)
        # and its own decomposition finds the same full bond dimensions and reconstructs alike
        theirs = tensor_train_matrix(w.reshape(*rows, *cols), rank=m.bonds)
        assert [f.shape[3] for f in theirs.factors][:-1] == m.bonds[1:-1]
        assert torch.allclose(mpo_to_matrix(list(theirs.factors)), w, atol=1e-12)
    finally:
        tl.set_backend("numpy")


@pytest.mark.parametrize("bad,err", [
    (dict(row_shape=(4, 4), col_shape=(8, 8)), "multiplies to 16"),
    (dict(row_shape=(8, 8), col_shape=(64,)), "same number of factors"),
    (dict(row_shape=(8, 8), col_shape=(8, 8), center=2), "center"),
    (dict(row_shape=(8, 8), col_shape=(8, 8), keep="middle"), "keep"),
    (dict(row_shape=(8, 8), col_shape=(8, 8), max_bond=0), "max_bond"),
])
def test_bad_input(bad, err):
    with pytest.raises(ValueError, match=err):
        matrix_to_mpo(rand((64, 64)), **bad)


def test_bad_matrix_and_cores():
    with pytest.raises(ValueError, match="2-d"):
        matrix_to_mpo(rand((4, 4, 4)), (4,), (4,))
    with pytest.raises(TypeError, match="torch.Tensor"):
        matrix_to_mpo([[1.0]], (1,), (1,))
    with pytest.raises(ValueError, match="bond 1"):
        mpo_to_matrix([torch.zeros(1, 2, 2, 3), torch.zeros(2, 2, 2, 1)])
    with pytest.raises(ValueError, match="outer bonds"):
        mpo_to_matrix([torch.zeros(2, 2, 2, 1)])
