"""Exact properties of CaGP (float64): S = I recovers the exact GP, variance dominance, ELBO bound."""
import pytest
import torch

from reprobook.gp.cagp import (BlockSparseActions, Hyper, cagp_elbo, cagp_posterior,
                               exact_log_evidence, exact_posterior, fit_cagp, kernel_actions, rbf)

D = torch.float64


def _data(n=60, d=2, seed=0):
    g = torch.Generator().manual_seed(seed)
    X = torch.rand(n, d, generator=g, dtype=D)
    y = torch.sin(5 * X[:, 0]) + 0.1 * torch.randn(n, generator=g, dtype=D)
    Xs = torch.rand(40, d, generator=g, dtype=D) * 1.4 - 0.2
    return X, y, Xs, g


def _hyp(seed):
    g = torch.Generator().manual_seed(100 + seed)
    u = torch.rand(4, generator=g, dtype=D)
    return Hyper.init(2, lengthscale=0.1 + 0.5 * u[0].item(), outputscale=0.5 + u[1].item(),
                      noise=10 ** (-3 + 2 * u[2].item()))


def test_full_actions_equal_exact_gp():
    X, y, Xs, _ = _data()
    for s in range(3):
        hyp = _hyp(s)
        m0, v0 = exact_posterior(X, y, Xs, hyp)
        for S in (torch.eye(60, dtype=D), torch.linalg.qr(torch.randn(60, 60, dtype=D))[0]):
            m1, v1 = cagp_posterior(X, y, Xs, hyp, S)
            assert (m1 - m0).abs().max() < 1e-8
            assert (v1 - v0).abs().max() < 1e-10
        # block-sparse with one point per block is a diagonal S: also exact
        m2, v2 = cagp_posterior(X, y, Xs, hyp, BlockSparseActions(60, 60))
        assert (m2 - m0).abs().max() < 1e-8 and (v2 - v0).abs().max() < 1e-10


def test_variance_never_below_exact():
    X, y, Xs, g = _data()
    grid = torch.cartesian_prod(torch.linspace(-0.2, 1.2, 15, dtype=D),
                                torch.linspace(-0.2, 1.2, 15, dtype=D))
    for s in range(3):
        hyp = _hyp(s)
        _, v0 = exact_posterior(X, y, grid, hyp)
        for i in (1, 5, 20, 30):
            for S in (BlockSparseActions(60, i, generator=g), torch.randn(60, i, generator=g, dtype=D)):
                _, v = cagp_posterior(X, y, grid, hyp, S)
                assert (v - v0).min() >= -1e-10


def test_planted_bug_breaks_dominance():
    X, y, Xs, g = _data()
    hyp = Hyper.init(2, lengthscale=0.3, noise=0.05)
    _, v0 = exact_posterior(X, y, X, hyp)
    _, v = cagp_posterior(X, y, X, hyp, BlockSparseActions(60, 30, generator=g),
                          planted_bug="gram_without_noise")
    assert (v - v0).min() < -1e-6


def test_training_loss_bounds_negative_log_evidence():
    X, y, _, g = _data()
    for s in range(4):
        hyp = _hyp(s)
        nle = -exact_log_evidence(X, y, hyp)
        for i in (1, 6, 20):
            for S in (BlockSparseActions(60, i, generator=g), torch.randn(60, i, generator=g, dtype=D)):
                loss = -cagp_elbo(X, y, hyp, S)
                assert loss >= nle - 1e-8
        # tight at full actions
        assert abs(-cagp_elbo(X, y, hyp, torch.eye(60, dtype=D)) - nle) < 1e-8


def test_block_sparse_matches_dense():
    X, y, Xs, g = _data()
    hyp = _hyp(0)
    S = BlockSparseActions(60, 12, generator=g, order=torch.randperm(60, generator=g))
    Sd = S.dense()
    assert torch.allclose(kernel_actions(Xs, X, S, hyp), rbf(Xs, X, hyp) @ Sd, atol=1e-12)
    assert abs(cagp_elbo(X, y, hyp, S) - cagp_elbo(X, y, hyp, Sd)) < 1e-8
    assert torch.allclose(S.dense().T @ S.dense(), torch.diag(S.gram_diag()), atol=1e-14)


def test_fit_cagp_increases_elbo():
    X, y, _, _ = _data()
    hyp0 = Hyper.init(2)
    hyp, S = fit_cagp(X, y, n_actions=6, steps=10, seed=0)
    S0 = BlockSparseActions(60, 6, generator=torch.Generator().manual_seed(0),
                            order=torch.argsort(X[:, 0]))
    assert cagp_elbo(X, y, hyp, S) > cagp_elbo(X, y, hyp0, S0)


def test_shape_errors():
    X, y, Xs, _ = _data()
    hyp = _hyp(0)
    with pytest.raises(ValueError, match="y must be 1-D"):
        cagp_posterior(X, y[:-1], Xs, hyp, torch.eye(60, dtype=D))
    with pytest.raises(ValueError, match="S must be an"):
        cagp_posterior(X, y, Xs, hyp, torch.eye(59, dtype=D))
    with pytest.raises(ValueError, match="Xs has d=3"):
        cagp_posterior(X, y, torch.rand(5, 3, dtype=D), hyp, torch.eye(60, dtype=D))
    with pytest.raises(ValueError, match="must divide"):
        BlockSparseActions(60, 7)
    with pytest.raises(ValueError, match="actions were built"):
        cagp_elbo(X[:30], y[:30], hyp, BlockSparseActions(60, 6))
    with pytest.raises(ValueError, match="planted_bug"):
        cagp_posterior(X, y, Xs, hyp, torch.eye(60, dtype=D), planted_bug="nope")
    with pytest.raises(ValueError, match="X must be a 2-D"):
        exact_log_evidence(X[:, 0], y, hyp)


def test_planted_elbo_bug_breaks_the_bound():
    # without the KL term the loss at S = I is E_q[log p(y|f)] = log p(y) + KL(q || prior) > log p(y)
    X, y, _, g = _data()
    hyp = _hyp(0)
    nle = -exact_log_evidence(X, y, hyp)
    S = torch.eye(60, dtype=D)
    assert -cagp_elbo(X, y, hyp, S, planted_bug="elbo_without_kl") < nle - 1e-3
    assert abs(-cagp_elbo(X, y, hyp, S) - nle) < 1e-8
    # the bug lives in the loss only: the posterior is the correct one
    m0, v0 = cagp_posterior(X, y, X, hyp, S)
    m1, v1 = cagp_posterior(X, y, X, hyp, S, planted_bug="elbo_without_kl")
    assert torch.equal(m0, m1) and torch.equal(v0, v1)
    with pytest.raises(ValueError, match="planted_bug"):
        cagp_elbo(X, y, hyp, S, planted_bug="nope")


def test_chunked_kernel_actions_match_and_keep_less_for_backward():
    from reprobook.bench.autograd_memory import saved_tensor_bytes
    from reprobook.gp.cagp import BlockSparseActions, Hyper, cagp_elbo, kernel_actions
    g = torch.Generator().manual_seed(0)
    n, i = 240, 8
    X = torch.rand(n, 3, generator=g, dtype=torch.float64)
    y = torch.sin(3 * X).sum(1)
    S = BlockSparseActions(n, i, generator=g)
    hyp = Hyper.init(3, requires_grad=True)
    full = kernel_actions(X, X, S, hyp)
    assert torch.allclose(kernel_actions(X, X, S, hyp, chunk=50), full, atol=1e-12)
    # the loss and its gradient are the same
    l1 = cagp_elbo(X, y, hyp, S)
    g1 = torch.autograd.grad(l1, hyp.params() + S.params())
    l2 = cagp_elbo(X, y, hyp, S, chunk=40)
    g2 = torch.autograd.grad(l2, hyp.params() + S.params())
    assert torch.allclose(l1, l2, atol=1e-10)
    assert all(torch.allclose(a, b, atol=1e-9) for a, b in zip(g1, g2))
    # batched keeps an n x n kernel tensor for backward, chunked O(n i)
    assert saved_tensor_bytes(lambda: cagp_elbo(X, y, hyp, S)) > n * n * 8
    assert saved_tensor_bytes(lambda: cagp_elbo(X, y, hyp, S, chunk=40)) < n * n * 8 / 4
    with pytest.raises(ValueError, match="chunk"):
        kernel_actions(X, X, S, hyp, chunk=0)


def test_fit_exact_lbfgs_reaches_the_adam_optimum_and_more():
    from reprobook.gp.cagp import exact_log_evidence, fit_exact, fit_exact_lbfgs
    g = torch.Generator().manual_seed(1)
    X = torch.rand(80, 2, generator=g, dtype=torch.float64)
    y = torch.sin(5 * X[:, 0]) + 0.1 * torch.randn(80, generator=g, dtype=torch.float64)
    h1 = fit_exact_lbfgs(X, y, max_iter=60)
    h2 = fit_exact(X, y, steps=30, lr=0.05)
    assert exact_log_evidence(X, y, h1) >= exact_log_evidence(X, y, h2) - 1e-9
    # the irrelevant second input gets a longer lengthscale than the first
    assert h1.log_lengthscale[1] > h1.log_lengthscale[0]
    with pytest.raises(ValueError, match="max_iter"):
        fit_exact_lbfgs(X, y, max_iter=0)
